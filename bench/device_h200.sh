#!/usr/bin/env bash
# Run on a lent GPU machine (the device tool), from the repository root, with the wheels that the
# machine lacks carried in .whl/ (see docs/probes-machine.md). Collects the machine facts twice —
# with the example rulebook and with the flagship's machine probes — times the collection, and
# records nvidia-smi and torch's own view for comparison. Writes everything under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/machine-probes/*.whl .whl/extra/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
TIMEFORMAT=%R
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
python3 - > "$OUT/torch.txt" 2>&1 <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)
print("cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version())
print("arch_list", torch.cuda.get_arch_list())
print("device_count", torch.cuda.device_count())
for i in range(torch.cuda.device_count()):
    print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
PY
{
  echo "import torch:"; time python3 -c "import torch"
  echo "pip check:"; time python3 -m pip check >/dev/null 2>&1
  for i in 1 2 3; do
    echo "policyrun collect examples/gpu-probes.yaml --mode on-device (run $i):"
    time python3 -m policyrun collect examples/gpu-probes.yaml --mode on-device -o "$OUT/gpu-probes-facts.json" 2>/dev/null
  done
  for i in 1 2; do
    echo "policyrun collect upgrade-gpu-version --mode final-validation, machine probes (run $i):"
    time python3 -m policyrun collect rulebooks/upgrade-gpu-version.yaml --mode final-validation \
      --set vllm_src=. --set target_ref=HEAD --set afd_base=HEAD \
      --only gpu --only stack --only toolchain --only leftover_processes --only leftover_ports --only leftover_shm \
      -o "$OUT/facts.json" 2>/dev/null
  done
} > "$OUT/timings.txt" 2>&1
cat "$OUT/timings.txt" "$OUT/torch.txt"
python3 -m policyrun evaluate examples/gpu-probes.yaml --mode on-device --facts "$OUT/gpu-probes-facts.json" \
  --out /tmp/eval --no-timestamp
cp /tmp/eval/trace.json "$OUT/gpu-probes-trace.json"
