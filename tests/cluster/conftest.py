"""The Ray tier: one small local Ray cluster for every test in this folder.

Skipped cleanly when `ray` is not installed (the README's default test command); CI installs the
`cluster` extra and runs it (.ci/run). Three nodes of one CPU each; each node's environment gives it
its own fake driver version (FAKE_DRIVER), which the `env` probe reads on that node.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

STORE = 80 * 1024 * 1024  # Ray's minimum object store is 75 MiB; the tests move a few KiB
DRIVERS = ("550.54.15", "550.54.15", "560.35.03")  # head, node 2, node 3: node 3 disagrees


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    # Workers import policyrun from this checkout: they inherit the raylets' environment.
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "RAY_DEDUP_LOGS": "0"}
    common = {"num_cpus": 1, "object_store_memory": STORE}
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={
        **common, "include_dashboard": False, "env_vars": {**env, "FAKE_DRIVER": DRIVERS[0]}})
    try:
        for driver in DRIVERS[1:]:
            cluster.add_node(**common, env_vars={**env, "FAKE_DRIVER": driver})
        cluster.wait_for_nodes(timeout=120)
        yield cluster
    finally:
        ray.shutdown()  # the tests' own connection (they list nodes) first, or shutdown refuses
        cluster.shutdown()
