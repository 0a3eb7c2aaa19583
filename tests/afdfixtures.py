"""Fixture repositories for the flagship rulebook, built with git in a folder you choose.

They mimic the real layout closely enough that the real probes have something to find:

* an upstream "vllm" repository with annotated release tags `v0.26.1` and `v0.27.0`; between them
  a module the plugin imports is renamed (`vllm/attention/layer.py`), one is deleted
  (`vllm/v1/worker/worker_base.py`), two are modified, PyTorch moves from 2.8.0 to 2.9.0 in
  `requirements/cuda.txt`, and unrelated files change too. A moving branch `main` is one commit
  past the target tag.
* the AFD plugin pinned to vLLM 0.26.1 (pyproject, uv.lock, TARGET_VLLM_VERSION, a runtime version
  check), with a compatibility-patch package whose files carry PATCH START/END markers and patch
  comments, a copied upstream method outside the patches package, a README and a GPU guide that
  claim the supported runtime *and* mention older versions as history, and an earlier lesson.
  `post=True` adds the implementation commits on top: pins, annotations, imports and docs moved
  to 0.27.0, plus the new lesson.

Every commit and tag has a fixed author, committer and date, so the SHAs are the same on every
machine; the examples under examples/ and the rulebook's test snapshots rely on that.

`python -m tests.afdfixtures snapshots` regenerates rulebooks/tests/*.facts.json and
`python -m tests.afdfixtures examples [NAME ...] [--machine FACTS.json]` regenerates examples/*/facts.json,
their inputs and evidence files (with --machine, the final-* scenarios take the GPU, stack, toolchain
and clean-up facts from a real snapshot, matched by probe kind).
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

CURRENT_VERSION = "0.26.1"
TARGET_VERSION = "0.27.0"
CURRENT_TAG = f"v{CURRENT_VERSION}"
TARGET_TAG = f"v{TARGET_VERSION}"

# Where snapshots and examples say the repositories live (collection happens in a temp folder).
STABLE_AFD = "/srv/afd-plugin"
STABLE_VLLM = "/srv/vllm"
STABLE_PYTHON = "/srv/venvs/afd-cu128/bin/python"


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


_RUNNER_V1 = _pyfile("GPU model runner.", """
class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.device = device

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        hidden = self._forward(scheduler_output, intermediate_tensors)
        return self._sample(hidden)

    def _forward(self, scheduler_output, intermediate_tensors):
        return scheduler_output

    def _sample(self, hidden):
        return hidden
""")

_RUNNER_V2 = _RUNNER_V1.replace(
    "    def execute_model(self, scheduler_output, intermediate_tensors=None):\n"
    "        hidden = self._forward(scheduler_output, intermediate_tensors)\n",
    "    def execute_model(self, scheduler_output, intermediate_tensors=None, ubatch_slices=None):\n"
    "        # ubatch_slices: dual-batch overlap is now planned by the runner itself.\n"
    "        hidden = self._forward(scheduler_output, intermediate_tensors)\n")

_ATTENTION = _pyfile("Attention layer.", """
class Attention:
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None):
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = scale
        self.num_kv_heads = num_kv_heads or num_heads

    def forward(self, query, key, value):
        return query
""")

_SCHEDULER_V1 = _pyfile("The V1 scheduler.", """
class Scheduler:
    def __init__(self, vllm_config, kv_cache_config):
        self.vllm_config = vllm_config
        self.kv_cache_config = kv_cache_config

    def schedule(self):
        return []
""")

_UPSTREAM_V1 = {
    "README.md": "# vLLM\n\nA high-throughput and memory-efficient inference engine.\n",
    "pyproject.toml": '[project]\nname = "vllm"\ndynamic = ["version"]\n',
    "requirements/cuda.txt": "# CUDA build requirements\nray[cgraph]>=2.48.0\ntorch==2.8.0\ntorchaudio==2.8.0\n",
    "vllm/__init__.py": _pyfile("vLLM.", "from vllm.version import __version__\n"),
    "vllm/version.py": '__version__ = "0.26.1"\n',
    "vllm/config.py": _pyfile("Configuration.", "class VllmConfig:\n    pass\n"),
    "vllm/attention/__init__.py": "",
    "vllm/attention/layer.py": _ATTENTION,
    "vllm/v1/__init__.py": "",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/gpu_model_runner.py": _RUNNER_V1,
    "vllm/v1/worker/gpu_worker.py": _pyfile("GPU worker.", """
