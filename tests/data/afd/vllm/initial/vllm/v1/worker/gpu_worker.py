"""GPU worker."""

from vllm.v1.worker.worker_base import WorkerBase


class Worker(WorkerBase):
    def init_device(self):
        self.device = "cuda"
