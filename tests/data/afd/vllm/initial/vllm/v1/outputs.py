"""Model runner outputs."""

from dataclasses import dataclass


@dataclass
class ModelRunnerOutput:
    req_ids: list
