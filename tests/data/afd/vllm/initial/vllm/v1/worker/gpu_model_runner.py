"""GPU model runner."""

from vllm.config import CUDAGraphMode, VllmConfig


class GPUModelRunner:
    def __init__(self, vllm_config: VllmConfig, device):
        self.vllm_config = vllm_config
        self.compilation_config = vllm_config.compilation_config
        self.device = device

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        return scheduler_output

    def _dummy_run(self, num_tokens, cudagraph_runtime_mode=CUDAGraphMode.NONE):
        return num_tokens

    def _warmup_and_capture(self, desc, cudagraph_runtime_mode, num_warmups=None):
        for _ in range(num_warmups or 1):
            self._dummy_run(desc)
        self._dummy_run(desc, cudagraph_runtime_mode)
