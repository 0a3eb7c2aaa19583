"""Fixture repositories for the flagship rulebook, built with git in a folder you choose.

They follow the real afd-plugin's conventions (/work/shared/corpus/afd-plugin.bundle) closely
enough that the rulebook's Python-aware probes meet what they meet there:

* an upstream "vllm" repository with annotated release tags `v0.26.1` and `v0.27.0`. Between them
  `vllm/attention/layer.py` is renamed (to `vllm/attention/layers/attention.py`),
  `vllm/v1/worker/worker_base.py` deleted, `set_forward_context` gains a parameter (a patched
  signature changes), `IntermediateTensors` moves from `vllm/sequence.py` to `vllm/v1/outputs.py`
  (the old module re-exports it), `vllm/config/compilation.py` changes (the plugin reaches it only
  through `vllm/config/__init__.py`'s re-export), the engine core, the model runner and the ubatch
  wrapper change, `requirements/cuda.txt` moves PyTorch 2.8.0 → 2.9.0, and unrelated files change
  too. A moving branch `main` is one commit past the target tag.
* the AFD plugin pinned to vLLM 0.26.1: `vllm==0.26.1` in pyproject's optional extra and a uv.lock
  entry; `TARGET_VLLM_VERSION: Final[str]` in `afd_plugin/compat/vllm.py` (re-exported by
  `afd_plugin/compat/__init__.py`) with runtime checks
  (`_parse_release(installed) == _parse_release(TARGET_VLLM_VERSION)`,
  `version_text.startswith(TARGET_VLLM_VERSION)`); patch modules whose docstrings name
  ``vllm.x.y.symbol``; `# ### PATCH START: <label>` / `# ### PATCH END: <label>` regions inside
  functions, documented by `# Patch reason:` / `# Patch functionality:` / `# Signature:` /
  `# Upstream: vLLM v0.26.1, vllm/...py` comment blocks; multi-line `from vllm.x import (...)`,
  `import vllm.x as m`, `from vllm.pkg import submodule`, TYPE_CHECKING imports; an Ascend
  CMakeLists.txt that is not GPU code; a README and docs with general, GPU and NPU support claims
  and a historical record; an earlier lesson. `post=True` adds the implementation commits on top
  (pins, constant, imports, annotations and GPU docs moved to 0.27.0; NPU docs left alone), plus
  the new lesson.

Every commit and tag has a fixed author, committer and date, so the SHAs are the same on every
machine; the examples under examples/ and the rulebook's test snapshots rely on that.

`python -m tests.afdfixtures snapshots` regenerates rulebooks/tests/*.facts.json and
`python -m tests.afdfixtures examples [NAME ...]` regenerates examples/*/facts.json, their inputs
and evidence files (final-h200-one-gpu takes its machine facts from examples/h200/facts.json, a
real node; `--machine FACTS.json` does the same for the other final-* scenarios).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
RULEBOOK = REPO_ROOT / "rulebooks" / "upgrade-gpu-version.yaml"
# The generic rulebook the flagship is an overlay of (its own test snapshots: `generic-*`).
GENERIC_RULEBOOK = REPO_ROOT / "rulebooks" / "upgrade-vllm-plugin.yaml"

CURRENT_VERSION = "0.26.1"
TARGET_VERSION = "0.27.0"
CURRENT_TAG = f"v{CURRENT_VERSION}"
TARGET_TAG = f"v{TARGET_VERSION}"

# Where snapshots and examples say the repositories live (collection happens in a temp folder).
STABLE_AFD = "/srv/afd-plugin"
STABLE_VLLM = "/srv/vllm"
STABLE_PYTHON = "/srv/venvs/afd-cu128/bin/python"
H200_FACTS = REPO_ROOT / "examples" / "h200" / "facts.json"


# --- git, deterministically ------------------------------------------------------------------------

_BASE_ENV = {
    "GIT_AUTHOR_NAME": "AFD Maintainer", "GIT_AUTHOR_EMAIL": "afd@example.org",
    "GIT_COMMITTER_NAME": "AFD Maintainer", "GIT_COMMITTER_EMAIL": "afd@example.org",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C", "TZ": "UTC",
}


class Git:
    """Runs git in one repository; every commit gets the next fixed timestamp."""

    def __init__(self, root: Path, start: str) -> None:
        self.root = root
        self.clock = _parse_day(start)

    def __call__(self, *args: str, date: str | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(_BASE_ENV)
        when = date or self.tick()
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
        proc = subprocess.run(["git", "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
                               "-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main", *args],
                              cwd=self.root, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.root}: {proc.stderr}")
        return proc.stdout.strip()

    def tick(self) -> str:
        self.clock += 3600
        return f"{self.clock} +0000"

    def commit(self, message: str, *, day: str | None = None) -> str:
        if day:
            self.clock = _parse_day(day)
        self("add", "-A")
        self("commit", "-q", "-m", message)
        return self("rev-parse", "HEAD")

    def tag(self, name: str, message: str) -> str:
        self("tag", "-a", name, "-m", message)
        return self("rev-parse", f"{name}^{{commit}}")


def _parse_day(day: str) -> int:
    import calendar
    import time

    return calendar.timegm(time.strptime(day, "%Y-%m-%d")) + 9 * 3600


def write(root: Path, files: Mapping[str, str | None]) -> None:
    """Write (or, with None, delete) files relative to root."""
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")


# --- the upstream vLLM repository ------------------------------------------------------------------

@dataclass
class VllmRepo:
    path: Path
    current_sha: str
    target_sha: str
    main_sha: str


def _pyfile(doc: str, body: str) -> str:
    return f'"""{doc}"""\n\n{body.strip()}\n'


_FORWARD_CONTEXT = _pyfile("Forward context shared by the model's layers.", """
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


_forward_context: ForwardContext | None = None


@contextmanager
def set_forward_context(attn_metadata, vllm_config, virtual_engine=0, num_tokens=None):
    global _forward_context
    prev = _forward_context
    dp_metadata = DPMetadata.make(vllm_config, num_tokens)
    _forward_context = ForwardContext(attn_metadata, virtual_engine, dp_metadata)
    try:
        yield
    finally:
        _forward_context = prev
""")

_FORWARD_CONTEXT_V2 = (_FORWARD_CONTEXT
                       .replace("    dp_metadata: DPMetadata | None = None\n",
                                "    dp_metadata: DPMetadata | None = None\n    batch_descriptor: Any = None\n")
                       .replace("virtual_engine=0, num_tokens=None):",
                                "virtual_engine=0, num_tokens=None, batch_descriptor=None):")
                       .replace("ForwardContext(attn_metadata, virtual_engine, dp_metadata)",
                                "ForwardContext(attn_metadata, virtual_engine, dp_metadata, batch_descriptor)"))

_COMPILATION = _pyfile("Compilation and CUDA graph configuration.", """
import enum
from dataclasses import dataclass


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = 3


@dataclass
class CompilationConfig:
    cudagraph_mode: CUDAGraphMode = CUDAGraphMode.PIECEWISE
    cudagraph_num_of_warmups: int = 1
""")

_ENGINE_CORE = _pyfile("The engine core: schedules requests and drives the model executor.", """
from vllm.config import VllmConfig


class EngineCore:
    def __init__(self, vllm_config: VllmConfig, executor_class, log_stats: bool, executor_fail_callback=None):
        self.vllm_config = vllm_config
        self.log_stats = log_stats
        self.model_executor = executor_class(vllm_config)
        self.scheduler = None

    def shutdown(self):
        self.model_executor.shutdown()
        if self.scheduler is not None:
            self.scheduler.shutdown()


class EngineCoreProc(EngineCore):
    def run_busy_loop(self):
        while True:
            self.step()
""")

_MODEL_RUNNER = _pyfile("GPU model runner.", """
from vllm.config import CUDAGraphMode, VllmConfig


class GPUModelRunner:
    def __init__(self, vllm_config: VllmConfig, device):
        self.vllm_config = vllm_config
        self.compilation_config = vllm_config.compilation_config
        self.device = device

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        return scheduler_output

    def _dummy_run(self, num_tokens, cudagraph_runtime_mode=CUDAGraphMode.NONE):
        return num_tokens

    def _warmup_and_capture(self, desc, cudagraph_runtime_mode, num_warmups=None):
        for _ in range(num_warmups or 1):
            self._dummy_run(desc)
        self._dummy_run(desc, cudagraph_runtime_mode)
""")

_UBATCH_WRAPPER = _pyfile("Dual-batch overlap: two micro-batches on two threads.", """
import threading


class UBatchWrapper:
    def __init__(self, runnable):
        self.runnable = runnable
        self.ready = threading.Event()

    def _run_ubatches(self, ubatch_metadata, model):
        results = []
        for metadata in ubatch_metadata:
            results.append(model(metadata))
        return results
""")

_WORKER_BASE = _pyfile("Worker base class.", """
class WorkerBase:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
        self.vllm_config = vllm_config
        self.local_rank = local_rank
        self.rank = rank

    def init_device(self):
        raise NotImplementedError

    def load_model(self):
        raise NotImplementedError
