"""in-toto Statements (attestation framework v1) of a verdict trace, optionally in a DSSE envelope.

Two predicates:
- `in-toto`: policyrun's own, https://policyrun.dev/verdict/v1 (docs/auditors.md): which rulebook
  answered which question over which facts, every phase's status, the verdict and the exit code.
  Its subjects are the repository commits the probes read (gitCommit) and the rulebook files
  (sha256 of their bytes).
- `vsa`: the SLSA Verification Summary Attestation v1 (https://slsa.dev/spec/v1.0/verification_summary),
  for tools that consume VSAs: PASSED only when the exit code is 0 and no exception
  (policyrun.trace.exceptions) was needed.

Like every report these are made from the trace alone. A statement is written as indented JSON;
a signed one is that exact text, base64-encoded, as the envelope's payload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from policyrun.errors import Location, UsageError, display_path
from policyrun.trace.model import Trace
from policyrun.trace.exceptions import trace_exceptions

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VERDICT_PREDICATE = "https://policyrun.dev/verdict/v1"
VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
DEFAULT_VERIFIER = "https://policyrun.dev/verifier/v1"
SHIPPED_PREFIX = "<shipped>/"


@dataclass(frozen=True)
class AttestationOptions:
    resource_uri: str | None = None  # vsa: resourceUri
    policy_uri: str | None = None  # vsa: policy.uri
    verifier_id: str | None = None  # vsa: verifier.id
    sign_key: Path | None = None  # wrap the statement in a DSSE envelope signed with this key


def repository_subjects(trace: Trace) -> list[dict[str, Any]]:
    """Each (repository, HEAD) a probe recorded, once, in the order the trace's provenance lists them."""
    out: list[dict[str, Any]] = []
    for prov in trace.provenance.values():
        repo = prov.repo
        if repo is None or not repo.head:
            continue
        subject = {"name": repo.path, "digest": {"gitCommit": repo.head}}
        if subject not in out:
            out.append(subject)
    return out


def rulebook_subjects(trace: Trace) -> list[dict[str, Any]]:
    """The rulebook file, and for an overlay every file of its chain (base first, the overlay last)."""
    rb = trace.rulebook
    files = [(layer.path, layer.sha256) for layer in rb.chain] or [(rb.path or rb.name, rb.sha256)]
    out: list[dict[str, Any]] = []
    for name, digest in files:
        subject = {"name": name, "digest": {"sha256": digest}}
        if subject not in out:
            out.append(subject)
    return out


def _rulebook(trace: Trace) -> dict[str, Any]:
    rb = trace.rulebook
    out: dict[str, Any] = {"name": rb.name, "version": rb.version, "sha256": rb.sha256, "path": rb.path}
    if rb.chain:
        out["chain"] = [{"name": c.name, "path": c.path, "sha256": c.sha256} for c in rb.chain]
    return out


def verdict_statement(trace: Trace) -> dict[str, Any]:
    predicate = {
        "rulebook": _rulebook(trace),
        "mode": trace.mode,
        "inputs": trace.inputs,
        "failOnWarn": trace.fail_on_warn,
        "factsSha256": trace.facts_sha256,
        "staleFacts": [{"probe": s.probe, "reason": s.reason} for s in trace.stale_facts],
        "waivers": _waivers(trace),
        "exceptions": [e.as_json() for e in trace_exceptions(trace)],
        "phases": [{"id": p.phase, "status": p.status} for p in trace.phases],
        "verdict": {"id": trace.verdict.id, "summary": trace.verdict.summary},
        "exitCode": trace.exit_code,
        "evidenceFiles": [f.model_dump(mode="json", exclude_none=True) for f in trace.evidence_files],
        "generatedAt": trace.generated_at,
        "run": trace.run.model_dump(mode="json") if trace.run else None,
    }
    return {"_type": STATEMENT_TYPE, "subject": [*repository_subjects(trace), *rulebook_subjects(trace)],
            "predicateType": VERDICT_PREDICATE, "predicate": predicate}


def _waivers(trace: Trace) -> dict[str, Any] | None:
    w = trace.waivers
    if w is None:
        return None
    return {"file": w.get("file"), "sha256": w.get("sha256"), "asOf": w.get("as_of"),
            "asOfGiven": any(str(x).startswith("--as-of ") for x in w.get("warnings") or [])}


