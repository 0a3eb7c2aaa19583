"""Fixture repositories for the flagship rulebook, built with git in a folder you choose.

Their sources are files under tests/data/afd (tests/data/README.md); this module says which state
of them each commit lays down (VLLM_HISTORY, PLUGIN_HISTORY). FixtureRepos builds each repository
once and hands out copies: the test session's fixtures (tests/conftest.py: afd_repos,
afd_upstream, afd_plugin, afd_upgraded) and the generator below use it.

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
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
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

    def __init__(self, root: Path, start: str | int) -> None:
        """`start`: a day (the clock starts at 09:00 UTC) or a clock value to continue from."""
        self.root = root
        self.clock = start if isinstance(start, int) else _parse_day(start)

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


# --- the sources: real files under tests/data/afd ----------------------------------------------------

# The vLLM and plugin sources are files (tests/data/README.md), one folder per state of each
# history: the first commit's whole tree, then only the files each later state adds or rewrites.
# What is committed when, and with which message, is written here (VLLM_HISTORY, PLUGIN_HISTORY).
DATA = Path(__file__).resolve().parent / "data" / "afd"


def read_state(folder: Path) -> dict[str, str]:
    """Every file of one state folder, by its path inside the repository."""
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@dataclass(frozen=True)
class Commit:
    """One commit of a fixture history, laid from its state folder.

    `files`: what it takes from the folder (every file of it when empty); `deleted`: what it
    removes; `day`: the fixed clock first jumps to 09:00 that day; `ticks`: clock steps before the
    commit (the git calls, two `git mv`, that the history was first recorded with: they fix the
    commit's date, so its SHA, which examples/ cite); `tag`: an annotated tag (name, message)."""

    message: str
    files: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    day: str | None = None
    ticks: int = 0
    tag: tuple[str, str] | None = None


History = list[tuple[str, list[Commit]]]  # (state folder, the commits that lay it), in order


def lay(git: Git, folder: Path, commits: list[Commit]) -> tuple[list[str], dict[str, str]]:
    """Make `commits` from the files of `folder`: their SHAs, and the commit each tag names."""
    files = read_state(folder)
    shas: list[str] = []
    tags: dict[str, str] = {}
    for c in commits:
        if c.day:
            git.clock = _parse_day(c.day)
        git.clock += 3600 * c.ticks
        write(git.root, {**{rel: files[rel] for rel in (c.files or tuple(files))}, **dict.fromkeys(c.deleted)})
        shas.append(git.commit(c.message))
        if c.tag:
            tags[c.tag[0]] = git.tag(*c.tag)
    return shas, tags


# --- the upstream vLLM repository ------------------------------------------------------------------

@dataclass
class VllmRepo:
    path: Path
    current_sha: str
    target_sha: str
    main_sha: str


# Between the release tags: a rename, a deletion, a signature change, a move behind a re-export,
# behaviour changes, a PyTorch bump, noise. A moving branch `main` is one commit past the target.
VLLM_HISTORY: History = [
    ("initial", [Commit("Initial import")]),
    ("v0.26.1", [Commit("[Frontend] split app construction", tag=(CURRENT_TAG, f"vLLM {CURRENT_VERSION}"))]),
    ("v0.27.0", [
        Commit("[Attention] move the attention layer into vllm/attention/layers/", day="2025-06-02", ticks=2,
               files=("vllm/attention/layers/__init__.py", "vllm/attention/layers/attention.py"),
               deleted=("vllm/attention/layer.py",)),
        Commit("[Core] batch descriptors in the forward context", ("vllm/forward_context.py",)),
        Commit("[CUDAGraph] FULL_AND_PIECEWISE mode", ("vllm/config/compilation.py",)),
        Commit("[V1] move IntermediateTensors to vllm.v1.outputs", ("vllm/v1/outputs.py", "vllm/sequence.py")),
        Commit("[V1][DBO] plan micro-batches in the model runner",
               ("vllm/v1/worker/gpu_model_runner.py", "vllm/v1/worker/gpu_ubatch_wrapper.py")),
        Commit("[V1][Worker] fold WorkerBase into Worker", ("vllm/v1/worker/gpu_worker.py", "vllm/v1/engine/core.py"),
               deleted=("vllm/v1/worker/worker_base.py",)),
        Commit("[Build] PyTorch 2.9.0", ("requirements/cuda.txt", "vllm/version.py")),
        Commit("[Doc] README", ("README.md",), tag=(TARGET_TAG, f"vLLM {TARGET_VERSION}")),
    ]),
    ("main", [Commit("[Misc] build_app returns the app")]),
]


def build_vllm(root: Path) -> VllmRepo:
    """The upstream repository; both release tags are annotated."""
    root.mkdir(parents=True, exist_ok=True)
    git = Git(root, "2025-05-01")
    git("init", "-q")
    shas: list[str] = []
    tags: dict[str, str] = {}
    for state, commits in VLLM_HISTORY:
        made, tagged = lay(git, DATA / "vllm" / state, commits)
        shas += made
        tags.update(tagged)
    return VllmRepo(root, tags[CURRENT_TAG], tags[TARGET_TAG], shas[-1])


# --- the AFD plugin --------------------------------------------------------------------------------

@dataclass
class PluginRepo:
    path: Path
    base_sha: str  # the immutable pre-upgrade commit
    head_sha: str
    commits: list[str] = field(default_factory=list)  # those after base_sha
    clock: int = 0  # the fixed clock after head_sha: a variant committed on a copy gets the same date


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

# The plugin pinned to vLLM 0.26.1, up to its pre-upgrade base commit.
PLUGIN_HISTORY: History = [
    ("initial", [Commit(f"AFD plugin for vLLM {CURRENT_VERSION}")]),
    ("base", [Commit("P2P connector: close() releases the transfer buffers")]),
]
# `post`: the implementation commits on top (the NPU docs are left alone), then the new lesson.
UPGRADE_STEPS = [Commit(message, tuple(files), day="2025-06-16" if i == 0 else None)
                 for i, (message, files) in enumerate(IMPLEMENTATION_STEPS)]
LESSON_COMMIT = Commit(f"Lessons for the {CURRENT_TAG} → {TARGET_TAG} upgrade", (NEW_LESSON,), day="2025-06-20")


def build_plugin(root: Path, *, post: bool = False, lesson: bool = True,
                 variant: Mapping[str, str | None] | None = None) -> PluginRepo:
    """The plugin at the pre-upgrade commit; `post` adds the implementation commits.

    `variant` rewrites files in one more commit on top (e.g. a disagreeing constant).
    """
    root.mkdir(parents=True, exist_ok=True)
    git = Git(root, "2025-04-01")
    git("init", "-q")
    made: list[str] = []
    for state, commits in PLUGIN_HISTORY:
        made += lay(git, DATA / "plugin" / state, commits)[0]
    base = made[-1]
    commits_after: list[str] = []
    if post:
        commits_after += lay(git, DATA / "plugin" / "upgraded", [*UPGRADE_STEPS, *([LESSON_COMMIT] if lesson else [])])[0]
    repo = PluginRepo(root, base, commits_after[-1] if commits_after else base, commits_after, git.clock)
    return commit_variant(repo, variant) if variant else repo


def commit_variant(repo: PluginRepo, variant: Mapping[str, str | None]) -> PluginRepo:
    """`variant`'s files (None: deleted) in one commit on top of the repository, in place."""
    git = Git(repo.path, repo.clock)
    write(repo.path, variant)
    head = git.commit("variant")
    return PluginRepo(repo.path, repo.base_sha, head, [*repo.commits, head], git.clock)


def plugin_text(rel: str) -> str:
    """A file of the plugin at its pre-upgrade base commit."""
    for state in ("base", "initial"):
        path = DATA / "plugin" / state / rel
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"{rel} is in no plugin state folder under {DATA}")


