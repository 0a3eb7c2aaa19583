"""DSSE envelopes (Dead Simple Signing Envelope, secure-systems-lab/dsse protocol v1.0) signed with
local ed25519 keys: what `report --sign-key` writes and `verify --key` checks.

The signature covers PAE(payloadType, payload), never the JSON around it, so nothing is
canonicalised: the payload bytes are signed as they are. `cryptography` is an optional extra
(`pip install 'policyrun[sign]'`), imported only here and only when a key is used.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun import limits
from policyrun.errors import Location, UsageError, display_path

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"  # the in-toto Envelope spec's payloadType for a Statement
PASSPHRASE_ENV = "POLICYRUN_SIGN_KEY_PASSPHRASE"
_KEY_BYTES = 64 * 1024


def pae(payload_type: str, body: bytes) -> bytes:
    """Pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in
    bytes as ASCII decimals (so a non-ASCII type counts its UTF-8 bytes)."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


class InvalidEnvelope(Exception):
    """The envelope does not verify: a bad signature, a payload that was changed, an unknown type."""


@dataclass(frozen=True)
class Verified:
    payload: bytes
    keyid: str


def _serialization() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise UsageError("signing and checking signatures need the `cryptography` package; install it with "
                         "`pip install 'policyrun[sign]'` (or `pip install cryptography`)", code="A001") from None
    return serialization


def _read_key(path: Path) -> bytes:
    try:
        return limits.read_limited(path, _KEY_BYTES)
    except (limits.Unreadable, limits.TooLarge) as exc:
        raise UsageError(f"cannot read key: {exc.reason}", code="A002", location=Location(display_path(path))) from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An ed25519 private key in PEM (PKCS#8, as `openssl genpkey -algorithm ed25519` writes it);
    an encrypted key takes its passphrase from $POLICYRUN_SIGN_KEY_PASSPHRASE."""
    serialization = _serialization()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data, name = _read_key(path), display_path(path)
    secret = os.environ.get(PASSPHRASE_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=secret.encode() if secret else None)
    except TypeError:  # encrypted without a passphrase, or a passphrase for a key that has none
        raise UsageError(f"the private key is encrypted; set {PASSPHRASE_ENV} to its passphrase" if not secret else
                         f"the private key is not encrypted; unset {PASSPHRASE_ENV}", code="A002",
                         location=Location(name)) from None
    except ValueError as exc:
        raise UsageError(f"not a PEM private key ({_first_line(exc)}); create one with `openssl genpkey -algorithm "
                         "ed25519 -out key.pem`", code="A002", location=Location(name)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"the key is {type(key).__name__.removeprefix('_')}, not ed25519; policyrun signs with "
                         "ed25519 keys (`openssl genpkey -algorithm ed25519 -out key.pem`)", code="A002",
                         location=Location(name))
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An ed25519 public key in PEM (`openssl pkey -in key.pem -pubout -out pub.pem`)."""
    serialization = _serialization()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data, name = _read_key(path), display_path(path)
    if b"PRIVATE KEY" in data:
        raise UsageError("this is a private key; verify with the public key (`openssl pkey -in key.pem -pubout "
                         "-out pub.pem`) and keep the private one with the signer", code="A002",
                         location=Location(name))
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise UsageError(f"not a PEM public key ({_first_line(exc)}); export one with `openssl pkey -in key.pem "
                         "-pubout -out pub.pem`", code="A002", location=Location(name)) from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"the key is {type(key).__name__.removeprefix('_')}, not ed25519", code="A002",
                         location=Location(name))
    return key


def keyid(public_key: Ed25519PublicKey) -> str:
    """The key's hint in the envelope: sha256 of its DER SubjectPublicKeyInfo, in hex (the same as
    `openssl pkey -pubin -in pub.pem -outform DER | sha256sum`). DSSE never trusts it."""
    serialization = _serialization()
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def sign(body: bytes, key_path: Path, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """The JSON envelope: payloadType, the base64 payload and one signature over its PAE."""
    key = load_private_key(key_path)
    sig = key.sign(pae(payload_type, body))
    return {"payloadType": payload_type, "payload": base64.b64encode(body).decode("ascii"),
            "signatures": [{"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode("ascii")}]}


def envelope_text(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, indent=2) + "\n"


def is_envelope(data: Any) -> bool:
    return isinstance(data, dict) and "payload" in data and "signatures" in data


def verify(envelope: dict[str, Any], key_path: Path, *, payload_type: str = PAYLOAD_TYPE) -> Verified:
    """The payload, when a signature in the envelope verifies with the key over PAE(payloadType,
    payload); otherwise `InvalidEnvelope` saying why. A payload type other than `payload_type` is
    refused after the signatures are checked, as the protocol orders."""
    key = load_public_key(key_path)
    kind = envelope.get("payloadType")
    sigs = envelope.get("signatures")
    if not isinstance(kind, str) or not isinstance(envelope.get("payload"), str) or not isinstance(sigs, list):
        raise InvalidEnvelope("the envelope needs a string payloadType, a base64 payload and a list of signatures")
    body = _b64(envelope["payload"], "payload")
    from cryptography.exceptions import InvalidSignature

    message = pae(kind, body)
    for entry in sigs:
        if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
            continue
        try:
            key.verify(_b64(entry["sig"], "signature"), message)
        except (InvalidSignature, InvalidEnvelope):
            continue
        if kind != payload_type:
            raise InvalidEnvelope(f"payloadType {kind!r} is not {payload_type!r}")
        return Verified(body, keyid(key))
    mine = keyid(key)
    named = sorted({e["keyid"] for e in sigs if isinstance(e, dict) and isinstance(e.get("keyid"), str)} - {mine})
    # A keyid is an unauthenticated hint, so it only chooses the more likely explanation.
    why = (f"the envelope names another key ({', '.join(named)}): was it signed with another key?" if named and not
           any(isinstance(e, dict) and e.get("keyid") == mine for e in sigs) else
           "the payload or payloadType was changed after signing")
    raise InvalidEnvelope(f"no signature verifies with this key (keyid {mine}) over the payload; {why}")


def _b64(text: str, what: str) -> bytes:
    """Standard or URL-safe base64, as DSSE verifiers must accept either."""
    try:
        alphabet = text.replace("-", "+").replace("_", "/")
        return base64.b64decode(alphabet + "=" * (-len(alphabet) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidEnvelope(f"the {what} is not valid base64") from None


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
