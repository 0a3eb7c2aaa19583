"""The sessions and preparation steps tests/docs_outputs.py runs the docs' commands in.

A session is a temporary folder set up for one page's commands (`SESSIONS`); a step prepares
files in it before a block runs, or patches this process while the block runs (`STEPS`). A step
that needs what is not installed raises `Unavailable`, and the rest of the session is skipped.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from policyrun.trace.records import phase_checks

ROOT = Path(__file__).resolve().parent.parent


class Unavailable(Exception):
    """A tool or package a block needs is not installed here: the rest of its session is skipped."""


@dataclass
class Session:
    root: Path
    cwd: Path
    must_stay_clean: list[Path] = field(default_factory=list)  # git checkouts the commands must not litter


def _checkout(root: Path) -> Path:
    """The repository root, for pages that run commands from it (`examples/...` paths)."""
    for name in ("examples", "rulebooks"):
        (root / name).symlink_to(ROOT / name)
    return root


def _identity_disagree(root: Path) -> Path:
    """A folder holding copies of the shipped scenario's facts and inputs (docs/auditors.md)."""
    for name in ("facts.json", "inputs.yaml"):
        shutil.copy(ROOT / "examples" / "identity-disagree" / name, root / name)
    return root


def _first_rulebook(root: Path) -> Path:
    """A clean git checkout holding the walkthrough's files (`policyrun/`, with the project's
    .gitignore), and `e2e-gate/`, the scratch folder the walkthrough starts in."""
    checkout = root / "policyrun"
    shutil.copytree(ROOT / "examples" / "first-rulebook", checkout / "examples" / "first-rulebook")
    shutil.copy(ROOT / ".gitignore", checkout / ".gitignore")
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=docs", "-c", "user.email=docs@example.invalid", "commit", "-qm", "walkthrough")
    (root / "e2e-gate").mkdir()
    return checkout


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}).stdout


def _pydeps_self(root: Path) -> Path:
    """A git checkout of this repository's dependency manifest and workflows, committed with a fixed
    date (docs/upgrade-python-deps.md evaluates the shipped rulebook on policyrun itself)."""
    checkout = root / "policyrun"
    (checkout / ".github").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    shutil.copytree(ROOT / ".github" / "workflows", checkout / ".github" / "workflows")
    shutil.copy(ROOT / "examples" / "upgrade-python-deps" / "policyrun-plan.yaml", checkout / "upgrade-plan.yaml")
    shutil.copy(ROOT / ".gitignore", checkout / ".gitignore")
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=docs", "-c", "user.email=docs@example.invalid", "commit", "-qm", "baseline",
        "--date=2026-12-01T00:00:00Z")
    return checkout


def _bart_plugin(root: Path) -> Path:
    """Clones of the real corpus's bart-plugin and vLLM release sources side by side
    (docs/plugin-upgrade.md plans the plugin's upgrade from its checkout)."""
    corpus = Path(os.environ.get("POLICYRUN_CORPUS") or ROOT.parent / "shared" / "corpus")
    bundles = [corpus / "bart-plugin.bundle", corpus / "vllm-0.26.0-0.27.0.bundle"]
    if not all(b.is_file() for b in bundles):
        raise Unavailable(f"the real corpus ({', '.join(b.name for b in bundles)} in {corpus})")
    git(root, "clone", "-q", str(bundles[0]), "bart-plugin")
    git(root, "clone", "-q", str(bundles[1]), "vllm")
    git(root / "vllm", "fetch", "-q", "--tags")
    return root / "bart-plugin"


SESSIONS: dict[str, Callable[[Path], Path]] = {
    "bart-plugin": _bart_plugin,
    "checkout": _checkout,
    "pydeps-self": _pydeps_self,
    "identity-disagree": _identity_disagree,
    "first-rulebook": _first_rulebook,
}


def _yaml_block(page: str, starts: str) -> str:
    [found] = [str(b) for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if b.startswith(starts)]
    return found


def _write_first_rulebook(session: Session, page: str) -> None:
    (session.cwd / "e2e-gate.yaml").write_text(_yaml_block(page, "policyrun: 1\nname: e2e-gate\n"))


def _readme_typo(session: Session, page: str) -> None:
    """README.md: its release-check rulebook, with the probe's name misspelt in a check."""
    rulebook = _yaml_block(page, "# yaml-language-server: $schema=rulebook.schema.json\npolicyrun: 1\n")
    assert "facts.tag_sha.sha" in rulebook
    (session.cwd / "my-rulebook.yaml").write_text(rulebook.replace("facts.tag_sha.sha", "facts.tag_sah.sha"))