def edited(rel: str, old: str, new: str) -> str:
    """The base commit's `rel` with `old` replaced; `old` must occur exactly once (an edit of the
    data that removed it would otherwise make the variant silently the same as the base)."""
    text = plugin_text(rel)
    if text.count(old) != 1:
        raise AssertionError(f"{rel} holds {old!r} {text.count(old)} times; a variant edits exactly one")
    return text.replace(old, new)


# Variants used by tests and scenarios (files rewritten in one commit on top).
DISAGREEING_CONSTANT = {"afd_plugin/compat/vllm.py": edited(
    "afd_plugin/compat/vllm.py", 'TARGET_VLLM_VERSION: Final[str] = "0.26.1"', 'TARGET_VLLM_VERSION: Final[str] = "0.26.0"')}
DISAGREEING_README = {"README.md": edited("README.md", "runtime is **vLLM `v0.26.1`**", "runtime is **vLLM `v0.26.0`**")}
DISAGREEING_NPU_CLAIM = {"docs/npu/user-guide.md": edited("docs/npu/user-guide.md", "vLLM v0.26.1", "vLLM v0.25.0"),
                         "README.md": edited("README.md", "| vLLM | `0.26.1` |", "| vLLM | `0.25.0` |")}
MISSING_FUNCTIONALITY = {"afd_plugin/compat/patches/forward_context.py": edited(
    "afd_plugin/compat/patches/forward_context.py",
    "# Patch functionality: preserves the upstream forward-context setup and\n"
    "# skips DP metadata creation only for AFD async-DP configs.\n", "")}
UNBALANCED_MARKERS = {"afd_plugin/compat/patches/engine_core.py": edited(
    "afd_plugin/compat/patches/engine_core.py", "    # ### PATCH END: AFD FFN EngineCore shutdown\n", "")}


# --- built once, copied for each user -----------------------------------------------------------------