""")

_UPSTREAM_V1: dict[str, str] = {
    "README.md": "# vLLM\n\nA high-throughput and memory-efficient inference engine.\n",
    "pyproject.toml": '[project]\nname = "vllm"\ndynamic = ["version"]\n',
    "requirements/cuda.txt": ("# Dependencies for NVIDIA GPUs\nray[cgraph]>=2.48.0\ntorch==2.8.0\ntorchaudio==2.8.0\n"
                              "torchvision==0.23.0\n# FlashInfer should be updated together with the Dockerfile\n"
                              "flashinfer-python==0.3.1\n"),
    "vllm/__init__.py": _pyfile("vLLM: a high-throughput and memory-efficient inference engine.",
                                "from vllm.version import __version__\n\n__all__ = [\"__version__\"]\n"),
    "vllm/version.py": f'__version__ = "{CURRENT_VERSION}"\n',
    "vllm/config/__init__.py": _pyfile("vLLM configuration.", """
from vllm.config.compilation import CompilationConfig, CUDAGraphMode
from vllm.config.vllm import VllmConfig

__all__ = ["CUDAGraphMode", "CompilationConfig", "VllmConfig"]
"""),
    "vllm/config/compilation.py": _COMPILATION,
    "vllm/config/vllm.py": _pyfile("The top-level configuration.", """
from dataclasses import dataclass, field

from vllm.config.compilation import CompilationConfig


@dataclass
class VllmConfig:
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
    additional_config: dict = field(default_factory=dict)
"""),
    "vllm/forward_context.py": _FORWARD_CONTEXT,
    "vllm/sequence.py": _pyfile("Sequence data and intermediate tensors between pipeline stages.", """
from dataclasses import dataclass, field


@dataclass
class IntermediateTensors:
    tensors: dict = field(default_factory=dict)
"""),
    "vllm/attention/__init__.py": "",
    "vllm/attention/layer.py": _pyfile("Attention layer.", """
class Attention:
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None):
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = scale
        self.num_kv_heads = num_kv_heads or num_heads

    def forward(self, query, key, value):
        return query
"""),
    "vllm/distributed/__init__.py": _pyfile("Distributed state.",
                                            "from vllm.distributed.parallel_state import get_tp_group\n"),
    "vllm/distributed/parallel_state.py": _pyfile("Process groups.", """
_TP = None


def get_tp_group():
    return _TP
"""),
    "vllm/distributed/kv_transfer/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": _pyfile("KV connector base.", """
class KVConnectorBase_V1:
    def start_load_kv(self, forward_context, **kwargs):
        raise NotImplementedError
"""),
    "vllm/v1/__init__.py": "",
    "vllm/v1/outputs.py": _pyfile("Model runner outputs.", """
from dataclasses import dataclass


@dataclass
class ModelRunnerOutput:
    req_ids: list
"""),
    "vllm/v1/engine/__init__.py": "",
    "vllm/v1/engine/core.py": _ENGINE_CORE,
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/gpu_model_runner.py": _MODEL_RUNNER,
    "vllm/v1/worker/gpu_ubatch_wrapper.py": _UBATCH_WRAPPER,
    "vllm/v1/worker/gpu_worker.py": _pyfile("GPU worker.", """
from vllm.v1.worker.worker_base import WorkerBase


class Worker(WorkerBase):
    def init_device(self):
        self.device = "cuda"
"""),
    "vllm/v1/worker/worker_base.py": _WORKER_BASE,
    "vllm/entrypoints/openai/api_server.py": _pyfile("OpenAI-compatible server.", "def run_server():\n    pass\n"),
}


def build_vllm(root: Path) -> VllmRepo:
    """The upstream repository; both release tags are annotated."""
    root.mkdir(parents=True, exist_ok=True)
    git = Git(root, "2025-05-01")
    git("init", "-q")
    write(root, _UPSTREAM_V1)
    git.commit("Initial import")
    write(root, {"vllm/entrypoints/openai/api_server.py": _UPSTREAM_V1["vllm/entrypoints/openai/api_server.py"]
                 + "\n\ndef build_app():\n    pass\n"})
    git.commit("[Frontend] split app construction")
    current = git.tag(CURRENT_TAG, f"vLLM {CURRENT_VERSION}")

    # Target development: a rename, a deletion, a signature change, a move behind a re-export,
    # behaviour changes, a PyTorch bump, noise.
    git.clock = _parse_day("2025-06-02")
    git("mv", "vllm/attention/layer.py", "vllm/attention/layers_attention_tmp.py")
    (root / "vllm/attention/layers").mkdir()
    git("mv", "vllm/attention/layers_attention_tmp.py", "vllm/attention/layers/attention.py")
    write(root, {"vllm/attention/layers/__init__.py": ""})
    git.commit("[Attention] move the attention layer into vllm/attention/layers/")
    write(root, {"vllm/forward_context.py": _FORWARD_CONTEXT_V2})
    git.commit("[Core] batch descriptors in the forward context")
    write(root, {"vllm/config/compilation.py": _COMPILATION.replace(
        "    FULL_DECODE_ONLY = 3\n", "    FULL_DECODE_ONLY = 3\n    FULL_AND_PIECEWISE = 4\n")})
    git.commit("[CUDAGraph] FULL_AND_PIECEWISE mode")
    write(root, {
        "vllm/v1/outputs.py": _UPSTREAM_V1["vllm/v1/outputs.py"].replace(
            "from dataclasses import dataclass\n",
            "from dataclasses import dataclass, field\n") + "\n\n@dataclass\nclass IntermediateTensors:\n"
                                                             "    tensors: dict = field(default_factory=dict)\n",
        "vllm/sequence.py": _pyfile("Sequence data (IntermediateTensors lives in vllm.v1.outputs).", """
from vllm.v1.outputs import IntermediateTensors

__all__ = ["IntermediateTensors"]
""")})
    git.commit("[V1] move IntermediateTensors to vllm.v1.outputs")
    write(root, {"vllm/v1/worker/gpu_model_runner.py": _MODEL_RUNNER.replace(
        "    def execute_model(self, scheduler_output, intermediate_tensors=None):\n",
        "    def execute_model(self, scheduler_output, intermediate_tensors=None, ubatch_slices=None):\n"),
        "vllm/v1/worker/gpu_ubatch_wrapper.py": _UBATCH_WRAPPER.replace(
            "        for metadata in ubatch_metadata:\n",
            "        # Micro-batches now carry their own CUDA streams.\n        for metadata in ubatch_metadata:\n")})
    git.commit("[V1][DBO] plan micro-batches in the model runner")
    write(root, {"vllm/v1/worker/worker_base.py": None,
                 "vllm/v1/worker/gpu_worker.py": _pyfile("GPU worker.", """
class Worker:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
        self.vllm_config = vllm_config
        self.local_rank = local_rank
        self.rank = rank

    def init_device(self):
        self.device = "cuda"

    def load_model(self):
        pass