def _stale_mentions(session: Session, page: str) -> None:
    """docs/reports.md: the final-pass scenario's facts, with the old version still named in two
    source files (as the search probe would record it), as `stale-facts.json`."""
    facts = json.loads((ROOT / "examples" / "final-pass" / "facts.json").read_text())
    mentions = facts["facts"]["old_source_mentions"]["value"]
    lines = [("Dockerfile", 3, "RUN pip install --no-deps vllm==0.26.1"),
             ("afd_plugin/compat/vllm.py", 12, 'TARGET_VLLM_VERSION: Final[str] = "0.26.1"')]
    mentions["hits"] = [{"path": path, "line": line, "column": text.index("0.26.1") + 1, "text": text,
                         "match": "0.26.1", "groups": []} for path, line, text in lines]
    mentions.update(counts={path: 1 for path, _, _ in lines}, total=2, files_matched=2, distinct=["0.26.1"])
    (session.cwd / "stale-facts.json").write_text(json.dumps(facts, indent=2))


def _attestation_example(session: Session, page: str) -> None:
    """docs/probes-repository.md: its rulebook and the evidence file it reads."""
    for name in ("decision.yaml", "evidence/decision.yaml"):
        path = session.cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_yaml_block(page, f"# {name}\n"))


@contextlib.contextmanager
def _without_mcp(session: Session, page: str) -> Iterator[None]:
    """docs/agents.md: this process as one without the `mcp` extra, for the block's commands."""
    import importlib.metadata

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    def sdk(name: str) -> bool:
        return name == "mcp" or name.startswith(("mcp.", "policyrun.mcp.server"))

    # Only the SDK's entries are swapped out and put back: restoring all of sys.modules would drop
    # modules first imported during the block, and a later import would load a second copy.
    saved = {name: module for name, module in sys.modules.items() if sdk(name)}
    for name in saved:
        del sys.modules[name]
    sys.modules["mcp"] = None  # type: ignore[assignment]  # `import mcp` raises ImportError
    try:
        with mock.patch.object(importlib.metadata, "version", not_installed):
            yield
    finally:
        for name in [n for n in sys.modules if sdk(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _edit(old: str, new: str) -> Callable[[Session, str], None]:
    def edit(session: Session, page: str) -> None:
        path = session.cwd / "e2e-gate.yaml"
        text = path.read_text()
        assert old in text, f"{old!r} is not in the rulebook"
        path.write_text(text.replace(old, new))
    return edit


def _forge_traces(session: Session, page: str) -> None:
    """docs/auditors.md: a careful forger's edited trace, a trace whose rulebook sha256 was
    rewritten, and facts changed after the evaluation."""
    trace = json.loads((session.cwd / ".policyrun" / "trace.json").read_text())
    edited = json.loads(json.dumps(trace))
    [phase] = [p for p in edited["phases"] if p["phase"] == "FREEZE_IDENTITY"]
    [check] = [c for c in phase_checks(phase) if c["id"] == "sources_agree"]
    phase["status"], phase["blocker"] = "PASS", None
    check["result"], check["outcome"], check["message"] = "SATISFIED", None, None
    edited["exit_code"] = 0
    (session.cwd / "edited-trace.json").write_text(json.dumps(edited, indent=2))
    resigned = json.loads(json.dumps(trace))
    resigned["rulebook"]["sha256"] = "0" * 64
    (session.cwd / "resigned-trace.json").write_text(json.dumps(resigned, indent=2))
    facts = json.loads((session.cwd / "facts.json").read_text())
    facts["facts"]["vllm_pins"]["value"]["sources"][0]["version"] = "0.26.0"
    (session.cwd / "facts-edited.json").write_text(json.dumps(facts, indent=2))


def _demo_keys(session: Session, page: str) -> None:
    """Fixed ed25519 keys in place of the ones `openssl genpkey` made, so the keyids and signatures
    the page shows are the same on every run."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    except ImportError as exc:
        raise Unavailable("cryptography (pip install '.[sign]')") from exc
    for name, public_only in (("signer", False), ("other", True)):
        key = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"policyrun docs {name}".encode()).digest())
        if not public_only:
            (session.cwd / f"{name}.pem").write_bytes(key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (session.cwd / f"{name}.pub.pem").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def _tamper(session: Session, page: str) -> None:
    """docs/auditors.md: the signed envelope with `"exitCode": 2` changed to 0 inside its payload."""
    envelope = json.loads((session.cwd / "verdict.intoto.json").read_text())
    payload = base64.b64decode(envelope["payload"]).decode()
    assert '"exitCode": 2' in payload
    envelope["payload"] = base64.b64encode(payload.replace('"exitCode": 2', '"exitCode": 0').encode()).decode()
    (session.cwd / "tampered.intoto.json").write_text(json.dumps(envelope, indent=2))


# A step prepares files before the block runs; one that returns a context manager (a patched
# process) is in effect while the block's commands run.
STEPS: dict[str, Callable[[Session, str], contextlib.AbstractContextManager[None] | None]] = {
    "first-rulebook": _write_first_rulebook,
    "readme-typo": _readme_typo,
    "stale-mentions": _stale_mentions,
    "attestation-example": _attestation_example,
    "without-mcp": _without_mcp,
    "typo-stdot": _edit("facts.pytest_cli.stdout.head.startsWith", "facts.pytest_cli.stdot.head.startsWith"),
    "no-exec": _edit("exec: true", "exec: false"),
    "forge-traces": _forge_traces,
    "demo-keys": _demo_keys,
    "tamper": _tamper,
}
