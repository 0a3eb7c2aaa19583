"""vLLM: a high-throughput and memory-efficient inference engine."""

from vllm.version import __version__

__all__ = ["__version__"]
