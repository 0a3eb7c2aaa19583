"""Machinery the probe families share: the git client, bounded files and child processes, RE2 line
scanning and user regexes, a revision's objects and a tree's text files, one bounded HTTP request.

No probe kind lives here, and nothing here imports a family (tests/test_import_graph.py)."""