"""),
                 "vllm/v1/engine/core.py": _ENGINE_CORE.replace(
                     "        self.scheduler = None\n",
                     "        self.scheduler = None\n        self.batch_queue = None\n")})
    git.commit("[V1][Worker] fold WorkerBase into Worker")
    write(root, {"requirements/cuda.txt": _UPSTREAM_V1["requirements/cuda.txt"].replace("2.8.0", "2.9.0")
                 .replace("torchvision==0.23.0", "torchvision==0.24.0"),
                 "vllm/version.py": f'__version__ = "{TARGET_VERSION}"\n'})
    git.commit("[Build] PyTorch 2.9.0")
    write(root, {"README.md": _UPSTREAM_V1["README.md"] + "\nSee the docs for supported hardware.\n"})
    git.commit("[Doc] README")
    target = git.tag(TARGET_TAG, f"vLLM {TARGET_VERSION}")
    write(root, {"vllm/entrypoints/openai/api_server.py": _UPSTREAM_V1["vllm/entrypoints/openai/api_server.py"]
                 + "\n\ndef build_app():\n    return None\n"})
    main = git.commit("[Misc] build_app returns the app")
    return VllmRepo(root, current, target, main)


# --- the AFD plugin --------------------------------------------------------------------------------

@dataclass
class PluginRepo:
    path: Path
    base_sha: str  # the immutable pre-upgrade commit
    head_sha: str
    commits: list[str] = field(default_factory=list)


_HEADER = "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project\n"


def _module(doc: str, body: str) -> str:
    return f'{_HEADER}"""{doc}"""\n\n{body.strip()}\n'


def _compat_vllm(version: str) -> str:
    return _module("Version-aware vLLM compatibility helpers.", f'''
from __future__ import annotations

import re
import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import Final

TARGET_VLLM_VERSION: Final[str] = "{version}"


def _parse_release(value: str) -> tuple[int, int, int]:
    match = re.match(r"^(\\d+)\\.(\\d+)\\.(\\d+)", value)
    if match is None:
        raise ValueError(f"cannot parse vLLM version {{value!r}}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def get_installed_vllm_version() -> str | None:
    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def is_vllm_version_supported(installed_version: str | None = None) -> bool:
    if installed_version is None:
        installed_version = get_installed_vllm_version()
    if installed_version is None:
        return False

    return _parse_release(installed_version) == _parse_release(TARGET_VLLM_VERSION)


def assert_vllm_version_supported(*, strict: bool = True) -> None:
    installed_version = get_installed_vllm_version()
    if is_vllm_version_supported(installed_version):
        return

    message = (
        "AFD plugin currently supports exactly vLLM "
        f"{{TARGET_VLLM_VERSION}}; installed vLLM version is "
        f"{{installed_version or 'not installed'}}"
    )
    if strict:
        raise RuntimeError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=2)


__all__ = [
    "TARGET_VLLM_VERSION",
    "assert_vllm_version_supported",
    "get_installed_vllm_version",
    "is_vllm_version_supported",
]
''')


_COMPAT_INIT = _module("Compatibility helpers for the target vLLM runtime.", '''
from afd_plugin.compat.vllm import (
    TARGET_VLLM_VERSION,
    assert_vllm_version_supported,
    get_installed_vllm_version,
    is_vllm_version_supported,
)

__all__ = [
    "TARGET_VLLM_VERSION",
    "assert_vllm_version_supported",
    "get_installed_vllm_version",
    "is_vllm_version_supported",
]
''')

_PLUGIN_INIT = _module("AFD plugin for vLLM, registered through the vllm.general_plugins entry point.", '''
from __future__ import annotations


def register_afd() -> None:
    from afd_plugin.compat import assert_vllm_version_supported

    assert_vllm_version_supported(strict=False)
    import afd_plugin.compat.patches.engine_core  # noqa: F401
    import afd_plugin.compat.patches.forward_context  # noqa: F401
''')

_PATCHES_INIT = _module('''Isolated monkey-patch namespace.

Patches in this package must remain idempotent, version-aware, documented, and
covered by CPU-safe tests whenever possible.
''', '''
__all__: list[str] = []
''')

_CONFIG = _module("AFD configuration read from --additional-config.", '''
from __future__ import annotations

from typing import Any


def _afd(vllm_config: Any) -> dict[str, Any]:
    return dict(getattr(vllm_config, "additional_config", {}).get("afd", {}))


def is_afd_ffn_config(vllm_config: Any) -> bool:
    return _afd(vllm_config).get("role") == "ffn"


def is_afd_async_dp(vllm_config: Any) -> bool:
    return bool(_afd(vllm_config).get("async_dp"))
''')

_ENGINE_CORE_PATCH = _module('''EngineCore compatibility patch for AFD FFN daemon mode.

This module patches:
1. ``vllm.v1.engine.core.EngineCore.__init__``
2. ``vllm.v1.engine.core.EngineCore.shutdown``

Why:
    The AFD FFN side runs as a connector daemon, not as a request-scheduling
    EngineCore, so it returns before KV cache and scheduler setup.

Future plan:
    Remove this patch when vLLM exposes a role hook in EngineCore.
''', '''
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vllm.v1.engine.core as core_module

from afd_plugin.config import is_afd_ffn_config

if TYPE_CHECKING:
    from vllm.config import VllmConfig


# Patch reason: AFD FFN ranks run as connector daemons instead of normal
# request-scheduling EngineCore instances.
# Patch functionality: returns after model executor construction for AFD FFN
# configs while preserving the upstream startup for non-AFD configs.
# Signature: matches upstream; no added parameters.
def __init__(
    self,
    vllm_config: VllmConfig,
    executor_class: type[Any],
    log_stats: bool,
    executor_fail_callback: Any = None,
):
    # ### PATCH START: AFD FFN EngineCore daemon initialization
    # FFN ranks are connector daemons: stop after executor construction.
    if is_afd_ffn_config(vllm_config):
        self.vllm_config = vllm_config
        self.model_executor = executor_class(vllm_config)
        return
    # ### PATCH END: AFD FFN EngineCore daemon initialization

    self.vllm_config = vllm_config
    self.log_stats = log_stats
    self.model_executor = executor_class(vllm_config)
    self.scheduler = None


# Patch reason: FFN daemon engines never build a scheduler, so the upstream
# shutdown would fail on it.
# Patch functionality: shuts down the model executor and skips the scheduler
# for AFD FFN engines.
# Signature: matches upstream; no added parameters.
def shutdown(self):
    # ### PATCH START: AFD FFN EngineCore shutdown
    if getattr(self, "scheduler", None) is None:
        self.model_executor.shutdown()
        return
    # ### PATCH END: AFD FFN EngineCore shutdown
    self.model_executor.shutdown()
    self.scheduler.shutdown()


core_module.EngineCore.__init__ = __init__
core_module.EngineCore.shutdown = shutdown
''')


def _forward_context_patch(*, post: bool, functionality: bool = True) -> str:
    params = ("attn_metadata: Any,\n    vllm_config: VllmConfig,\n    virtual_engine: int = 0,\n"
              "    num_tokens: int | None = None,\n")
    if post:
        params += "    batch_descriptor: Any = None,\n"
    extra = ", batch_descriptor" if post else ""
    doc = ("# Patch functionality: preserves the upstream forward-context setup and\n"
           "# skips DP metadata creation only for AFD async-DP configs.\n") if functionality else ""
    return _module('''Patches for AFD async-DP forward-context coordination.

This module patches:
1. ``vllm.forward_context.set_forward_context``

Why:
    Upstream builds data-parallel metadata whenever DP size is greater than
    one. AFD async-DP coordinates through the connector instead.

How:
    Importing this module replaces ``set_forward_context`` in place when the
    installed vLLM is the one the plugin targets.
''', f'''
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import vllm.forward_context as forward_context_module
from vllm.config import (
    CUDAGraphMode,
    VllmConfig,
)

from afd_plugin.compat.vllm import TARGET_VLLM_VERSION
from afd_plugin.config import is_afd_async_dp

_GRAPH_MODES = (CUDAGraphMode.NONE, CUDAGraphMode.FULL_DECODE_ONLY)


# Patch reason: upstream set_forward_context always creates DP metadata for
# data-parallel ranks, but AFD async-DP uses connector-driven coordination.
{doc}# Signature: matches upstream; no added parameters.
@contextmanager
def set_forward_context(
    {params.strip()}
):
    prev = forward_context_module._forward_context
    # ### PATCH START: skip DP metadata for AFD async-DP
    dp_metadata = None
    if not is_afd_async_dp(vllm_config):
        dp_metadata = forward_context_module.DPMetadata.make(vllm_config, num_tokens)
    # ### PATCH END: skip DP metadata for AFD async-DP
    forward_context_module._forward_context = forward_context_module.ForwardContext(
        attn_metadata, virtual_engine, dp_metadata{extra}
    )
    try:
        yield
    finally:
        forward_context_module._forward_context = prev


def _is_target_vllm_compatible() -> bool:
    try:
        import vllm

        version_value = vllm.__version__
    except (AttributeError, ImportError):
        return True
    version_text = str(version_value)
    if "dev" in version_text:
        return True
    return version_text.startswith(TARGET_VLLM_VERSION)


if _is_target_vllm_compatible():
    forward_context_module.set_forward_context = set_forward_context
''')


def _attention_runner(ref: str, *, post: bool) -> str:
    module = "vllm.attention.layers.attention" if post else "vllm.attention.layer"
    return _module("The Attention-side model runner: runs the attention layers, hands hidden states to the FFN side.", f'''
from __future__ import annotations

from typing import Any

from {module} import Attention
from vllm.config import CUDAGraphMode
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class AFDAttentionModelRunner(GPUModelRunner):
    """GPUModelRunner with the AFD connector between the attention and FFN halves."""

    def attention_layers(self) -> list[Attention]:
        return [m for m in self.model.modules() if isinstance(m, Attention)]

    # Patch reason: native capture does not publish AFD warmup/capture metadata.
    # Patch functionality: preserve the upstream warmup/capture flow while
    # publishing replayable connector state before formal graph capture.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM {ref}, vllm/v1/worker/gpu_model_runner.py
    def _warmup_and_capture(
        self,
        desc: Any,
        cudagraph_runtime_mode: CUDAGraphMode,
        num_warmups: int | None = None,
    ):
        if num_warmups is None:
            num_warmups = self.compilation_config.cudagraph_num_of_warmups
        # ### PATCH START: AFD warmup metadata
        self._afd_is_warmup = True
        # ### PATCH END: AFD warmup metadata
        for _ in range(num_warmups):
            self._dummy_run(desc)
        self._afd_is_warmup = False
        self._dummy_run(desc, cudagraph_runtime_mode)
''')


def _ubatch_wrapper(ref: str) -> str:
    return _module("Dual-batch overlap for AFD: two micro-batches in flight between Attention and FFN.", f'''
from __future__ import annotations

import threading
from typing import Any


class AFDUBatchWrapper:
    """Mirrors upstream's UBatchWrapper around the AFD connector."""

    def __init__(self, runnable: Any, connector: Any) -> None:
        self.runnable = runnable
        self.connector = connector
        self.ready = threading.Event()

    # Patch reason: upstream ubatch threads assume both micro-batches run the
    # whole model; AFD splits them across devices.
    # Patch functionality: keep the upstream thread hand-off and insert the
    # connector send/receive between the attention and FFN halves.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM {ref}, vllm/v1/worker/gpu_ubatch_wrapper.py
    def _run_ubatches(self, ubatch_metadata: list[Any], model: Any) -> list[Any]:
        results = []
        for metadata in ubatch_metadata:
            # ### PATCH START: AFD connector hand-off
            self.connector.send(metadata)
            # ### PATCH END: AFD connector hand-off
            results.append(model(metadata))
        return results
''')


def _ffn_worker(*, post: bool) -> str:
    if post:
        imports = "from vllm.distributed import parallel_state\nfrom vllm.v1.worker.gpu_worker import Worker"
        typing = "    from vllm.v1.outputs import IntermediateTensors"
        base = "Worker"
    else:
        imports = "from vllm.distributed import parallel_state\nfrom vllm.v1.worker.worker_base import WorkerBase"
        typing = "    from vllm.sequence import IntermediateTensors"
        base = "WorkerBase"
    return _module("The FFN worker: owns the expert weights and serves the Attention workers.", f'''
from __future__ import annotations

from typing import TYPE_CHECKING

{imports}

if TYPE_CHECKING:
{typing}


