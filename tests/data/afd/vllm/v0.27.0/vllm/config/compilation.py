"""Compilation and CUDA graph configuration."""

import enum
from dataclasses import dataclass


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = 3
    FULL_AND_PIECEWISE = 4


@dataclass
class CompilationConfig:
    cudagraph_mode: CUDAGraphMode = CUDAGraphMode.PIECEWISE
    cudagraph_num_of_warmups: int = 1