def copy_repo(src: Path, dest: Path) -> Path:
    """The whole folder, .git included: the same commits, so the same SHAs."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True)
    return dest


class FixtureRepos:
    """The fixture repositories, each built on first use under `folder` and then only copied: a
    test session (tests/conftest.py) or one run of the generator builds each at most once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._vllm: VllmRepo | None = None
        self._plugins: dict[tuple[bool, bool], PluginRepo] = {}

    def vllm(self) -> VllmRepo:
        """The built repository itself: read it, never change it (copy_vllm gives a copy)."""
        if self._vllm is None:
            self._vllm = build_vllm(self.folder / "vllm" / "vllm")
        return self._vllm

    def plugin(self, *, post: bool = False, lesson: bool = True) -> PluginRepo:
        """The built repository itself: read it, never change it (copy_plugin gives a copy)."""
        key = (post, lesson or not post)
        if key not in self._plugins:
            name = f"plugin-{'post' if post else 'pre'}{'' if key[1] else '-no-lesson'}"
            self._plugins[key] = build_plugin(self.folder / name / "afd-plugin", post=post, lesson=lesson)
        return self._plugins[key]

    def copy_vllm(self, dest: Path) -> VllmRepo:
        built = self.vllm()
        return replace(built, path=copy_repo(built.path, dest))

    def copy_plugin(self, dest: Path, *, post: bool = False, lesson: bool = True,
                    variant: Mapping[str, str | None] | None = None) -> PluginRepo:
        """A copy of the plugin in `dest`, with `variant` committed on top: the same SHAs as
        build_plugin(dest, post=post, lesson=lesson, variant=variant)."""
        built = self.plugin(post=post, lesson=lesson)
        repo = replace(built, path=copy_repo(built.path, dest), commits=list(built.commits))
        return commit_variant(repo, variant) if variant else repo


def changes_to(path: Path, head: str) -> str | None:
    """What changed in a repository that should be exactly at `head` and clean, or None."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # looking must not refresh the index
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=path, env=env,
                            capture_output=True, text=True, check=True).stdout
    now = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    if now != head:
        return f"HEAD moved from {head} to {now}"
    return f"the work tree changed:\n{status}" if status else None


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
    from policyrun.collection.run import collect
    from policyrun.evaluate.engine import load_checked
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.language.inputs import resolve_inputs

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
              variant: Mapping[str, str | None] | None = None, repos: FixtureRepos | None = None) -> Workspace:
    """The repositories in root/vllm and root/afd-plugin: copies of `repos`' when given, else built."""
    root = root.resolve()
    if repos is None:
        vllm = build_vllm(root / "vllm")
        plugin = build_plugin(root / "afd-plugin", post=post, lesson=lesson, variant=variant)
    else:
        vllm = repos.copy_vllm(root / "vllm")
        plugin = repos.copy_plugin(root / "afd-plugin", post=post, lesson=lesson, variant=variant)
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


def make_example(sc: Scenario, out_dir: Path, machine: dict[str, Any] | None = None,
                 repos: FixtureRepos | None = None) -> None:
    """Build the repositories, write the evidence into out_dir/evidence, collect, write facts.json
    and inputs.yaml. Paths inside are the stable ones (/srv/...) and examples/<name>/evidence."""
    rel_evidence = f"examples/{sc.name}/evidence"
    if sc.machine_snapshot is not None:
        machine = machine_from_snapshot(sc.machine_snapshot)
    # The target interpreter is the one whose stack the machine facts describe.
    python = str(machine["stack"].get("interpreter") or STABLE_PYTHON) if machine else STABLE_PYTHON
    with tempfile.TemporaryDirectory(prefix="afd-example-") as tmp:
        ws = workspace(Path(tmp), post=sc.post, variant=sc.variant, repos=repos)
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


def make_snapshot(name: str, out: Path, repos: FixtureRepos | None = None) -> None:
    sc = SNAPSHOTS[name]
    with tempfile.TemporaryDirectory(prefix="afd-snapshot-") as tmp:
        ws = workspace(Path(tmp), post=sc.post, repos=repos)
        machine = machine_facts(sc.gpus)
        write_evidence(sc, ws, ws.evidence, machine["gpu"])
        inputs = scenario_inputs(sc, ws, str(ws.evidence))
        if sc.rulebook != RULEBOOK:  # the generic rulebook's own input names, plan field and binding rows
            inputs = {{"afd_repo": "plugin_repo", "afd_base": "plugin_base"}.get(k, k): v for k, v in inputs.items()}
            generic_evidence(ws.evidence)
        snap = collect_facts(sc.mode, inputs, cwd=ws.plugin.path, machine=machine, rulebook=sc.rulebook)
        out.write_text(stable_json(snap, ws.replacements(f"{STABLE_AFD}/.policyrun/evidence")), encoding="utf-8")


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="afd-repos-") as tmp:
        return _main(argv, FixtureRepos(Path(tmp)))


def _main(argv: list[str], repos: FixtureRepos) -> int:
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
            make_example(sc, folder, real if sc.final_files else None, repos)
            print(f"wrote {folder.relative_to(REPO_ROOT)}/facts.json")
        return 0
    if what == "snapshots":
        for name in SNAPSHOTS:
            path = REPO_ROOT / "rulebooks" / "tests" / f"{name}.facts.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            make_snapshot(name, path, repos)
            print(f"wrote {path.relative_to(REPO_ROOT)}")
        return 0
    print("usage: python -m tests.afdfixtures examples [NAME ...] [--machine FACTS.json] | snapshots",
          file=sys.stderr)
    return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
