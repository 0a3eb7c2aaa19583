"""Collection through Ray against the same probes run locally, on a local 3-node Ray cluster.

    PYTHONPATH=. python bench/cluster_overhead.py [--rounds N]

Starts `ray.cluster_utils.Cluster` (3 nodes, 1 CPU each), then times, per round:
- local: `collect()` of tests/data/cluster/cell.yaml in this process, once per node (3 runs, one
  after the other: what running the probes on each node by hand costs here);
- ray: `collect_cluster()` of the same rulebook against the cluster (one pinned task per node).
Prints the medians and the ratio ray/local. Needs the `cluster` extra. Figures depend on the
machine's load; they are for comparison, never asserted by a test.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policyrun.collection.cluster import collect_cluster  # noqa: E402
from policyrun.collection.run import collect  # noqa: E402
from policyrun.language.rulebook import load_rulebook  # noqa: E402

RULEBOOK = ROOT / "tests" / "data" / "cluster" / "cell.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    model = load_rulebook(RULEBOOK).model
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT)), "FAKE_DRIVER": "550"}
    common = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**common, "include_dashboard": False, "env_vars": env})
    try:
        for _ in range(2):
            cluster.add_node(**common, env_vars=env)
        cluster.wait_for_nodes(timeout=120)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        os.environ["FAKE_DRIVER"] = "550"
        local, through_ray = [], []
        collect_cluster(model, "check", {}, address=None, base_dir=Path.cwd(), rulebook_dir=None,
                        stream=io.StringIO())  # warm-up: worker processes start on first use
        for _ in range(args.rounds):
            t = time.perf_counter()
            for _node in range(3):
                collect(model, "check", {}, base_dir=Path.cwd())
            local.append(time.perf_counter() - t)
            t = time.perf_counter()
            collect_cluster(model, "check", {}, address=None, base_dir=Path.cwd(), rulebook_dir=None,
                            stream=io.StringIO())
            through_ray.append(time.perf_counter() - t)
        lm, rm = statistics.median(local), statistics.median(through_ray)
        print(f"local, 3 nodes one after another: median {lm:.3f}s over {args.rounds} rounds")
        print(f"ray, 3 nodes (one task each):     median {rm:.3f}s over {args.rounds} rounds")
        print(f"ratio ray/local: {rm / lm:.2f}")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