from vllm.v1.worker.worker_base import WorkerBase


class Worker(WorkerBase):
    def init_device(self):
        self.device = "cuda"
"""),
    "vllm/v1/worker/worker_base.py": _pyfile("Worker base class.", """
class WorkerBase:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method):
        self.vllm_config = vllm_config
        self.local_rank = local_rank
        self.rank = rank

    def init_device(self):
        raise NotImplementedError

    def load_model(self):
        raise NotImplementedError
"""),
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/sched/__init__.py": "",
    "vllm/v1/core/sched/scheduler.py": _SCHEDULER_V1,
    "vllm/distributed/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": _pyfile("KV connector base.", """
class KVConnectorBase_V1:
    def start_load_kv(self, forward_context, **kwargs):
        raise NotImplementedError
"""),
    "vllm/model_executor/models/deepseek_v2.py": _pyfile("DeepSeek-V2.", """
class DeepseekV2ForCausalLM:
    def forward(self, input_ids, positions):
        return input_ids
"""),
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
    current = git.tag(CURRENT_TAG, "vLLM 0.26.1")

    # Target development: a rename, a deletion, behaviour changes, a PyTorch bump, noise.
    git.clock = _parse_day("2025-06-02")
    git("mv", "vllm/attention/layer.py", "vllm/attention/layers_attention_tmp.py")
    (root / "vllm/attention/layers").mkdir()
    git("mv", "vllm/attention/layers_attention_tmp.py", "vllm/attention/layers/attention.py")
    write(root, {"vllm/attention/layers/__init__.py": ""})
    git.commit("[Attention] move the attention layer into vllm/attention/layers/")
    write(root, {"vllm/v1/worker/gpu_model_runner.py": _RUNNER_V2})
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
""")})
    git.commit("[V1][Worker] fold WorkerBase into Worker")
    write(root, {"vllm/v1/core/sched/scheduler.py": _SCHEDULER_V1.replace(
        "    def schedule(self):\n        return []\n",
        "    def schedule(self):\n        # Requests now carry their own KV transfer parameters.\n        return []\n")})
    git.commit("[Scheduler] carry kv_transfer_params on requests")
    write(root, {"requirements/cuda.txt": _UPSTREAM_V1["requirements/cuda.txt"].replace("2.8.0", "2.9.0"),
                 "vllm/version.py": '__version__ = "0.27.0"\n'})
    git.commit("[Build] PyTorch 2.9.0")
    write(root, {"README.md": _UPSTREAM_V1["README.md"] + "\nSee the docs for supported hardware.\n"})
    git.commit("[Doc] README")
    target = git.tag(TARGET_TAG, "vLLM 0.27.0")
    write(root, {"vllm/config.py": _pyfile("Configuration.", "class VllmConfig:\n    seed = 0\n")})
    main = git.commit("[Misc] default seed")
    return VllmRepo(root, current, target, main)


# --- the AFD plugin --------------------------------------------------------------------------------

@dataclass
class PluginRepo:
    path: Path
    base_sha: str  # the immutable pre-upgrade commit
    head_sha: str
    commits: list[str] = field(default_factory=list)


def _patch_comments(reason: str, functionality: str, signature: str, upstream: str) -> str:
    return (f"# Reason: {reason}\n# Functionality: {functionality}\n# Signature: {signature}\n"
            f"# Upstream source: {upstream}\n")


def _model_runner_patch(ref: str) -> str:
    return f'''
"""AFD patch of GPUModelRunner.execute_model: the FFN role skips sampling."""

from vllm.v1.worker.gpu_model_runner import GPUModelRunner

{_patch_comments("the FFN device has no sampler; upstream samples unconditionally",
                 "return hidden states to the Attention device when the role is FFN",
                 "execute_model(self, scheduler_output, intermediate_tensors=None)",
                 f"vllm/v1/worker/gpu_model_runner.py@{ref} GPUModelRunner.execute_model")}def execute_model(self, scheduler_output, intermediate_tensors=None):
    hidden = self._forward(scheduler_output, intermediate_tensors)
    # PATCH START: AFD role split
    if getattr(self, "afd_role", None) == "ffn":
        return hidden
    # PATCH END
    return self._sample(hidden)


GPUModelRunner.execute_model = execute_model
'''


