"""Sequence data and intermediate tensors between pipeline stages."""

from dataclasses import dataclass, field


@dataclass
class IntermediateTensors:
    tensors: dict = field(default_factory=dict)
