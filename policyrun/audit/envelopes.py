"""Signed envelopes: the trusted keys, the signature, and what the signed in-toto statement says
(its exceptions, its rulebook against the pins, its fields against the trace it was made from).

Kept apart from the entry points in policyrun.audit.verify: these read and check a DSSE envelope
and know nothing of re-evaluating; verify_envelope composes them with re-evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.audit.differences import Difference, differences, show
from policyrun.errors import Location, UsageError

if TYPE_CHECKING:
    from policyrun.audit.pins import Pins


def trusted_keys(keys: Iterable[Path]) -> list[Path]:
    """Each --key: a public key file, or a folder (a keyring) whose *.pem files are all trusted."""
    out: list[Path] = []
    for key in keys:
        if key.is_dir():
            ring = sorted(key.glob("*.pem"))
            if not ring:
                raise UsageError(f"keyring {key} holds no *.pem public key", code="A002", location=Location(str(key)))
            out += ring
        else:
            out.append(key)
    return out


def verify_signature(envelope: dict[str, Any], keys: list[Path]) -> Any:
    """The first trusted key a signature verifies with; InvalidEnvelope naming every key tried."""
    from policyrun.trace import dsse

    errors: list[str] = []
    for key in keys:
        try:
            return dsse.verify(envelope, key)
        except dsse.InvalidEnvelope as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise dsse.InvalidEnvelope(errors[0])
    raise dsse.InvalidEnvelope(f"none of the {len(keys)} trusted keys verifies a signature: "
                               + "; ".join(f"{k}: {e}" for k, e in zip(keys, errors, strict=True)))


def statement_exceptions(statement: dict[str, Any]) -> list[str]:
    """The exceptions a signed statement declares, so a signature check alone shows them."""
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return []
    listed = predicate.get("exceptions")
    if not isinstance(listed, list):
        policy = predicate.get("policy")
        annotations = policy.get("annotations") if isinstance(policy, dict) else None
        listed = annotations.get("exceptions") if isinstance(annotations, dict) else None
    if not isinstance(listed, list):
        return []
    from policyrun.trace.exceptions import KIND_LABELS

    kinds: dict[str, int] = {}
    for item in listed:
        kind = str(item.get("kind")) if isinstance(item, dict) else "?"
        kinds[kind] = kinds.get(kind, 0) + 1
    summary = ", ".join(f"{n} {KIND_LABELS.get(k, k)}" for k, n in kinds.items()) or "none"
    return [f"  exceptions {summary}", *(f"    - {_exception_text(e)}" for e in listed)]


def _exception_text(item: Any) -> str:
    from policyrun.trace.exceptions import KIND_LABELS

    if not isinstance(item, dict):
        return show(item)
    where = ".".join(str(item[k]) for k in ("phase", "check") if item.get(k))
    return (f"{KIND_LABELS.get(str(item.get('kind')), str(item.get('kind')))}: " + (f"{where}: " if where else "")
            + str(item.get("detail", "")))


def statement_pins(statement: dict[str, Any], pins: Pins | None) -> list[str]:
    """The statement's rulebook (a verdict's `rulebook.sha256`, a VSA's `policy.digest.sha256`)
    against the auditor's pinned sha256."""
    if pins is None or not pins.rulebook_sha256:
        return []
    predicate = statement.get("predicate")
    sha = (_text(predicate, "rulebook", "sha256") or _text(predicate, "policy", "digest", "sha256"))
    if sha in pins.rulebook_sha256:
        return []
    return [f"PIN MISMATCH: the statement's rulebook has sha256 {sha}, but you pinned "
            f"{' or '.join(pins.rulebook_sha256)}"]


def signed_statement(payload: bytes) -> dict[str, Any]:
    from policyrun import limits
    from policyrun.trace import dsse
    from policyrun.jsonfile import parse_json

    try:
        data = parse_json(payload.decode("utf-8"), "payload", what="signed statement", code="V005",
                          max_depth=limits.TRACE_DEPTH)
    except (UnicodeDecodeError, UsageError) as exc:
        raise dsse.InvalidEnvelope(f"the signed payload is not a JSON statement ({exc})") from None
    if not isinstance(data, dict):
        raise dsse.InvalidEnvelope("the signed payload is not a JSON object")
    return data


def statement_vs_trace(statement: dict[str, Any], fmt: str, trace_path: Path) -> list[Difference]:
    from policyrun.render import intoto
    from policyrun.trace.model import load_trace

    trace = load_trace(trace_path, force=True)
    # A VSA's verifier, resource and policy URIs are the signer's choice (report options), not the trace's.
    opts = intoto.AttestationOptions(resource_uri=_text(statement, "predicate", "resourceUri"),
                                     policy_uri=_text(statement, "predicate", "policy", "uri"),
                                     verifier_id=_text(statement, "predicate", "verifier", "id"))
    return differences(statement, as_json(intoto.attestation(trace, fmt, opts)))


def _text(data: Any, *keys: str) -> str | None:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, str) else None


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))