def _attention_patch(ref: str, module: str = "vllm.attention.layer",
                     path: str = "vllm/attention/layer.py") -> str:
    return f'''
"""AFD patch of Attention.forward: hand the attention output to the FFN device."""

from {module} import Attention

{_patch_comments("attention output must reach the FFN device before the MLP",
                 "send the attention output through the AFD connector",
                 "forward(self, query, key, value)",
                 f"{path}@{ref} Attention.forward")}def forward(self, query, key, value):
    # PATCH START: AFD transfer
    out = query
    # PATCH END
    return out


Attention.forward = forward
'''


def _scheduler_patch(ref: str, *, signature: bool = True) -> str:
    comments = _patch_comments("the Attention role owns the KV cache; the FFN role schedules nothing",
                               "return an empty schedule on the FFN role",
                               "schedule(self)",
                               f"vllm/v1/core/sched/scheduler.py@{ref} Scheduler.schedule")
    if not signature:
        comments = "".join(ln + "\n" for ln in comments.splitlines() if not ln.startswith("# Signature"))
    return f'''
"""AFD patch of Scheduler.schedule."""

from vllm.v1.core.sched.scheduler import Scheduler

{comments}def schedule(self):
    # PATCH START: AFD role guard
    if getattr(self, "afd_role", None) == "ffn":
        return []
    # PATCH END
    return []


Scheduler.schedule = schedule
'''


def _ffn_worker(ref: str, *, new_base: bool = False) -> str:
    if new_base:
        imports, base, path = "from vllm.v1.worker.gpu_worker import Worker", "Worker", "vllm/v1/worker/gpu_worker.py"
        symbol = "Worker.load_model"
    else:
        imports, base, path = ("from vllm.v1.worker.worker_base import WorkerBase", "WorkerBase",
                               "vllm/v1/worker/worker_base.py")
        symbol = "WorkerBase.load_model"
    return f'''
"""The FFN worker: owns the expert weights, receives hidden states from the Attention worker."""

{imports}

from afd_plugin.connectors.afd_connector import AFDConnector


class FFNWorker({base}):
    """Copied and narrowed from upstream; see the patch comments."""

{_indent(_patch_comments("the FFN worker loads only the MLP/expert weights",
                         "filter the checkpoint to FFN-owned parameters",
                         "load_model(self) -> None",
                         f"{path}@{ref} {symbol}"))}    def load_model(self) -> None:
        # PATCH START: FFN weight filter
        self.model = None
        # PATCH END
        self.connector = AFDConnector()
'''


def _indent(text: str) -> str:
    return "".join("    " + ln + "\n" for ln in text.splitlines())


_CONNECTOR = '''
"""The AFD connector between the Attention and the FFN device."""

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class AFDConnector(KVConnectorBase_V1):
    def start_load_kv(self, forward_context, **kwargs):
        return None
'''

_MODEL = '''
"""Role-aware DeepSeek-V2 construction."""

from vllm.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM


class AFDDeepseekV2(DeepseekV2ForCausalLM):
    afd_roles = ("attention", "ffn")
'''


def _version_py(version: str) -> str:
    return f'''
"""The vLLM version this plugin is built for, and the check that enforces it at import."""

import importlib.metadata

TARGET_VLLM_VERSION = "{version}"


def check_vllm_version() -> None:
    installed = importlib.metadata.version("vllm")
    if installed != TARGET_VLLM_VERSION:
        raise RuntimeError(f"afd-plugin needs vLLM {{TARGET_VLLM_VERSION}}, found {{installed}}")
'''


def _pyproject(version: str) -> str:
    return f'''
[project]
name = "afd-plugin"
version = "{version}.post1"
description = "Attention-FFN disaggregation for vLLM on GPUs"
requires-python = ">=3.10"
dependencies = [
    "vllm=={version}",
    "pyyaml>=6",
]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.entry-points."vllm.general_plugins"]
afd = "afd_plugin:register"
'''


def _uv_lock(version: str) -> str:
    return f'''
version = 1
requires-python = ">=3.10"

[[package]]
name = "afd-plugin"
version = "{version}.post1"
source = {{ editable = "." }}
dependencies = [
    {{ name = "pyyaml" }},
    {{ name = "vllm" }},
]

[[package]]
name = "pyyaml"
version = "6.0.2"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "vllm"
version = "{version}"
source = {{ registry = "https://pypi.org/simple" }}
'''


