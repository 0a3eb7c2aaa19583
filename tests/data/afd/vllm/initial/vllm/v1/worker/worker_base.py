"""Worker base class."""

class WorkerBase:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
        self.vllm_config = vllm_config
        self.local_rank = local_rank
        self.rank = rank

    def init_device(self):
        raise NotImplementedError

    def load_model(self):
        raise NotImplementedError
