"""Sequence data (IntermediateTensors lives in vllm.v1.outputs)."""

from vllm.v1.outputs import IntermediateTensors

__all__ = ["IntermediateTensors"]