def _readme(version: str, torch: str) -> str:
    previous = ("- History: plugin release 2.0 supported vLLM 0.26.1 with PyTorch 2.8.0.\n"
                if version != CURRENT_VERSION else "")
    return f'''
# AFD plugin for vLLM (GPU)

Attention-FFN disaggregation: the attention layers run on one GPU, the MLP/expert layers on
another, connected by the AFD connector.

## Supported runtime

This plugin supports vLLM {version} with PyTorch {torch} built for CUDA 12.8.

| Component | Version |
| --- | --- |
| vLLM | {version} |
| CUDA | 12.8 |

Install: `pip install -e .` in an environment that already has the pinned vLLM.

## Recipes

- `recipes/dbo.md`: dual-batch overlap. Historical note: this recipe must be used with the
  `release/v0.24` branch; it was written against vLLM 0.24.0 and is kept for reference.
- History: plugin release 1.3 supported vLLM 0.25.0 (see the release-1.3 branch).
- The prebuilt `afd-gpu:2025.04` image reports vLLM `0.25.1.dev12+g3f2a1bc`; do not use it for new cells.
{previous}'''


def _gpu_guide(version: str, torch: str) -> str:
    return f'''
# GPU guide

Tested with vLLM {version}, PyTorch {torch} and CUDA 12.8 on H200 (sm_90).

Run the E2E suite with `pytest -m gpu tests/e2e` on two GPUs: one Attention and one FFN device.

Previously (historical) the guide targeted vLLM 0.24.0 on A100.
'''


_PLUGIN_INIT = '''
"""AFD plugin entry point."""


def register() -> None:
    from afd_plugin.version import check_vllm_version
    from afd_plugin.compat.patches import apply_patches

    check_vllm_version()
    apply_patches()
'''

_PATCHES_INIT = '''
"""Compatibility patches, applied in dependency order."""


def apply_patches() -> None:
    from afd_plugin.compat.patches import attention, model_runner, scheduler  # noqa: F401
'''

_OLD_LESSON = '''
# Lessons: vLLM v0.25.0 → v0.26.1

Historical hypotheses only; re-derive every fact from the exact sources of the next upgrade.

- The FFN worker's weight filter broke when upstream renamed expert parameters.
'''

_TEST_VERSION = '''
from afd_plugin.version import TARGET_VLLM_VERSION

# A test that mentions the markers must not count as a patch: # PATCH START


def test_constant_is_a_version():
    assert TARGET_VLLM_VERSION.count(".") == 2
'''


def plugin_files(version: str, ref: str, torch: str) -> dict[str, str]:
    post = version != CURRENT_VERSION
    return {
        "pyproject.toml": _pyproject(version),
        "uv.lock": _uv_lock(version),
        "README.md": _readme(version, torch),
        "docs/gpu-guide.md": _gpu_guide(version, torch),
        "afd_plugin/__init__.py": _PLUGIN_INIT,
        "afd_plugin/version.py": _version_py(version),
        "afd_plugin/compat/__init__.py": "",
        "afd_plugin/compat/patches/__init__.py": _PATCHES_INIT,
        "afd_plugin/compat/patches/model_runner.py": _model_runner_patch(ref),
        "afd_plugin/compat/patches/attention.py": (
            _attention_patch(ref, "vllm.attention.layers.attention", "vllm/attention/layers/attention.py")
            if post else _attention_patch(ref)),
        "afd_plugin/compat/patches/scheduler.py": _scheduler_patch(ref),
        "afd_plugin/workers/__init__.py": "",
        "afd_plugin/workers/ffn_worker.py": _ffn_worker(ref, new_base=post),
        "afd_plugin/connectors/__init__.py": "",
        "afd_plugin/connectors/afd_connector.py": _CONNECTOR,
        "afd_plugin/models/__init__.py": "",
        "afd_plugin/models/deepseek_afd.py": _MODEL,
        "references/20250312-v0.25.0-to-v0.26.1-lessons.md": _OLD_LESSON,
        "tests/test_version.py": _TEST_VERSION,
    }


LESSON_DATE = "20250620"
NEW_LESSON = f"references/{LESSON_DATE}-{CURRENT_TAG}-to-{TARGET_TAG}-lessons.md"


