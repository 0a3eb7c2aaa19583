#!/usr/bin/env bash
# Issue 24 item 6 on the device: gpu-node-preflight collection with one shared interpreter child
# (this checkout) against 319b426 (two children) and `import torch`, alternating, 5 rounds.
# Prepare the comparison first: mkdir -p .devrun/old && git archive 319b426 | tar -x -C .devrun/old
# (untracked, so the device tool carries it), wheels in .whl/ as for bench/device_preflight.sh.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
ROOT=$PWD
TIMEFORMAT=%R
for i in 1 2 3 4 5; do
  echo "round $i"
  echo -n "import torch: "; { time python3 -c "import torch" ; } 2>&1
  echo -n "old collect: "; { time (cd $ROOT/.devrun/old && PYTHONPATH=/tmp/site:$ROOT/.devrun/old python3 -m policyrun collect gpu-node-preflight --mode preflight -o /tmp/old.json 2>/dev/null); } 2>&1
  echo -n "new collect: "; { time (cd $ROOT && PYTHONPATH=/tmp/site:$ROOT python3 -m policyrun collect gpu-node-preflight --mode preflight -o /tmp/new.json 2>/tmp/new-stderr.txt); } 2>&1
done
cp /tmp/new.json $OUT/new-facts.json; cp /tmp/old.json $OUT/old-facts.json; cp /tmp/new-stderr.txt $OUT/
PYTHONPATH=/tmp/site:$ROOT python3 bench/gpu_collect.py rulebooks/gpu-node-preflight.yaml /tmp/floor-facts.json --mode preflight --engine collect --repeat 5 --floor > $OUT/floor.txt 2>&1; tail -3 $OUT/floor.txt
PYTHONPATH=/tmp/site:$ROOT python3 -m policyrun evaluate rulebooks/gpu-node-preflight.yaml --mode preflight --facts /tmp/new.json --out /tmp/ev --no-timestamp > $OUT/evaluate-new.txt 2>&1; echo "exit $?" >> $OUT/evaluate-new.txt
tail -12 $OUT/evaluate-new.txt