class AFDFFNWorker({base}):
    def init_device(self) -> None:
        self.device = "cuda"
        self.tp_group = parallel_state.get_tp_group()

    def load_model(self) -> None:
        self.model = None

    def receive(self) -> IntermediateTensors | None:
        return None
''')


_P2P_CONNECTOR = _module("P2P NCCL connector between the Attention and the FFN GPUs.", '''
from __future__ import annotations

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class P2pNcclAFDConnector(KVConnectorBase_V1):
    def start_load_kv(self, forward_context, **kwargs):
        return None

    def send(self, metadata) -> None:
        return None
''')

_ASCEND_CMAKE = """
cmake_minimum_required(VERSION 3.16)
project(afd_ascend_ops LANGUAGES CXX)

find_package(ASCEND REQUIRED)
add_library(afd_ascend_ops SHARED a2e/a2e.cpp)
target_link_libraries(afd_ascend_ops PRIVATE ascendcl)
"""


def _pyproject(version: str) -> str:
    return f'''
[build-system]
requires = ["setuptools>=61", "wheel", "setuptools-scm[toml]>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm-afd-plugin"
dynamic = ["version"]
description = "vLLM external plugin for Attention-FFN Disaggregation (AFD)"
readme = "README.md"
requires-python = ">=3.10,<3.14"
dependencies = []

# Keep vLLM optional so CPU-only development can run import/config tests.
# Install the runtime extra only in environments with a compatible vLLM wheel.
[project.optional-dependencies]
vllm = ["vllm=={version}"]

[project.entry-points."vllm.general_plugins"]
afd = "afd_plugin:register_afd"

[dependency-groups]
dev = ["pytest>=7.0"]
'''


def _uv_lock(version: str, torch: str) -> str:
    return f'''
version = 1
revision = 3
requires-python = ">=3.10, <3.14"

[[package]]
name = "pytest"
version = "8.4.1"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "torch"
version = "{torch}"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "vllm"
version = "{version}"
source = {{ registry = "https://pypi.org/simple" }}
dependencies = [
    {{ name = "torch" }},
]

[[package]]
name = "vllm-afd-plugin"
source = {{ editable = "." }}

[package.optional-dependencies]
vllm = [
    {{ name = "vllm" }},
]

[package.dev-dependencies]
dev = [
    {{ name = "pytest" }},
]

[package.metadata]
requires-dist = [{{ name = "vllm", marker = "extra == 'vllm'", specifier = "=={version}" }}]
provides-extras = ["vllm"]

[package.metadata.requires-dev]
dev = [{{ name = "pytest", specifier = ">=7.0" }}]
'''


def _readme(version: str, *, npu: str = CURRENT_VERSION) -> str:
    history = ("- 2025-06-20: the GPU backend moved from vLLM v0.26.1 to v0.27.0 (PyTorch 2.8.0 to 2.9.0).\n"
               if version != CURRENT_VERSION else "")
    return f'''
# afd-plugin

## Overview

**afd-plugin** is a vLLM external plugin for **Attention-FFN Disaggregation (AFD)**: the
attention layers run on one device, the MLP/expert layers on another, joined by a connector.

The target runtime is **vLLM `v{version}`**. The plugin does not modify the vLLM source tree.

## Current Status

| Connector | Platform | Notes |
| --- | --- | --- |
| `P2pNcclAFDConnector` | CUDA | FFN ranks are ordered before Attention ranks. |
| `CAMP2pAFDConnector` | Ascend NPU | Validated on v0.26 with vLLM-Ascend commit `80d8c194f`. |

Known gaps:

- vLLM versions other than `{version}` are not claimed as supported.
- The DBO recipe records the earlier v0.24.0 experiment and must be used with the `release/v0.24` branch.

## Install

### GPU installation

```bash
uv sync --group dev --extra vllm
```

The optional extra pins `vllm=={version}`.

### Ascend NPU installation

| Component | Version |
| --- | --- |
| vLLM | `{npu}` |
| vLLM-Ascend | commit `80d8c194f` |

## History

- 2025-03-12: release 1.3 of the plugin ran on vLLM v0.25.0 with PyTorch 2.7.1.
- The prebuilt `afd-gpu:2025.04` image reports vLLM `0.25.1.dev12`; it was produced for the previous release.
{history}'''


def _gpu_guide(version: str, torch: str) -> str:
    return f'''
# GPU user guide

This guide targets vLLM v{version} with PyTorch {torch} built for CUDA 12.8 on H200 (sm_90).

Run the E2E suite with `pytest -m gpu tests/e2e` on two GPUs: one Attention and one FFN device.

Previously this guide covered vLLM v0.24.0 on A100.
'''


def _npu_guide(version: str) -> str:
    return f'''
# Ascend NPU user guide

The CAM connectors are validated on vLLM v{version} with vLLM-Ascend commit `80d8c194f` on Atlas A3.
'''


_OLD_LESSON = '''
# Lessons: vLLM v0.25.0 → v0.26.1

Historical hypotheses only; re-derive every fact from the exact sources of the next upgrade.

- The FFN worker's weight filter broke when upstream renamed expert parameters.
'''

_HISTORY_DOC = '''
# Release history

- Release 1.2 supported vLLM 0.24.0 on A100 and H100.
- Release 1.3 supported vLLM 0.25.0.
'''

_TEST_VERSION = '''
from afd_plugin.compat import TARGET_VLLM_VERSION

# A test that mentions the markers is not a patch:
# ### PATCH START: not a patch


def test_constant_is_a_release():
    assert TARGET_VLLM_VERSION.count(".") == 2
'''


def plugin_files(version: str, ref: str, torch: str, *, post: bool) -> dict[str, str]:
    return {
        "pyproject.toml": _pyproject(version),
        "uv.lock": _uv_lock(version, torch),
        "README.md": _readme(version),
        "docs/gpu/user-guide.md": _gpu_guide(version, torch),
        "docs/npu/user-guide.md": _npu_guide(CURRENT_VERSION),  # the GPU upgrade leaves NPU docs alone
        "docs/history/releases.md": _HISTORY_DOC,
        "afd_plugin/__init__.py": _PLUGIN_INIT,
        "afd_plugin/config.py": _CONFIG,
        "afd_plugin/compat/__init__.py": _COMPAT_INIT,
        "afd_plugin/compat/vllm.py": _compat_vllm(version),
        "afd_plugin/compat/patches/__init__.py": _PATCHES_INIT,
        "afd_plugin/compat/patches/engine_core.py": _ENGINE_CORE_PATCH,
        "afd_plugin/compat/patches/forward_context.py": _forward_context_patch(post=post),
        "afd_plugin/connectors/__init__.py": "",
        "afd_plugin/connectors/gpu/__init__.py": "",
        "afd_plugin/connectors/gpu/p2p.py": _P2P_CONNECTOR,
        "afd_plugin/v1/__init__.py": "",
        "afd_plugin/v1/worker/__init__.py": "",
        "afd_plugin/v1/worker/attention_model_runner.py": _attention_runner(ref, post=post),
        "afd_plugin/v1/worker/ffn_worker.py": _ffn_worker(post=post),
        "afd_plugin/v1/worker/ubatch_wrapper.py": _ubatch_wrapper(ref),
        "csrc/npu/CMakeLists.txt": _ASCEND_CMAKE,
        "references/20250312-v0.25.0-to-v0.26.1-lessons.md": _OLD_LESSON,
        "tests/unit/test_version.py": _TEST_VERSION,
    }


LESSON_DATE = "20250620"
NEW_LESSON = f"references/{LESSON_DATE}-{CURRENT_TAG}-to-{TARGET_TAG}-lessons.md"

# The implementation commits, each one upstream cause (the plan's stages name these files).
IMPLEMENTATION_STEPS = [
    ("Pin vLLM 0.27.0 and enforce it at import", ["pyproject.toml", "uv.lock", "afd_plugin/compat/vllm.py"]),
    ("Follow the attention layer move to vllm/attention/layers/", ["afd_plugin/v1/worker/attention_model_runner.py"]),
    ("Port set_forward_context to the v0.27.0 signature (batch_descriptor)",
     ["afd_plugin/compat/patches/forward_context.py"]),
    ("FFN worker: derive from Worker now that WorkerBase is gone; IntermediateTensors from vllm.v1.outputs",
     ["afd_plugin/v1/worker/ffn_worker.py"]),
    ("DBO wrapper: re-sync with gpu_ubatch_wrapper.py of v0.27.0", ["afd_plugin/v1/worker/ubatch_wrapper.py"]),
    ("Docs: vLLM 0.27.0 on GPUs", ["README.md", "docs/gpu/user-guide.md"]),
]


def build_plugin(root: Path, *, post: bool = False, lesson: bool = True,
                 variant: Mapping[str, str | None] | None = None) -> PluginRepo:
    """The plugin at the pre-upgrade commit; `post` adds the implementation commits.

    `variant` rewrites files in one more commit on top (e.g. a disagreeing constant).
    """
    root.mkdir(parents=True, exist_ok=True)
    git = Git(root, "2025-04-01")
    git("init", "-q")
    write(root, plugin_files(CURRENT_VERSION, CURRENT_TAG, "2.8.0", post=False))
    git.commit(f"AFD plugin for vLLM {CURRENT_VERSION}")
    write(root, {"afd_plugin/connectors/gpu/p2p.py": _P2P_CONNECTOR + "\n    def close(self) -> None:\n        return None\n"})
    base = git.commit("P2P connector: close() releases the transfer buffers")
    commits: list[str] = []
    if post:
        git.clock = _parse_day("2025-06-16")
        target = plugin_files(TARGET_VERSION, TARGET_TAG, "2.9.0", post=True)
        for message, files in IMPLEMENTATION_STEPS:
            write(root, {f: target[f] for f in files})
            commits.append(git.commit(message))
        if lesson:
            git.clock = _parse_day("2025-06-20")
            write(root, {NEW_LESSON: f"""
# Lessons: vLLM {CURRENT_TAG} → {TARGET_TAG}

## Exact identities
- vLLM {CURRENT_TAG} → {TARGET_TAG}; PyTorch 2.8.0 → 2.9.0 (cu128).

## Upstream changes that mattered
- `vllm/attention/layer.py` moved to `vllm/attention/layers/attention.py` (mechanical).
- `set_forward_context` gained `batch_descriptor` (the patch follows the new signature).
- `WorkerBase` was folded into `Worker` (behavioral: the FFN worker now inherits `Worker`).
"""})
            commits.append(git.commit(f"Lessons for the {CURRENT_TAG} → {TARGET_TAG} upgrade"))
    if variant:
        write(root, variant)
        commits.append(git.commit("variant"))
    head = git("rev-parse", "HEAD")
    return PluginRepo(root, base, head, commits)


# Variants used by tests and scenarios (files rewritten in one commit on top).
DISAGREEING_CONSTANT = {"afd_plugin/compat/vllm.py": _compat_vllm("0.26.0")}
DISAGREEING_README = {"README.md": _readme(CURRENT_VERSION).replace("runtime is **vLLM `v0.26.1`**",
                                                                    "runtime is **vLLM `v0.26.0`**")}
DISAGREEING_NPU_CLAIM = {"docs/npu/user-guide.md": _npu_guide("0.25.0"),
                         "README.md": _readme(CURRENT_VERSION, npu="0.25.0")}
MISSING_FUNCTIONALITY = {"afd_plugin/compat/patches/forward_context.py":
                         _forward_context_patch(post=False, functionality=False)}
UNBALANCED_MARKERS = {"afd_plugin/compat/patches/engine_core.py": _ENGINE_CORE_PATCH.replace(
    "    # ### PATCH END: AFD FFN EngineCore shutdown\n", "")}


# --- attestations and result files ----------------------------------------------------------------

# What the rulebook derives from the fixture diff (derived.impact_matrix), in its order:
# (upstream, status, change).
IMPACT_ROWS = [
    # upstream bodies the plugin patches that changed (python.patches finds the assignments)
    ("vllm.forward_context.set_forward_context", "M", "patched signature and body changed"),
    ("vllm.v1.engine.core.EngineCore.__init__", "M", "patched body changed"),
    ("vllm/config/compilation.py", "M", "modified"),
    ("vllm/forward_context.py", "M", "modified"),
    ("vllm/sequence.py", "M", "modified"),
    ("vllm/v1/engine/core.py", "M", "modified"),
    ("vllm/v1/worker/gpu_model_runner.py", "M", "modified"),
    ("vllm/v1/worker/gpu_ubatch_wrapper.py", "M", "modified"),
    ("vllm/v1/worker/worker_base.py", "D", "deleted"),
    ("vllm/attention/layer.py", "R", "renamed"),
    ("vllm.attention.layer.Attention", "D", "missing at the target"),
    ("vllm.v1.worker.worker_base.WorkerBase", "D", "missing at the target"),
    ("vllm.sequence.IntermediateTensors", "R", "defined elsewhere at the target"),
    ("vllm.forward_context.set_forward_context", "M", "patched signature changed"),
]

_CLASSIFICATION: dict[str, dict[str, Any]] = {
    "vllm/attention/layer.py": {"classification": "MECHANICAL", "invariant": "the Attention layers are found by type",
                                "replacement": "vllm/attention/layers/attention.py"},
    "vllm.attention.layer.Attention": {"classification": "MECHANICAL", "invariant": "the Attention layers are found by type",
                                       "replacement": "vllm.attention.layers.attention.Attention"},
    "vllm/config/compilation.py": {"classification": "BEHAVIORAL",
                                   "invariant": "AFD captures only NONE and FULL_DECODE_ONLY graphs",
                                   "notes": "new FULL_AND_PIECEWISE mode must be refused for AFD cells"},
    "vllm/forward_context.py": {"classification": "BEHAVIORAL",
                                "invariant": "AFD async-DP never builds DP metadata"},
    "vllm.forward_context.set_forward_context": {"classification": "BEHAVIORAL",
                                                 "invariant": "the patch keeps the upstream signature",
                                                 "notes": "batch_descriptor is passed through"},
    "vllm/sequence.py": {"classification": "MECHANICAL", "invariant": "FFN workers receive IntermediateTensors"},
    "vllm.v1.engine.core.EngineCore.__init__": {
        "classification": "BEHAVIORAL", "invariant": "FFN engines stop after executor construction",
        # the patch's copy needs no change for the target's new body (a new attribute it never
        # reads): reviewed against it, by its hash (python.symbols' body_hash at the target)
        "reviewed_body": "418eada9dfef8e0e"},
    "vllm.sequence.IntermediateTensors": {"classification": "MECHANICAL",
                                          "invariant": "FFN workers receive IntermediateTensors",
                                          "replacement": "vllm.v1.outputs.IntermediateTensors"},
    "vllm/v1/engine/core.py": {"classification": "BEHAVIORAL",
                               "invariant": "FFN engines stop after executor construction"},
    "vllm/v1/worker/gpu_model_runner.py": {"classification": "BEHAVIORAL",
                                           "invariant": "warmup metadata is published before graph capture",
                                           "notes": "execute_model gained ubatch_slices"},
    "vllm/v1/worker/gpu_ubatch_wrapper.py": {"classification": "BEHAVIORAL",
                                             "invariant": "the connector hand-off sits between the halves"},
    "vllm/v1/worker/worker_base.py": {"classification": "BEHAVIORAL",
                                      "invariant": "the FFN worker loads only FFN-owned weights",
                                      "replacement": "vllm/v1/worker/gpu_worker.py"},
    "vllm.v1.worker.worker_base.WorkerBase": {"classification": "BEHAVIORAL",
                                              "invariant": "the FFN worker loads only FFN-owned weights",
                                              "replacement": "vllm.v1.worker.gpu_worker.Worker"},
}


def architecture_doc(current_sha: str, target_sha: str, *, decision: str = "continue",
                     architectural: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [{"upstream": upstream, **_CLASSIFICATION[upstream]}
                                  for upstream in dict.fromkeys(u for u, _, _ in IMPACT_ROWS)]
    if architectural:
        for row in rows:
            if row["upstream"] == "vllm.v1.worker.worker_base.WorkerBase":
                row["classification"] = "ARCHITECTURAL"
                row["design_decision"] = {"status": "pending", "reference": "RFC-112: FFN worker lifecycle"}
    doc: dict[str, Any] = {"decision": decision, "reviewer": "r.chen (GPU backend)", "reviewed_at": "2025-06-10",
                           "current_sha": current_sha, "target_sha": target_sha,
                           "summary": "Local adaptations; no new public interface.", "rows": rows}
    if decision == "stop":
        doc["stop_reasons"] = ["WorkerBase removal replaces the worker lifecycle owner; the FFN worker needs a redesign"]
    return doc


PATCH_FILES = ["afd_plugin/compat/patches/engine_core.py", "afd_plugin/compat/patches/forward_context.py",
               "afd_plugin/v1/worker/attention_model_runner.py", "afd_plugin/v1/worker/ubatch_wrapper.py"]


def plan_doc(current_sha: str, target_sha: str) -> dict[str, Any]:
    return {
        "current_sha": current_sha, "target_sha": target_sha, "target_afd_version": "0.3.0", "backends": ["gpu"],
        "stages": [
            {"id": "S1-version-contract", "upstream": [],
             "files": ["pyproject.toml", "uv.lock", "afd_plugin/compat/vllm.py"],
             "invariant": "the plugin refuses any vLLM but the pinned one", "tests": ["tests/unit/test_version.py"]},
            {"id": "S2-attention-move", "upstream": ["vllm/attention/layer.py", "vllm.attention.layer.Attention"],
             "files": ["afd_plugin/v1/worker/attention_model_runner.py"],
             "invariant": "the Attention layers are found by type",
             "tests": ["tests/unit/v1/worker/test_attention_model_runner.py"]},
            {"id": "S3-forward-context", "upstream": ["vllm/forward_context.py", "vllm.forward_context.set_forward_context",
                                                      "vllm/config/compilation.py"],
             "files": ["afd_plugin/compat/patches/forward_context.py"],
             "invariant": "AFD async-DP never builds DP metadata",
             "tests": ["tests/unit/compat/patches/test_forward_context.py"],
             "risks": "graph capture with FULL_AND_PIECEWISE must stay refused"},
            {"id": "S4-ffn-worker", "upstream": ["vllm/v1/worker/worker_base.py", "vllm.v1.worker.worker_base.WorkerBase",
                                                 "vllm/sequence.py", "vllm.sequence.IntermediateTensors"],
             "files": ["afd_plugin/v1/worker/ffn_worker.py"],
             "invariant": "the FFN worker loads only FFN-owned weights",
             "tests": ["tests/unit/v1/worker/test_ffn_worker.py"]},
            {"id": "S5-runner-engine-dbo", "upstream": ["vllm/v1/worker/gpu_model_runner.py", "vllm/v1/engine/core.py",
                                                        "vllm/v1/worker/gpu_ubatch_wrapper.py",
                                                        "vllm.v1.engine.core.EngineCore.__init__"],
             "files": ["afd_plugin/v1/worker/ubatch_wrapper.py", "afd_plugin/compat/patches/engine_core.py"],
             "invariant": "FFN engines stop after executor construction; the connector hand-off sits between the halves",
             "tests": ["tests/unit/compat/patches/test_engine_core.py", "tests/unit/v1/worker/test_dbo.py"]},
            {"id": "S6-docs", "upstream": [], "files": ["README.md", "docs/gpu/"],
             "invariant": "public GPU claims match the validation ledger", "tests": ["docs consistency audit"],
             "docs_impact": "README target runtime and install pin, GPU user guide"},
        ],
        "patches": [
            {"file": "afd_plugin/compat/patches/engine_core.py", "disposition": "port",
             "removal_plan": "propose a role hook in EngineCore upstream",
             "tests": ["tests/unit/compat/patches/test_engine_core.py"]},
            {"file": "afd_plugin/compat/patches/forward_context.py", "disposition": "port",
             "removal_plan": "remove once vLLM lets a plugin opt out of DP metadata per role",
             "tests": ["tests/unit/compat/patches/test_forward_context.py"]},
            {"file": "afd_plugin/v1/worker/attention_model_runner.py", "disposition": "port",
             "removal_plan": "upstream a warmup-metadata hook in GPUModelRunner",
             "tests": ["tests/unit/v1/worker/test_attention_model_runner.py"]},
            {"file": "afd_plugin/v1/worker/ubatch_wrapper.py", "disposition": "delegate",
             "removal_plan": "delegate to UBatchWrapper once it exposes a hand-off callback",
             "tests": ["tests/unit/v1/worker/test_dbo.py"]},
        ],
        "exclusions": [
            {"test": "tests.e2e.test_features::test_dbo_tp2", "reason": "DBO with TP>1 is an excluded cell"},
            {"test": "tests.e2e.test_models::test_npu_parity", "reason": "NPU-only scenario"},
            "FP8 KV cache is not supported by the AFD connector (no test runs it)"],
        "evidence_gaps": [],
    }


def native_control_doc(gpu_uuids: list[str], *, vllm_version: str = TARGET_VERSION) -> dict[str, Any]:
    return {"afd_enabled": False, "vllm_version": vllm_version, "model": "/models/DeepSeek-V2-Lite-Chat",
            "command": "vllm serve /models/DeepSeek-V2-Lite-Chat --enforce-eager --tensor-parallel-size 1",
            "gpu_uuids": gpu_uuids, "requests_succeeded": 3,
            "output_oracle": "greedy completion of 'The capital of France is' contains 'Paris'",
            "kernel_smoke": "passed", "cleanup_clean": True, "log": "logs/native-control.log"}


def accuracy_doc(afd_sha: str, *, value: float = 0.781, limit: int | None = None) -> dict[str, Any]:
    return {"afd_sha": afd_sha, "vllm_version": TARGET_VERSION, "cases": [
        {"task": "gsm8k", "metric": "exact_match", "variant": "eager", "value": value, "limit": limit,
         "samples": 1319, "log": "logs/accuracy-gsm8k-eager.json"},
        {"task": "gsm8k", "metric": "exact_match", "variant": "graph", "value": round(value - 0.003, 3),
         "limit": limit, "samples": 1319, "log": "logs/accuracy-gsm8k-graph.json"},
    ]}


def junit_xml(cases: Iterable[tuple[str, str, str | None]], name: str = "pytest", commit: str | None = None) -> str:
    """(id, outcome, message) → pytest-style JUnit XML. outcome: passed|failed|error|skipped, or
    collection_skipped (id is then the module, as pytest writes a module skipped at collection).
    `commit`: the `policyrun.commit` suite property naming the commit the run was on."""
    from xml.sax.saxutils import escape, quoteattr

    rows = list(cases)
    counts = {k: sum(1 for _, o, _ in rows if o == k) for k in ("failed", "error")}
    skipped = sum(1 for _, o, _ in rows if o in ("skipped", "collection_skipped"))
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>",
           f'<testsuite name="{name}" errors="{counts["error"]}" failures="{counts["failed"]}" '
           f'skipped="{skipped}" tests="{len(rows)}" time="12.5" timestamp="2025-06-18T10:00:00" '
           'hostname="gpu-node-07">']
    if commit is not None:
        out.append(f'<properties><property name="policyrun.commit" value="{commit}" /></properties>')
    for test_id, outcome, message in rows:
        if outcome == "collection_skipped":
            path = "/srv/afd-plugin/" + test_id.replace(".", "/") + ".py"
            body = escape(repr((path, 8, f"Skipped: {message}")))
            out.append(f'<testcase classname="" name={quoteattr(test_id)} time="0.000">'
                       f'<skipped message="collection skipped">{body}</skipped></testcase>')
            continue
        cls, _, test = test_id.rpartition(".")
        head = f'<testcase classname={quoteattr(cls)} name={quoteattr(test)} time="0.5"'
        if outcome == "passed":
            out.append(head + " />")
        elif outcome == "skipped":
            out.append(head + f'><skipped type="pytest.skip" message={quoteattr(message or "")}>'
                              f'{escape(message or "")}</skipped></testcase>')
        elif outcome == "failed":
            out.append(head + f'><failure message={quoteattr(message or "")}>AssertionError</failure></testcase>')
        else:
            out.append(head + f'><error message={quoteattr(message or "")}>{escape(message or "")}</error></testcase>')
    out += ["</testsuite>", "</testsuites>", ""]
    return "\n".join(out)


UNIT_CASES = [(f"tests.unit.{m}.test_{t}", "passed", None)
              for m in ("test_version", "compat.patches.test_engine_core", "compat.patches.test_forward_context",
                        "v1.worker.test_attention_model_runner", "v1.worker.test_ffn_worker", "v1.worker.test_dbo")
              for t in ("a", "b")]
E2E_CASES = [
    ("tests.e2e.test_features.test_eager_request", "passed", None),
    ("tests.e2e.test_features.test_cuda_graph_replay", "passed", None),
    ("tests.e2e.test_features.test_dbo_two_stage", "passed", None),
    ("tests.e2e.test_features.test_dbo_tp2", "skipped", "DBO with TP>1 is an excluded cell (docs/support-matrix.md)"),
    ("tests.e2e.test_models.test_deepseek_v2_lite", "passed", None),
    ("tests.e2e.test_models.test_npu_parity", "skipped", "NPU-only scenario"),
    ("tests.e2e.test_upgrade.test_connector_cleanup", "passed", None),
]
E2E_UNEXPLAINED_SKIP = [*E2E_CASES[:-1],
                        ("tests.e2e.test_upgrade.test_connector_cleanup", "skipped",
                         "flaky on this runner, skipping for now")]


# --- machine facts (the same shapes gpu.nvml, python.stack and toolchain produce) -------------------

def gpu_fact(count: int = 2, processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """gpu.nvml's value for `count` H200s, produced by the real probe against the fake pynvml."""
    from tests.fakes import fake_pynvml as fake

    from policyrun.probes.base import ProbeContext
    from policyrun.probes.gpu.nvml import PROBES as GPU_PROBES

    module = fake.make_module(fake.hgx_h200(count))
    saved = sys.modules.get("pynvml")
    sys.modules["pynvml"] = module
    try:
        value = GPU_PROBES[0].run({}, ProbeContext(base_dir=Path("."), timeout_s=30)).value
    finally:
        if saved is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved
    if processes is not None:
        value["processes"] = processes
    return value


def stack_fact(*, vllm_version: str = TARGET_VERSION, torch_version: str = "2.9.0+cu128",
               torch_cuda: str | None = "12.8", pip_ok: bool = True) -> dict[str, Any]:
    """python.stack's value for the target interpreter (shape of _stack_script.py + pip check)."""
    site = "/srv/venvs/afd-cu128/lib/python3.12/site-packages"
    return {
        "interpreter": STABLE_PYTHON,
        "init_cuda": False,
        "python": {"version": "3.12.9", "implementation": "CPython", "executable": STABLE_PYTHON,
                   "prefix": "/srv/venvs/afd-cu128", "base_prefix": "/usr", "platform": "linux",
                   "machine": "x86_64", "libc": "glibc-2.35"},
        "torch": {"version": torch_version, "path": f"{site}/torch", "cuda": torch_cuda, "hip": None,
                  "git_version": "0fabc3ba44823f257e70ce397d989c8de5e362c1", "debug": False, "cxx11_abi": True,
                  "cudnn": "9.10.2", "cudnn_version_int": 91002, "nccl": "2.27.5",
                  "arch_list": ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "cuda_initialized": False},
        "vllm": {"version": vllm_version, "path": f"{site}/vllm", "direct_url": None, "commit": None,
                 "extension": {"name": "_C.abi3.so", "path": f"{site}/vllm/_C.abi3.so", "size": 402653184,
                               "sha256": "5d1f6c0b7a3e9c2d84f1e0a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80"},
                 "extensions": [{"name": "_C.abi3.so", "path": f"{site}/vllm/_C.abi3.so", "size": 402653184,
                                 "sha256": "5d1f6c0b7a3e9c2d84f1e0a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80"}]},
        "cuda": None, "missing": [], "import_errors": {}, "warnings": [],
        "pip_check": {"ok": pip_ok, "available": True,
                      "lines": ["No broken requirements found."] if pip_ok
                      else ["vllm 0.27.0 has requirement torch==2.9.0, but you have torch 2.8.0."]},
        "env": {"CUDA_HOME": "/usr/local/cuda-12.8", "NCCL_DEBUG": "WARN"},
    }


def record_fact(*, installed: bool = True, python: str = STABLE_PYTHON, commit: str | None = None,
                version: str = TARGET_VERSION, **fields: Any) -> dict[str, Any]:
    """python.record's value for the target interpreter's vLLM: by default a release wheel of the
    target whose Python files all equal vllm_src at the target (the counts that v0.27.0's release
    sources installed give: tests/real/test_runtime_build_real.py). `commit` None: the target's commit, filled in by
    collect_facts. `fields` override any field (a stub's counts, the files that differ)."""
    if not installed:
        return {"python": python, "python_version": "3.12.9", "installed": False, "distribution": None,
                "version": None, "rev": commit, "commit": commit, "record_files": 0, "compared": 0, "matched": 0,
                "differ": [], "differ_count": 0, "not_in_source": [], "not_in_source_count": 0,
                "generated": [], "generated_count": 0, "record_mismatch": [], "record_mismatch_count": 0,
                "matches": False, "installer": None, "direct_url": None, **fields}
    return {"python": python, "python_version": "3.12.9", "installed": True, "distribution": "vllm",
            "version": version, "rev": commit, "commit": commit, "record_files": 2756, "compared": 2160,
            "matched": 2160, "differ": [], "differ_count": 0, "not_in_source": [], "not_in_source_count": 0,
            "generated": ["vllm/_version.py"], "generated_count": 1, "record_mismatch": [],
            "record_mismatch_count": 0, "matches": True, "installer": "uv",
            "direct_url": {"url": f"file:///srv/wheels/vllm-{version}-cp38-abi3-manylinux_2_31_x86_64.whl",
                           "archive_info": {}}, **fields}


def cleanup_facts() -> dict[str, Any]:
    """system.processes / system.ports / system.shm on a node the experiment left clean."""
    return {"leftover_processes": {"matches": [], "count": 0,
                                   "pattern": "vllm serve|vllm\\.entrypoints|afd_plugin|run-e2e"},
            "leftover_ports": {"listening": [], "count": 0, "ports": []},
            "leftover_shm": {"entries": [], "count": 0, "total_size": 0}}


def toolchain_fact() -> dict[str, Any]:
    return {"nvcc": {"path": "/usr/local/cuda-12.8/bin/nvcc", "version": "12.8", "full_version": "12.8.93",
                     "raw": "Cuda compilation tools, release 12.8, V12.8.93"},
            "cc": {"path": "/usr/bin/c++", "version": "11.4.0", "family": "gcc",
                   "raw": "c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"},
            "missing": []}


def machine_facts(gpus: int = 2, **stack: Any) -> dict[str, Any]:
    return {"gpu": gpu_fact(gpus), "stack": stack_fact(**stack), "runtime_build": record_fact(),
            "toolchain": toolchain_fact(), **cleanup_facts()}


# --- collecting facts from fixture repositories --------------------------------------------------------

_MACHINE_COMMANDS: dict[str, list[str]] = {
    "gpu": ["nvmlInit", "nvmlSystemGetDriverVersion", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetComputeRunningProcesses"],
    "toolchain": ["/usr/local/cuda-12.8/bin/nvcc --version", "/usr/bin/c++ --version"],
    "leftover_processes": ["read /proc/*/cmdline"],
    "leftover_ports": ["read /proc/net/tcp", "read /proc/net/tcp6"],
    "leftover_shm": ["list /dev/shm"],
}


def machine_value(pid: str, value: Any, params: Mapping[str, Any]) -> Any:
    """A machine fact as this collection's probe would give it: runtime_build compared with the
    target commit the collection resolved (its `rev` parameter) unless the value names another."""
    if pid != "runtime_build":
        return value
    return {**value, "rev": params.get("rev"), "commit": value.get("commit") or params.get("rev")}


def collect_facts(mode: str, inputs: Mapping[str, Any], *, cwd: Path,
                  machine: Mapping[str, Any] | None = None, rulebook: Path = RULEBOOK) -> Any:
    """Run the rulebook's probes for `mode` (real repository probes); replace the machine facts.

    A replaced fact keeps the parameters the rulebook gave its probe in this collection, so
    `evaluate --facts` accepts the snapshot (it refuses facts collected with other parameters)."""
    from policyrun.collect import collect
    from policyrun.engine import load_checked
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.inputs import resolve_inputs

    rb = load_checked(rulebook)
    bound = resolve_inputs(rb.model, values=dict(inputs))
    snap = collect(rb.model, mode, bound, base_dir=cwd, rulebook_dir=rb.directory)
    facts = dict(snap.facts)
    for pid, value in (machine or {}).items():
        collected = facts.get(pid)
        if collected is None:  # not collected in this mode
            continue
        params = dict(collected.provenance.params)
        if pid == "runtime_build":
            value = machine_value(pid, value, params)
            commands = [f"{params.get('python') or STABLE_PYTHON} -I -B -c <policyrun/probes/_record_script.py> "
                        "'{\"distribution\": \"vllm\", \"object_format\": \"sha1\"}'",
                        f"git ls-tree -r -z --full-tree {params.get('rev')}"]
            facts[pid] = Fact(value=value, provenance=Provenance(probe=pid, kind=collected.provenance.kind,
                                                                 params=params, commands=commands))
            continue
        commands = _MACHINE_COMMANDS.get(pid) or [
            f"{params.get('python') or STABLE_PYTHON} -c <policyrun/probes/_stack_script.py> '{{\"init_cuda\": false}}'",
            f"{params.get('python') or STABLE_PYTHON} -m pip check"]
        facts[pid] = Fact(value=value, provenance=Provenance(probe=pid, kind=collected.provenance.kind,
                                                             params=params, commands=commands))
    return FactsSnapshot(rulebook=snap.rulebook, mode=mode, facts=dict(sorted(facts.items())))


def stable_json(snapshot: Any, replacements: Mapping[str, str]) -> str:
    """The snapshot as JSON with temp paths replaced and timestamps removed (reproducible files)."""
    data = json.loads(snapshot.to_json())
    data.pop("collected_at", None)
    for fact in data.get("facts", {}).values():
        prov = fact.get("provenance", {})
        for key in ("started_at", "finished_at", "duration_s"):
            prov.pop(key, None)
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    return text


@dataclass
class Workspace:
    """Fixture repositories plus an evidence folder, in one temp folder."""

    root: Path
    vllm: VllmRepo
    plugin: PluginRepo
    evidence: Path

    def replacements(self, evidence_as: str) -> dict[str, str]:
        return {str(self.plugin.path): STABLE_AFD, str(self.vllm.path): STABLE_VLLM,
                str(self.evidence): evidence_as, str(self.root): "/srv"}


def workspace(root: Path, *, post: bool = False, lesson: bool = True,
              variant: Mapping[str, str | None] | None = None) -> Workspace:
    root = root.resolve()
    vllm = build_vllm(root / "vllm")
    plugin = build_plugin(root / "afd-plugin", post=post, lesson=lesson, variant=variant)
    evidence = root / "evidence"
    evidence.mkdir(parents=True, exist_ok=True)
    return Workspace(root, vllm, plugin, evidence)


def dump_yaml(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")


# --- scenarios: the examples and the rulebook's test snapshots ----------------------------------------

@dataclass
class Scenario:
    name: str
    mode: str
    description: str
    post: bool = False
    variant: Mapping[str, str | None] | None = None
    architecture: str | None = "continue"  # None: no attestation; "stop"; "architectural"
    plan: bool = True
    final_files: bool = False  # unit/e2e/accuracy/native-control evidence
    e2e_cases: list[tuple[str, str, str | None]] = field(default_factory=lambda: list(E2E_CASES))
    extra_inputs: dict[str, Any] = field(default_factory=dict)
    gpus: int = 2
    machine_snapshot: Path | None = None  # a real node's machine facts (examples/h200/facts.json)
    rulebook: Path = RULEBOOK  # what collects the facts (the generic rulebook names no AFD input)


EXAMPLES = [
    Scenario("planning-pass", "planning-audit",
             "Planning audit of vLLM v0.26.1 → v0.27.0: every planning phase passes."),
    Scenario("identity-disagree", "planning-audit",
             "TARGET_VLLM_VERSION says 0.26.0 while the pins and the GPU/general docs say 0.26.1: identity is BLOCKED.",
             variant=DISAGREEING_CONSTANT),
    Scenario("architecture-stop", "planning-audit",
             "The reviewer decides to stop: WorkerBase removal needs an FFN worker redesign (STOPPED).",
             architecture="stop"),
    Scenario("final-unexplained-skip", "final-validation",
             "Final validation of the upgraded plugin; one E2E scenario was skipped without a documented reason.",
             post=True, final_files=True, e2e_cases=list(E2E_UNEXPLAINED_SKIP)),
    Scenario("final-pass", "final-validation",
             "Final validation of the upgraded plugin on two H200s: every phase passes.",
             post=True, final_files=True),
    Scenario("final-h200-one-gpu", "final-validation",
             "final-pass with the machine facts of a real one-H200 node (examples/h200): no vLLM there, identity BLOCKED.",
             post=True, final_files=True, machine_snapshot=H200_FACTS),
]


def scenario_inputs(sc: Scenario, ws: Workspace, evidence: str, python: str = STABLE_PYTHON) -> dict[str, Any]:
    inputs: dict[str, Any] = {"afd_repo": str(ws.plugin.path), "vllm_src": str(ws.vllm.path),
                              "target_ref": TARGET_TAG, "evidence_dir": evidence, "python": python}
    if sc.mode != "planning-audit":
        inputs["afd_base"] = ws.plugin.base_sha
    if sc.final_files:
        inputs.update(unit_junit=f"{evidence}/unit.xml", e2e_junit=f"{evidence}/e2e.xml",
                      accuracy_results=f"{evidence}/accuracy.yaml")
    inputs.update(sc.extra_inputs)
    return inputs


def write_evidence(sc: Scenario, ws: Workspace, folder: Path, gpu: Mapping[str, Any]) -> None:
    if sc.architecture is not None:
        doc = architecture_doc(ws.vllm.current_sha, ws.vllm.target_sha,
                               decision="stop" if sc.architecture == "stop" else "continue",
                               architectural=sc.architecture == "architectural")
        dump_yaml(folder / "architecture.yaml", doc)
    if sc.plan:
        dump_yaml(folder / "plan.yaml", plan_doc(ws.vllm.current_sha, ws.vllm.target_sha))
    if sc.final_files:
        dump_yaml(folder / "native-control.yaml", native_control_doc([d["uuid"] for d in gpu["devices"]]))
        dump_yaml(folder / "accuracy.yaml", accuracy_doc(ws.plugin.head_sha))
        head = ws.plugin.head_sha
        (folder / "unit.xml").write_text(junit_xml(UNIT_CASES, commit=head), encoding="utf-8")
        (folder / "e2e.xml").write_text(junit_xml(sc.e2e_cases, "gpu-e2e", commit=head), encoding="utf-8")


MACHINE_KINDS = {"gpu.nvml": "gpu", "python.stack": "stack", "python.record": "runtime_build", "toolchain": "toolchain",
                 "system.processes": "leftover_processes", "system.ports": "leftover_ports", "system.shm": "leftover_shm"}


def machine_from_snapshot(path: Path) -> dict[str, Any]:
    """Machine facts taken from a real snapshot (e.g. examples/h200/facts.json), matched by probe
    kind; kinds the snapshot lacks keep their synthetic values."""
    from policyrun.facts import load_facts

    machine = machine_facts()
    for fact in load_facts(path).facts.values():
        pid = MACHINE_KINDS.get(fact.provenance.kind)
        if pid and fact.ok and not (pid == "stack" and fact.provenance.params.get("init_cuda")):
            machine[pid] = fact.value
    if not any(f.provenance.kind == "python.record" for f in load_facts(path).facts.values()):
        # A node recorded before python.record: its vLLM is what the stack says it is.
        vllm = machine["stack"].get("vllm")
        machine["runtime_build"] = record_fact(installed=vllm is not None,
                                               python=str(machine["stack"].get("interpreter") or STABLE_PYTHON),
                                               version=str(vllm.get("version")) if vllm else TARGET_VERSION,
                                               python_version=str((machine["stack"].get("python") or {}).get("version")))
    return machine


def make_example(sc: Scenario, out_dir: Path, machine: dict[str, Any] | None = None) -> None:
    """Build the repositories, write the evidence into out_dir/evidence, collect, write facts.json
    and inputs.yaml. Paths inside are the stable ones (/srv/...) and examples/<name>/evidence."""
    rel_evidence = f"examples/{sc.name}/evidence"
    if sc.machine_snapshot is not None:
        machine = machine_from_snapshot(sc.machine_snapshot)
    # The target interpreter is the one whose stack the machine facts describe.
    python = str(machine["stack"].get("interpreter") or STABLE_PYTHON) if machine else STABLE_PYTHON
    with tempfile.TemporaryDirectory(prefix="afd-example-") as tmp:
        ws = workspace(Path(tmp), post=sc.post, variant=sc.variant)
        machine = dict(machine) if machine else machine_facts(sc.gpus)
        evidence = out_dir / "evidence"
        if evidence.exists():
            for f in evidence.iterdir():
                f.unlink()
        evidence.mkdir(parents=True, exist_ok=True)
        write_evidence(sc, ws, evidence, machine["gpu"])
        inputs = scenario_inputs(sc, ws, str(evidence.resolve()), python)
        snap = collect_facts(sc.mode, inputs, cwd=ws.plugin.path, machine=machine)
        reps = ws.replacements(rel_evidence)
        reps[str(evidence.resolve())] = rel_evidence
        (out_dir / "facts.json").write_text(stable_json(snap, reps), encoding="utf-8")
        shown = {k: (reps.get(v, v) if isinstance(v, str) else v) for k, v in inputs.items()}
        for key in ("unit_junit", "e2e_junit", "accuracy_results"):
            if key in shown:
                shown[key] = shown[key].replace(str(evidence.resolve()), rel_evidence)
        header = (f"# {sc.description}\n# Facts were collected in {STABLE_AFD} (cwd) against {STABLE_VLLM} with exactly "
                  "these inputs; re-evaluate with the command in examples/README.md.\n")
        (out_dir / "inputs.yaml").write_text(header + yaml.safe_dump(shown, sort_keys=False), encoding="utf-8")


# The rulebook's test snapshots: one per repository state and mode.
SNAPSHOTS = {
    "planning": Scenario("planning", "planning-audit", "pre-upgrade plugin, planning audit"),
    "implementation": Scenario("implementation", "implementation", "upgraded plugin, implementation mode",
                               post=True, final_files=True, extra_inputs={"gpu_validation": True}),
    "final": Scenario("final", "final-validation", "upgraded plugin, final validation", post=True, final_files=True),
    # The same plugin, collected by the generic upgrade-vllm-plugin (its conventions: no version
    # constant, the generic marker and comment-field patterns, lessons under docs/lessons).
    "generic-planning": Scenario("generic-planning", "planning-audit", "pre-upgrade plugin, generic rulebook",
                                 rulebook=GENERIC_RULEBOOK),
}


# The rows the generic rulebook adds from how the plugin binds upstream: the FFN worker subclasses
# WorkerBase and overrides two of its methods, all gone with worker_base.py at the target.
GENERIC_BINDING_ROWS = ["vllm.v1.worker.worker_base.WorkerBase.__init__", "vllm.v1.worker.worker_base.WorkerBase.init_device",
                        "vllm.v1.worker.worker_base.WorkerBase.load_model"]


def generic_evidence(folder: Path) -> None:
    """The attestations as the generic rulebook's reviewer writes them: the plan's field named
    `target_plugin_version`, and the binding rows classified and staged with the FFN worker."""
    arch_path, plan_path = folder / "architecture.yaml", folder / "plan.yaml"
    arch = yaml.safe_load(arch_path.read_text(encoding="utf-8"))
    arch["rows"] += [{"upstream": u, "classification": "BEHAVIORAL", "invariant": "the FFN worker loads only FFN-owned weights",
                      "replacement": "vllm.v1.worker.gpu_worker.Worker"} for u in GENERIC_BINDING_ROWS]
    dump_yaml(arch_path, arch)
    plan = yaml.safe_load(plan_path.read_text(encoding="utf-8"))
    plan["target_plugin_version"] = plan.pop("target_afd_version")
    next(st for st in plan["stages"] if st["id"] == "S4-ffn-worker")["upstream"] += GENERIC_BINDING_ROWS
    dump_yaml(plan_path, plan)


def make_snapshot(name: str, out: Path) -> None:
    sc = SNAPSHOTS[name]
    with tempfile.TemporaryDirectory(prefix="afd-snapshot-") as tmp:
        ws = workspace(Path(tmp), post=sc.post)
        machine = machine_facts(sc.gpus)
        write_evidence(sc, ws, ws.evidence, machine["gpu"])
        inputs = scenario_inputs(sc, ws, str(ws.evidence))
        if sc.rulebook != RULEBOOK:  # the generic rulebook's own input names, plan field and binding rows
            inputs = {{"afd_repo": "plugin_repo", "afd_base": "plugin_base"}.get(k, k): v for k, v in inputs.items()}
            generic_evidence(ws.evidence)
        snap = collect_facts(sc.mode, inputs, cwd=ws.plugin.path, machine=machine, rulebook=sc.rulebook)
        out.write_text(stable_json(snap, ws.replacements(f"{STABLE_AFD}/.policyrun/evidence")), encoding="utf-8")


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "examples":
        # --machine FILE: take the machine facts of the final-* scenarios from a real snapshot.
        machine_file = argv[argv.index("--machine") + 1] if "--machine" in argv else None
        real = machine_from_snapshot(Path(machine_file)) if machine_file else None
        only = [a for a in argv[1:] if not a.startswith("--") and a != machine_file]
        for sc in EXAMPLES:
            if only and sc.name not in only:
                continue
            folder = REPO_ROOT / "examples" / sc.name
            folder.mkdir(parents=True, exist_ok=True)
            make_example(sc, folder, real if sc.final_files else None)
            print(f"wrote {folder.relative_to(REPO_ROOT)}/facts.json")
        return 0
    if what == "snapshots":
        for name in SNAPSHOTS:
            path = REPO_ROOT / "rulebooks" / "tests" / f"{name}.facts.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            make_snapshot(name, path)
            print(f"wrote {path.relative_to(REPO_ROOT)}")
        return 0
    print("usage: python -m tests.afdfixtures examples [NAME ...] [--machine FACTS.json] | snapshots",
          file=sys.stderr)
    return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