def build_plugin(root: Path, *, post: bool = False, lesson: bool = True,
                 variant: Mapping[str, str | None] | None = None) -> PluginRepo:
    """The plugin at the pre-upgrade commit; `post` adds the implementation commits.

    `variant` rewrites files in one more commit on top (e.g. a disagreeing constant).
    """
    root.mkdir(parents=True, exist_ok=True)
    git = Git(root, "2025-04-01")
    git("init", "-q")
    write(root, plugin_files(CURRENT_VERSION, CURRENT_TAG, "2.8.0"))
    git.commit("AFD plugin for vLLM 0.26.1")
    write(root, {"afd_plugin/connectors/afd_connector.py": _CONNECTOR + "\n    def close(self):\n        return None\n"})
    base = git.commit("Connector: close() releases the transfer buffers")
    commits: list[str] = []
    if post:
        git.clock = _parse_day("2025-06-16")
        target = plugin_files(TARGET_VERSION, TARGET_TAG, "2.9.0")
        steps = [
            ("Pin vLLM 0.27.0 and enforce it at import", ["pyproject.toml", "uv.lock", "afd_plugin/version.py"]),
            ("Follow the attention layer move to vllm/attention/layers/", ["afd_plugin/compat/patches/attention.py"]),
            ("Port the model-runner and scheduler patches to v0.27.0",
             ["afd_plugin/compat/patches/model_runner.py", "afd_plugin/compat/patches/scheduler.py"]),
            ("FFN worker: derive from Worker now that WorkerBase is gone", ["afd_plugin/workers/ffn_worker.py"]),
            ("Docs: vLLM 0.27.0 on H200", ["README.md", "docs/gpu-guide.md"]),
        ]
        for message, files in steps:
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
- `WorkerBase` was folded into `Worker` (behavioral: the FFN worker now inherits `Worker`).
"""})
            commits.append(git.commit("Lessons for the v0.26.1 → v0.27.0 upgrade"))
    if variant:
        write(root, variant)
        commits.append(git.commit("variant"))
    head = git("rev-parse", "HEAD")
    return PluginRepo(root, base, head, commits)


# Variants used by tests and scenarios.
DISAGREEING_CONSTANT = {"afd_plugin/version.py": _version_py("0.26.0")}
MISSING_SIGNATURE = {"afd_plugin/compat/patches/scheduler.py": _scheduler_patch(CURRENT_TAG, signature=False)}
UNBALANCED_MARKERS = {"afd_plugin/compat/patches/scheduler.py":
                      _scheduler_patch(CURRENT_TAG).replace("        return []\n    # PATCH END\n",
                                                            "        return []\n")}


# --- attestations and result files ----------------------------------------------------------------

IMPACT_ROWS = [  # what the rulebook derives from the fixture diff, in diff order
    ("vllm/attention/layer.py", "R"),
    ("vllm/v1/core/sched/scheduler.py", "M"),
    ("vllm/v1/worker/gpu_model_runner.py", "M"),
    ("vllm/v1/worker/worker_base.py", "D"),
]


def architecture_doc(current_sha: str, target_sha: str, *, decision: str = "continue",
                     architectural: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [
        {"upstream": "vllm/attention/layer.py", "classification": "MECHANICAL",
         "invariant": "Attention.forward hands its output to the AFD connector",
         "replacement": "vllm/attention/layers/attention.py"},
        {"upstream": "vllm/v1/core/sched/scheduler.py", "classification": "BEHAVIORAL",
         "invariant": "the FFN role schedules nothing; the Attention role owns the KV cache",
         "notes": "requests now carry kv_transfer_params; the guard is unchanged"},
        {"upstream": "vllm/v1/worker/gpu_model_runner.py", "classification": "BEHAVIORAL",
         "invariant": "the FFN role returns hidden states and never samples",
         "notes": "execute_model gained ubatch_slices; DBO cells need the new argument"},
        {"upstream": "vllm/v1/worker/worker_base.py",
         "classification": "ARCHITECTURAL" if architectural else "BEHAVIORAL",
         "invariant": "the FFN worker loads only FFN-owned weights",
         "replacement": "vllm/v1/worker/gpu_worker.py Worker"},
    ]
    if architectural:
        rows[3]["design_decision"] = {"status": "pending", "reference": "RFC-112: FFN worker lifecycle"}
    doc: dict[str, Any] = {"decision": decision, "reviewer": "r.chen (GPU backend)", "reviewed_at": "2025-06-10",
                           "current_sha": current_sha, "target_sha": target_sha,
                           "summary": "Local adaptations; no new public interface.", "rows": rows}
    if decision == "stop":
        doc["stop_reasons"] = ["WorkerBase removal replaces the worker lifecycle owner; the FFN worker needs a redesign"]
    return doc


def plan_doc(current_sha: str, target_sha: str) -> dict[str, Any]:
    return {
        "current_sha": current_sha, "target_sha": target_sha, "target_afd_version": "0.27.0.post1",
        "stages": [
            {"id": "S1-version-contract", "upstream": [], "files": ["pyproject.toml", "uv.lock", "afd_plugin/version.py"],
             "invariant": "the plugin refuses any vLLM but the pinned one", "tests": ["tests/test_version.py"]},
            {"id": "S2-attention-move", "upstream": ["vllm/attention/layer.py"],
             "files": ["afd_plugin/compat/patches/attention.py"],
             "invariant": "Attention.forward hands its output to the AFD connector",
             "tests": ["tests/test_attention_patch.py"]},
            {"id": "S3-runner-and-scheduler", "upstream": ["vllm/v1/worker/gpu_model_runner.py",
                                                          "vllm/v1/core/sched/scheduler.py"],
             "files": ["afd_plugin/compat/patches/model_runner.py", "afd_plugin/compat/patches/scheduler.py"],
             "invariant": "the FFN role neither samples nor schedules", "tests": ["tests/test_roles.py"],
             "risks": "DBO graph capture with the new ubatch_slices argument"},
            {"id": "S4-ffn-worker", "upstream": ["vllm/v1/worker/worker_base.py"],
             "files": ["afd_plugin/workers/ffn_worker.py"],
             "invariant": "the FFN worker loads only FFN-owned weights", "tests": ["tests/test_ffn_worker.py"]},
            {"id": "S5-docs", "upstream": [], "files": ["README.md", "docs/"],
             "invariant": "public claims match the validation ledger", "tests": ["docs consistency audit"],
             "docs_impact": "README runtime table, GPU guide"},
        ],
        "patches": [
            {"file": "afd_plugin/compat/patches/attention.py", "disposition": "port",
             "removal_plan": "upstream a connector hook in Attention.forward", "tests": ["tests/test_attention_patch.py"]},
            {"file": "afd_plugin/compat/patches/model_runner.py", "disposition": "port",
             "removal_plan": "propose a role hook in execute_model upstream", "tests": ["tests/test_roles.py"]},
            {"file": "afd_plugin/compat/patches/scheduler.py", "disposition": "port",
             "removal_plan": "remove once the scheduler exposes a role policy", "tests": ["tests/test_roles.py"]},
            {"file": "afd_plugin/workers/ffn_worker.py", "disposition": "delegate",
             "removal_plan": "inherit Worker and override load_model only", "tests": ["tests/test_ffn_worker.py"]},
        ],
        "exclusions": ["NPU-only scenario", "DBO with TP>1 is an excluded cell"],
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


def junit_xml(cases: Iterable[tuple[str, str, str | None]], name: str = "pytest") -> str:
    """(classname.name, outcome, message) → pytest-style JUnit XML. outcome: passed|failed|error|skipped."""
    from xml.sax.saxutils import quoteattr

    rows = list(cases)
    counts = {k: sum(1 for _, o, _ in rows if o == k) for k in ("failed", "error", "skipped")}
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>",
           f'<testsuite name="{name}" errors="{counts["error"]}" failures="{counts["failed"]}" '
           f'skipped="{counts["skipped"]}" tests="{len(rows)}" time="12.5" timestamp="2025-06-18T10:00:00" '
           'hostname="gpu-node-07">']
    for test_id, outcome, message in rows:
        cls, _, test = test_id.rpartition(".")
        head = f'<testcase classname={quoteattr(cls)} name={quoteattr(test)} time="0.5"'
        if outcome == "passed":
            out.append(head + " />")
        elif outcome == "skipped":
            out.append(head + f'><skipped type="pytest.skip" message={quoteattr(message or "")}>'
                              f'{message or ""}</skipped></testcase>')
        elif outcome == "failed":
            out.append(head + f'><failure message={quoteattr(message or "")}>AssertionError</failure></testcase>')
        else:
            out.append(head + f'><error message={quoteattr(message or "")}>{message or ""}</error></testcase>')
    out += ["</testsuite>", "</testsuites>", ""]
    return "\n".join(out)


UNIT_CASES = [(f"tests.test_{m}.test_{t}", "passed", None) for m in ("version", "roles", "ffn_worker",
                                                                     "attention_patch") for t in ("a", "b", "c")]
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
    from policyrun.probes.gpu import PROBES as GPU_PROBES

    machine = fake.hgx_h200(count) if hasattr(fake, "hgx_h200") else _fake_h200s(fake, count)
    module = fake.make_module(machine)
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


def _fake_h200s(fake: Any, count: int) -> Any:
    base = fake.one_h200()
    if count == 1:
        return base
    four = fake.hgx_four_h200() if hasattr(fake, "hgx_four_h200") else None
    if four is not None:
        four.devices = four.devices[:count]
        return four
    raise RuntimeError("tests/fakes/fake_pynvml.py has no multi-H200 machine")


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


def cleanup_facts() -> dict[str, Any]:
    """system.processes / system.ports / system.shm on a node the experiment left clean."""
    return {"leftover_processes": {"matches": [], "count": 0,
                                   "pattern": "vllm serve|vllm\\.entrypoints|afd_plugin|run-e2e"},
            "leftover_ports": {"listening": [], "count": 0, "ports": []},
            "leftover_shm": {"entries": [], "count": 0, "total_size": 0}}


def machine_facts(gpus: int = 2, **stack: Any) -> dict[str, Any]:
    return {"gpu": gpu_fact(gpus), "stack": stack_fact(**stack), "toolchain": toolchain_fact(), **cleanup_facts()}


def toolchain_fact() -> dict[str, Any]:
    return {"nvcc": {"path": "/usr/local/cuda-12.8/bin/nvcc", "version": "12.8", "full_version": "12.8.93",
                     "raw": "Cuda compilation tools, release 12.8, V12.8.93"},
            "cc": {"path": "/usr/bin/c++", "version": "11.4.0", "family": "gcc",
                   "raw": "c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"},
            "missing": []}


# --- collecting facts from fixture repositories --------------------------------------------------------

MACHINE_PROBES = ("stack", "gpu", "toolchain")


def collect_facts(mode: str, inputs: Mapping[str, Any], *, cwd: Path,
                  machine: Mapping[str, Any] | None = None) -> Any:
    """Run the rulebook's probes for `mode` (real repository probes); replace the machine facts."""
    from policyrun.collect import collect
    from policyrun.engine import load_checked
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.inputs import resolve_inputs

    rb = load_checked(RULEBOOK)
    bound = resolve_inputs(rb.model, values=dict(inputs))
    snap = collect(rb.model, mode, bound, base_dir=cwd, rulebook_dir=rb.directory)
    facts = dict(snap.facts)
    for pid, value in (machine or {}).items():
        spec = rb.model.probes[pid]
        if spec.modes is not None and mode not in spec.modes:
            continue
        kind = spec.uses
        commands = {"gpu": ["nvmlInit", "nvmlSystemGetDriverVersion", "nvmlDeviceGetCount",
                            "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetComputeRunningProcesses"],
                    "stack": [f"{STABLE_PYTHON} -c <policyrun/probes/_stack_script.py> '{{\"init_cuda\": false}}'",
                              f"{STABLE_PYTHON} -m pip check"],
                    "toolchain": ["/usr/local/cuda-12.8/bin/nvcc --version", "/usr/bin/c++ --version"]}.get(pid, [])
        params = {"stack": {"python": STABLE_PYTHON}, "toolchain": {"required": []},
                  "leftover_processes": {"pattern": rb.model.vars["experiment_process_pattern"]},
                  "leftover_ports": {"range": rb.model.vars["experiment_ports"]},
                  "leftover_shm": {"regex": rb.model.vars["experiment_shm_regex"]}}.get(pid, {})
        commands = commands or {"leftover_processes": ["read /proc/*/cmdline"],
                                "leftover_ports": ["read /proc/net/tcp", "read /proc/net/tcp6"],
                                "leftover_shm": ["list /dev/shm"]}.get(pid, [])
        facts[pid] = Fact(value=value, provenance=Provenance(probe=pid, kind=kind, params=params, commands=commands))
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


