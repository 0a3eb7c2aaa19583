#!/usr/bin/env bash
# Run on a lent GPU machine (the device tool), from the repository root, with the wheels the
# machine lacks carried in .whl/ (pytest and its dependencies go into the node's own interpreter,
# which the rulebook's probes start in isolation). Collects the facts of
# examples/first-rulebook/e2e-gate.yaml in its two modes, in examples/first-rulebook/runner/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/pytest-*.whl .whl/iniconfig-*.whl .whl/pluggy-*.whl .whl/pygments-*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1
cd examples/first-rulebook/runner || exit 1
for m in preflight review; do
  python3 -m policyrun collect ../e2e-gate.yaml --mode $m -o "$OUT/facts-$m.json" 2>&1
  python3 -m policyrun evaluate ../e2e-gate.yaml --mode $m --facts "$OUT/facts-$m.json" --out /tmp/e-$m --no-timestamp 2>&1
  echo "exit $?"
done
