"""Repository probes: git state and history, files and documents at a revision, version pins,
documentation claims, searches, CI workflows and the test modules a tree holds."""
