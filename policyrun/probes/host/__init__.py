"""Host probes: programs, environment and paths, processes, ports, shared memory, disks, docker, the
compiler toolchain, and HTTP endpoints."""
