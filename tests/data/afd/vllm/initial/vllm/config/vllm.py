"""The top-level configuration."""

from dataclasses import dataclass, field

from vllm.config.compilation import CompilationConfig


@dataclass
class VllmConfig:
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
    additional_config: dict = field(default_factory=dict)
