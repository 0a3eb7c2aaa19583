"""Model runner outputs."""

from dataclasses import dataclass, field


@dataclass
class ModelRunnerOutput:
    req_ids: list


@dataclass
class IntermediateTensors:
    tensors: dict = field(default_factory=dict)
