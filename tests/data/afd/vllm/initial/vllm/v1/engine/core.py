"""The engine core: schedules requests and drives the model executor."""

from vllm.config import VllmConfig


class EngineCore:
    def __init__(self, vllm_config: VllmConfig, executor_class, log_stats: bool, executor_fail_callback=None):
        self.vllm_config = vllm_config
        self.log_stats = log_stats
        self.model_executor = executor_class(vllm_config)
        self.scheduler = None

    def shutdown(self):
        self.model_executor.shutdown()
        if self.scheduler is not None:
            self.scheduler.shutdown()


class EngineCoreProc(EngineCore):
    def run_busy_loop(self):
        while True:
            self.step()