def vsa_statement(trace: Trace, opts: AttestationOptions = AttestationOptions()) -> dict[str, Any]:
    subjects = repository_subjects(trace)
    if not subjects:
        raise UsageError("a verification summary needs a subject, and this trace records no repository commit (no "
                         "probe recorded a repository HEAD); use --format in-toto, whose subject is the rulebook",
                         code="A003")
    if not trace.generated_at:
        raise UsageError("a verification summary needs timeVerified, and this trace has no generated_at (it was "
                         "evaluated with --no-timestamp); evaluate again without it", code="A003")
    exceptions = [e.as_json() for e in trace_exceptions(trace)]
    # PASSED says the policy held as written. A run that passed only with an exception (stale facts,
    # a waiver, a disabled check, a tolerated UNKNOWN) did not show that, so it is FAILED here and
    # the exceptions are listed in the policy's annotations (docs/auditors.md).
    passed = trace.exit_code == 0 and not exceptions
    predicate: dict[str, Any] = {
        "verifier": {"id": opts.verifier_id or DEFAULT_VERIFIER},
        "timeVerified": trace.generated_at,
        "resourceUri": opts.resource_uri or _resource_uri(subjects[0]),
        "policy": _policy(trace, opts.policy_uri, exceptions),
        "verificationResult": "PASSED" if passed else "FAILED",
        # One value per track; policyrun's track is the rulebook in a mode. Custom values must not
        # start with SLSA_ (the spec's SlsaResult).
        "verifiedLevels": [f"POLICYRUN:{trace.rulebook.name}:{trace.mode}" if passed else "FAILED"],
        "slsaVersion": "1.0",
    }
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": VSA_PREDICATE, "predicate": predicate}


def _resource_uri(subject: dict[str, Any]) -> str:
    path, sha = subject["name"], subject["digest"]["gitCommit"]
    if not path.startswith("/"):
        raise UsageError(f"no default resourceUri: the repository path {path!r} is relative; pass --resource-uri "
                         "(e.g. git+https://github.com/ORG/REPO@SHA)", code="A003")
    return f"git+file://{quote(path)}@{sha}"


def _policy(trace: Trace, uri: str | None, exceptions: list[dict[str, Any]]) -> dict[str, Any]:
    rb = trace.rulebook
    path = rb.path or rb.name
    if uri is None:
        if path.startswith(SHIPPED_PREFIX):  # inside the installed package, wherever that is
            uri = f"pkg:pypi/policyrun#rulebooks/{quote(path.removeprefix(SHIPPED_PREFIX))}"
        else:
            uri = f"file:{'//' if path.startswith('/') else ''}{quote(path)}"
    policy: dict[str, Any] = {"uri": uri, "digest": {"sha256": rb.sha256}}
    annotations: dict[str, Any] = {}
    if rb.chain:
        annotations["chain"] = [{"name": c.name, "path": c.path, "sha256": c.sha256} for c in rb.chain]
    if exceptions:
        annotations["exitCode"] = trace.exit_code
        annotations["exceptions"] = exceptions
    if annotations:
        policy["annotations"] = annotations
    return policy


def attestation(trace: Trace, fmt: str, opts: AttestationOptions = AttestationOptions()) -> dict[str, Any]:
    if fmt == "in-toto":
        return verdict_statement(trace)
    if fmt == "vsa":
        return vsa_statement(trace, opts)
    raise UsageError(f"unknown attestation format {fmt!r}; choose in-toto or vsa", code="R004")


def statement_text(statement: dict[str, Any]) -> str:
    from policyrun.safetext import json_controls

    return json_controls(json.dumps(statement, indent=2, ensure_ascii=False) + "\n")


def attestation_text(trace: Trace, fmt: str, opts: AttestationOptions = AttestationOptions(), *,
                     source: Path | None = None) -> str:
    """The statement as JSON, or with `opts.sign_key` the DSSE envelope around it. An inconsistent
    trace is refused even when it was loaded with --force: an attestation carries no banner."""
    from policyrun.trace.consistency import inconsistencies

    if problems := inconsistencies(trace):
        listed = "\n".join(f"  - {p}" for p in problems)
        raise UsageError(f"will not attest an inconsistent trace ({len(problems)} problem(s)):\n{listed}\n"
                         "evaluate again to get a genuine trace", code="T005",
                         location=Location(display_path(source)) if source else None)
    text = statement_text(attestation(trace, fmt, opts))
    if opts.sign_key is None:
        return text
    from policyrun.trace import dsse

    return dsse.envelope_text(dsse.sign(text.encode("utf-8"), opts.sign_key))
