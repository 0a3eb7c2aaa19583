"""Forward context shared by the model's layers."""

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class DPMetadata:
    num_tokens: int

    @staticmethod
    def make(vllm_config, num_tokens):
        return DPMetadata(num_tokens or 0)


@dataclass
class ForwardContext:
    attn_metadata: Any
    virtual_engine: int
    dp_metadata: DPMetadata | None = None
    batch_descriptor: Any = None


_forward_context: ForwardContext | None = None


@contextmanager
def set_forward_context(attn_metadata, vllm_config, virtual_engine=0, num_tokens=None, batch_descriptor=None):
    global _forward_context
    prev = _forward_context
    dp_metadata = DPMetadata.make(vllm_config, num_tokens)
    _forward_context = ForwardContext(attn_metadata, virtual_engine, dp_metadata, batch_descriptor)
    try:
        yield
    finally:
        _forward_context = prev
