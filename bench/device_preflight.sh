#!/usr/bin/env bash
# Run on a lent GPU machine (the device tool), from the repository root, with the wheels the
# machine lacks carried in .whl/ (see docs/probes-machine.md). Collects the gpu-node-preflight
# facts in both modes, evaluates them, records nvidia-smi for comparison and times collection
# against its floor (`import torch` in the same interpreter). Writes everything under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
TIMEFORMAT=%R
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
{
  echo "python: $(command -v python3) $(python3 --version 2>&1)"
  for i in 1 2 3; do echo "import torch (run $i):"; time python3 -c "import torch"; done
  for i in 1 2 3; do
    echo "policyrun collect gpu-node-preflight --mode preflight (run $i):"
    time python3 -m policyrun collect rulebooks/gpu-node-preflight.yaml --mode preflight -o "$OUT/preflight-facts.json" 2>>"$OUT/collect-stderr.txt"
  done
  for i in 1 2; do
    echo "policyrun collect gpu-node-preflight --mode inventory (run $i):"
    time python3 -m policyrun collect rulebooks/gpu-node-preflight.yaml --mode inventory -o "$OUT/inventory-facts.json" 2>>"$OUT/collect-stderr.txt"
  done
  # Collection against its floor, alternating, with the ratio of medians (issue 24, item 6).
  python3 bench/gpu_collect.py rulebooks/gpu-node-preflight.yaml /tmp/floor-facts.json --mode preflight \
    --engine collect --repeat 5 --floor | tail -1
} > "$OUT/timings.txt" 2>&1
for m in preflight inventory; do
  echo "== policyrun evaluate --mode $m" >> "$OUT/evaluate.txt"
  python3 -m policyrun evaluate rulebooks/gpu-node-preflight.yaml --mode $m --facts "$OUT/$m-facts.json" \
    --out /tmp/eval-$m --no-timestamp --format md >> "$OUT/evaluate.txt" 2>&1
  echo "exit $?" >> "$OUT/evaluate.txt"
  cp /tmp/eval-$m/trace.json "$OUT/$m-trace.json"
done
cat "$OUT/timings.txt" "$OUT/evaluate.txt"
tail -20 "$OUT/collect-stderr.txt"