EXAMPLES = [
    Scenario("planning-pass", "planning-audit",
             "Planning audit of vLLM v0.26.1 → v0.27.0: every planning phase passes."),
    Scenario("identity-disagree", "planning-audit",
             "TARGET_VLLM_VERSION says 0.26.0 while the pins and README say 0.26.1: identity is BLOCKED.",
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
]


def scenario_inputs(sc: Scenario, ws: Workspace, evidence: str) -> dict[str, Any]:
    inputs: dict[str, Any] = {"afd_repo": str(ws.plugin.path), "vllm_src": str(ws.vllm.path),
                              "target_ref": TARGET_TAG, "evidence_dir": evidence}
    if sc.mode != "planning-audit":
        inputs.update(afd_base=ws.plugin.base_sha, python=STABLE_PYTHON)
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
        (folder / "unit.xml").write_text(junit_xml(UNIT_CASES), encoding="utf-8")
        (folder / "e2e.xml").write_text(junit_xml(sc.e2e_cases, "gpu-e2e"), encoding="utf-8")


MACHINE_KINDS = {"gpu.nvml": "gpu", "python.stack": "stack", "toolchain": "toolchain",
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
    return machine


def make_example(sc: Scenario, out_dir: Path, machine: dict[str, Any] | None = None) -> None:
    """Build the repositories, write the evidence into out_dir/evidence, collect, write facts.json
    and inputs.yaml. Paths inside are the stable ones (/srv/...) and examples/<name>/evidence."""
    rel_evidence = f"examples/{sc.name}/evidence"
    with tempfile.TemporaryDirectory(prefix="afd-example-") as tmp:
        ws = workspace(Path(tmp), post=sc.post, variant=sc.variant)
        machine = dict(machine) if machine else machine_facts(sc.gpus)
        gpu = machine["gpu"]
        evidence = out_dir / "evidence"
        if evidence.exists():
            for f in evidence.iterdir():
                f.unlink()
        evidence.mkdir(parents=True, exist_ok=True)
        write_evidence(sc, ws, evidence, gpu)
        inputs = scenario_inputs(sc, ws, str(evidence.resolve()))
        snap = collect_facts(sc.mode, inputs, cwd=ws.plugin.path, machine=machine)
        reps = ws.replacements(rel_evidence)
        reps[str(evidence.resolve())] = rel_evidence
        (out_dir / "facts.json").write_text(stable_json(snap, reps), encoding="utf-8")
        shown = {k: (reps.get(v, v) if isinstance(v, str) else v) for k, v in inputs.items()}
        for key in ("unit_junit", "e2e_junit", "accuracy_results"):
            if key in shown:
                shown[key] = shown[key].replace(str(evidence.resolve()), rel_evidence)
        header = (f"# {sc.description}\n# Facts were collected in {STABLE_AFD} (cwd) against {STABLE_VLLM}; "
                  "re-evaluate with the command in examples/README.md.\n")
        (out_dir / "inputs.yaml").write_text(header + yaml.safe_dump(shown, sort_keys=False), encoding="utf-8")


# The rulebook's test snapshots: one per repository state and mode.
SNAPSHOTS = {
    "planning": Scenario("planning", "planning-audit", "pre-upgrade plugin, planning audit"),
    "implementation": Scenario("implementation", "implementation", "upgraded plugin, implementation mode",
                               post=True, final_files=True, extra_inputs={"gpu_validation": True}),
    "final": Scenario("final", "final-validation", "upgraded plugin, final validation", post=True, final_files=True),
}


def make_snapshot(name: str, out: Path) -> None:
    sc = SNAPSHOTS[name]
    with tempfile.TemporaryDirectory(prefix="afd-snapshot-") as tmp:
        ws = workspace(Path(tmp), post=sc.post)
        machine = machine_facts(sc.gpus)
        write_evidence(sc, ws, ws.evidence, machine["gpu"])
        inputs = scenario_inputs(sc, ws, str(ws.evidence))
        snap = collect_facts(sc.mode, inputs, cwd=ws.plugin.path, machine=machine)
        out.write_text(stable_json(snap, ws.replacements(f"{STABLE_AFD}/.policyrun/evidence")), encoding="utf-8")


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "examples":
        # --machine FILE: take the machine facts of the final-* scenarios from a real snapshot.
        real = machine_from_snapshot(Path(argv[argv.index("--machine") + 1])) if "--machine" in argv else None
        only = [a for a in argv[1:] if not a.startswith("--") and (real is None or a != argv[argv.index("--machine") + 1])]
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
