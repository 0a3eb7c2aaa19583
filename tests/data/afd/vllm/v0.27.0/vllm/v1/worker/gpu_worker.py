"""GPU worker."""

class Worker:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
        self.vllm_config = vllm_config
        self.local_rank = local_rank
        self.rank = rank

    def init_device(self):
        self.device = "cuda"

    def load_model(self):
        pass
