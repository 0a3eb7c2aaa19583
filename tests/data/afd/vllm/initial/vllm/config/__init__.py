"""vLLM configuration."""

from vllm.config.compilation import CompilationConfig, CUDAGraphMode
from vllm.config.vllm import VllmConfig

__all__ = ["CUDAGraphMode", "CompilationConfig", "VllmConfig"]
