"""Distributed state."""

from vllm.distributed.parallel_state import get_tp_group
