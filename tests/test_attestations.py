"""Attestations of a trace: `report --format in-toto|vsa`, DSSE envelopes (`--sign-key`) and
`verify ENVELOPE --key`.

Statements are validated against JSON Schemas written from the published specs
(tests/schemas/in-toto-statement-v1.schema.json, tests/schemas/slsa-vsa-v1-predicate.schema.json);
DSSE against the spec's own example and the test vectors of secure-systems-lab/dsse
(testvectors/vectors.json, keys from RFC 8032 section 7.1). Keys for the command-line tests are
generated here, in tmp dirs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from test_verify import APP_HEAD, OVERLAY, Scenario, facts_doc

from policyrun.cli import main
from policyrun.trace.dsse import pae

SCHEMAS = Path(__file__).parent / "schemas"
STATEMENT = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "in-toto-statement-v1.schema.json").read_text()))
VSA = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "slsa-vsa-v1-predicate.schema.json").read_text()))


@pytest.fixture()
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    monkeypatch.chdir(tmp_path)
    s = Scenario(tmp_path)
    s.rulebook, s.facts, s.trace = Path("rb.yaml"), Path("facts.json"), Path("out/trace.json")
    return s


def report(capsys: pytest.CaptureFixture[str], trace: Path, fmt: str, *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", str(trace), "--format", fmt, *extra]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def errors(validator: jsonschema.Draft202012Validator, doc: Any) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc)]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- in-toto: policyrun's verdict predicate -------------------------------------------------------


def test_verdict_statement(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    trace = scenario.load()
    doc = report(capsys, scenario.trace, "in-toto")
    assert errors(STATEMENT, doc) == []
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"] == "https://policyrun.dev/verdict/v1"
    # Two probes read /src/app at one HEAD: one subject. The rulebook's digest is its file's sha256.
    assert doc["subject"] == [{"name": "/src/app", "digest": {"gitCommit": APP_HEAD}},
                              {"name": "rb.yaml", "digest": {"sha256": sha256_file(Path("rb.yaml"))}}]
    assert doc["predicate"] == {
        "rulebook": {"name": "verify-demo", "version": "1.2.0", "sha256": sha256_file(Path("rb.yaml")),
                     "path": "rb.yaml"},
        "mode": "audit",
        "inputs": {"repo": "/src/app", "limit": 1, "note": None},
        "failOnWarn": False,
        "factsSha256": trace["facts_sha256"],
        "staleFacts": [],
        "waivers": None,
        "exceptions": [],
        "phases": [{"id": "A", "status": "PASS"}, {"id": "B", "status": "PASS"}],
        "verdict": {"id": "ready", "summary": f"ready at {'2' * 40}"},
        "exitCode": 0,
        "evidenceFiles": [],
        "generatedAt": trace["generated_at"],
        "run": trace["run"],
    }


def test_statement_schema_is_not_vacuous() -> None:
    good = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://policyrun.dev/verdict/v1",
            "subject": [{"name": "x", "digest": {"gitCommit": "a" * 40}}], "predicate": {}}
    assert errors(STATEMENT, good) == []
    for broken in ({**good, "_type": "https://in-toto.io/Statement/v0.1"}, {**good, "subject": []},
                   {**good, "subject": [{"name": "x"}]}, {**good, "subject": [{"digest": {"gitCommit": "xyz"}}]},
                   {**good, "subject": [{"digest": {"sha256": "A" * 64}}]}, {**good, "predicateType": "HTTPS://x"}):
        assert errors(STATEMENT, broken), broken


# --- vsa: the SLSA Verification Summary -----------------------------------------------------------


def test_vsa_passed(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    trace = scenario.load()
    doc = report(capsys, scenario.trace, "vsa")
    assert errors(STATEMENT, doc) == [] and errors(VSA, doc["predicate"]) == []
    assert doc["predicateType"] == "https://slsa.dev/verification_summary/v1"
    assert doc["subject"] == [{"name": "/src/app", "digest": {"gitCommit": APP_HEAD}}]
    assert doc["predicate"] == {
        "verifier": {"id": "https://policyrun.dev/verifier/v1"},
        "timeVerified": trace["generated_at"],
        "resourceUri": f"git+file:///src/app@{APP_HEAD}",
        "policy": {"uri": "file:rb.yaml", "digest": {"sha256": sha256_file(Path("rb.yaml"))}},
        "verificationResult": "PASSED",
        "verifiedLevels": ["POLICYRUN:verify-demo:audit"],
        "slsaVersion": "1.0",
    }


@pytest.mark.parametrize("exit_code", [1, 2])
def test_vsa_failed_unless_exit_code_zero(scenario: Scenario, capsys: pytest.CaptureFixture[str],
                                          exit_code: int) -> None:
    doc_facts = facts_doc(deleted=2)
    if exit_code == 2:  # B reads a fact that could not be collected: BLOCKED
        log = doc_facts["facts"]["log"]
        log.pop("value")
        log["error"] = {"code": "git.unknown_ref", "message": "v2 does not exist"}
        doc_facts = facts_doc()
        doc_facts["facts"]["log"] = log
    scenario.facts.write_text(json.dumps(doc_facts))
    assert scenario.evaluate() == exit_code
    doc = report(capsys, scenario.trace, "vsa")
    assert errors(STATEMENT, doc) == [] and errors(VSA, doc["predicate"]) == []
    assert doc["predicate"]["verificationResult"] == "FAILED"
    assert doc["predicate"]["verifiedLevels"] == ["FAILED"]


def test_vsa_options_and_refusals(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    doc = report(capsys, scenario.trace, "vsa", "--resource-uri", f"git+https://example.com/app@{APP_HEAD}",
                 "--policy-uri", "https://example.com/policies/rb.yaml", "--verifier-id", "https://ci.example.com/gate")
    assert errors(VSA, doc["predicate"]) == []
    assert doc["predicate"]["resourceUri"] == f"git+https://example.com/app@{APP_HEAD}"
    assert doc["predicate"]["policy"]["uri"] == "https://example.com/policies/rb.yaml"
    assert doc["predicate"]["verifier"] == {"id": "https://ci.example.com/gate"}
    assert main(["report", str(scenario.trace), "--format", "md", "--verifier-id", "x"]) == 3
    assert "R009" in capsys.readouterr().err
    assert main(["report", str(scenario.trace), "--format", "in-toto", "--template", "t.md.j2"]) == 3
    assert "R009" in capsys.readouterr().err


def test_vsa_needs_a_timestamp_and_a_repository(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate("--no-timestamp") == 0
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "--format", "vsa"]) == 3
    err = capsys.readouterr().err
    assert "A003" in err and "no generated_at" in err
    doc = facts_doc()
    for fact in doc["facts"].values():
        fact["provenance"].pop("repo")
    scenario.facts.write_text(json.dumps(doc))
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "--format", "vsa"]) == 3
    assert "records no repository commit" in capsys.readouterr().err
    statement = report(capsys, scenario.trace, "in-toto")  # the rulebook is always a subject
    assert statement["subject"] == [{"name": "rb.yaml", "digest": {"sha256": sha256_file(Path("rb.yaml"))}}]
    assert errors(STATEMENT, statement) == []


def test_vsa_resource_uri_of_a_relative_repository_path(scenario: Scenario,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    doc = facts_doc()
    for fact in doc["facts"].values():
        fact["provenance"]["repo"]["path"] = "app"  # as a probe run with path "app" could record it
    scenario.facts.write_text(json.dumps(doc))
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "--format", "vsa"]) == 3
    assert "the repository path 'app' is relative; pass --resource-uri" in capsys.readouterr().err
    vsa = report(capsys, scenario.trace, "vsa", "--resource-uri", f"git+https://example.com/app@{APP_HEAD}")
    assert vsa["predicate"]["resourceUri"] == f"git+https://example.com/app@{APP_HEAD}"


def test_vsa_schema_is_not_vacuous() -> None:
    good = {"verifier": {"id": "https://v.example"}, "timeVerified": "2025-01-01T00:00:00Z",
            "resourceUri": "git+file:///x@" + "a" * 40, "policy": {"uri": "file:rb.yaml"},
            "verificationResult": "PASSED", "verifiedLevels": ["POLICYRUN:x:y"]}
    assert errors(VSA, good) == []
    for broken in ({**good, "verificationResult": "OK"}, {**good, "verifiedLevels": ["SLSA_CUSTOM"]},
                   {**good, "verificationResult": "FAILED"}, {**good, "timeVerified": "2025-01-01 00:00:00"},
                   {**good, "policy": {"digest": {"sha256": "a" * 64}}},
                   {k: v for k, v in good.items() if k != "verifier"}):
        assert errors(VSA, broken), broken


def test_overlay_chain_in_both_statements(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    Path("strict.yaml").write_text(OVERLAY.replace("default: 0", "default: 5"))
    assert main(["evaluate", "strict.yaml", "--mode", "audit", "--facts", str(scenario.facts), "--out", "o", "-q"]) == 0
    chain = [{"name": "verify-demo", "path": "rb.yaml", "sha256": sha256_file(Path("rb.yaml"))},
             {"name": "verify-demo-strict", "path": "strict.yaml", "sha256": sha256_file(Path("strict.yaml"))}]
    doc = report(capsys, Path("o/trace.json"), "in-toto")
    assert doc["subject"][1:] == [{"name": c["path"], "digest": {"sha256": c["sha256"]}} for c in chain]
    assert doc["predicate"]["rulebook"]["chain"] == chain
    vsa = report(capsys, Path("o/trace.json"), "vsa")
    assert vsa["predicate"]["policy"] == {"uri": "file:strict.yaml", "digest": {"sha256": chain[1]["sha256"]},
                                          "annotations": {"chain": chain}}
    assert errors(VSA, vsa["predicate"]) == []


def test_an_inconsistent_trace_is_never_attested(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2)))
    assert scenario.evaluate() == 1
    data = scenario.load()
    data["exit_code"] = 0
    Path("edited.json").write_text(json.dumps(data))
    capsys.readouterr()
    for fmt in ("in-toto", "vsa"):
        assert main(["report", "edited.json", "--format", fmt, "--force", "-o", f"{fmt}.json"]) == 3
        out, err = capsys.readouterr()
        assert "T005" in err and "will not attest an inconsistent trace" in err and out == ""
        assert not Path(f"{fmt}.json").exists()


# --- DSSE: the protocol against its spec and test vectors ----------------------------------------

# secure-systems-lab/dsse testvectors/vectors.json: key "A" is RFC 8032 section 7.1 TEST 1.
SEED_A = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
STATEMENT_BODY = b'{"_type":"https://in-toto.io/Statement/v1"}'
VECTOR_SIG = "2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA=="


def test_pae_is_the_specs() -> None:
    # protocol.md's example, and vectors.json's non-ASCII type (29 bytes, 28 characters) and empty body.
    hello = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("http://example.com/HelloWorld", b"hello world") == hello
    assert pae("application/vnd.exämple+json", STATEMENT_BODY).hex().startswith(
        "445353457631203239206170706c69636174696f6e2f766e642e6578c3a46d706c652b6a736f6e203433")
    assert pae("application/vnd.in-toto+json", b"") == b"DSSEv1 28 application/vnd.in-toto+json 0 "


def _keys(tmp_path: Path, name: str = "key", seed: str | None = None) -> tuple[Path, Path]:
    pytest.importorskip("cryptography")  # the optional extra `sign`
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed)) if seed else Ed25519PrivateKey.generate()
    private, public = tmp_path / f"{name}.pem", tmp_path / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_signature_matches_the_dsse_vector(tmp_path: Path) -> None:
    from policyrun.trace import dsse

    private, public = _keys(tmp_path, seed=SEED_A)
    envelope = dsse.sign(STATEMENT_BODY, private)
    assert envelope["payload"] == "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEifQ=="
    assert envelope["signatures"][0]["sig"] == VECTOR_SIG  # ed25519 is deterministic
    assert dsse.verify(envelope, public).payload == STATEMENT_BODY
    url_safe = {"payload": "-_-_Pj8=", "payloadType": "application/vnd.in-toto+json", "signatures": [{
        "sig": "P-_KHICeR7tI6S_YyejJTRtrXhcQyQ2LYPaL8h90KjC9qN8HU_svOQ6TuDOT1HIrsGW886DbWNWcCmX5twLrAw==",
        "keyid": "A"}]}
    assert dsse.verify(url_safe, public).payload == b"\xfb\xff\xbf>?"  # verifiers must accept either alphabet
    swapped = {**envelope, "payloadType": "application/vnd.example.other+json"}
    with pytest.raises(dsse.InvalidEnvelope):
        dsse.verify(swapped, public)


# --- DSSE on the command line ---------------------------------------------------------------------


def _flip(envelope: dict[str, Any], at: int) -> dict[str, Any]:
    body = bytearray(base64.b64decode(envelope["payload"]))
    body[at] ^= 0x01
    return {**envelope, "payload": base64.b64encode(bytes(body)).decode()}


def test_signed_statement_round_trip_and_tampering(scenario: Scenario, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    private, public = _keys(tmp_path)
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "--format", "in-toto"]) == 0
    unsigned = capsys.readouterr().out
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", str(private), "-o", "env.json"]) == 0
    envelope = json.loads(Path("env.json").read_text())
    assert set(envelope) == {"payloadType", "payload", "signatures"}
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    body = base64.b64decode(envelope["payload"])
    assert body == unsigned.encode()  # the signed payload is exactly the unsigned statement
    from cryptography.hazmat.primitives import serialization

    pub = serialization.load_pem_public_key(public.read_bytes())
    [entry] = envelope["signatures"]
    pub.verify(base64.b64decode(entry["sig"]),  # type: ignore[union-attr, call-arg]
               b"DSSEv1 28 application/vnd.in-toto+json " + str(len(body)).encode() + b" " + body)
    der = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert entry["keyid"] == hashlib.sha256(der).hexdigest()

    assert main(["verify", "env.json", "--key", str(public)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"signature valid: env.json is signed by the key with keyid {entry['keyid']}\n")

    _, other = _keys(tmp_path, "other")
    tampered = {
        "flipped payload byte": _flip(envelope, 40),
        "another payload": {**envelope, "payload": base64.b64encode(body.replace(b'"PASS"', b'"FAIL"')).decode()},
        "payload type": {**envelope, "payloadType": "application/json"},
        "signature": {**envelope, "signatures": [{**entry, "sig": base64.b64encode(b"\0" * 64).decode()}]},
        "not base64": {**envelope, "payload": "%%%"},
        "no signature": {**envelope, "signatures": []},
    }
    for what, bad in tampered.items():
        Path("bad.json").write_text(json.dumps(bad))
        assert main(["verify", "bad.json", "--key", str(public)]) == 1, what
        assert capsys.readouterr().out.startswith("INVALID: bad.json: "), what
    Path("bad.json").write_text(json.dumps(tampered["flipped payload byte"]))
    assert main(["verify", "bad.json", "--key", str(public)]) == 1
    assert capsys.readouterr().out.endswith("the payload or payloadType was changed after signing\n")
    assert main(["verify", "env.json", "--key", str(other)]) == 1  # wrong key
    assert capsys.readouterr().out.endswith(f"the envelope names another key ({entry['keyid']}): was it signed "
                                            "with another key?\n")


def test_key_problems_are_usage_errors(scenario: Scenario, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    private, public = _keys(tmp_path)
    assert scenario.evaluate() == 0
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", str(private), "-o", "env.json"]) == 0
    capsys.readouterr()
    assert main(["verify", "env.json"]) == 3  # no key
    assert "pass the signer's public key with --key" in capsys.readouterr().err
    assert main(["verify", "env.json", "--key", str(private)]) == 3
    assert "this is a private key" in capsys.readouterr().err
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_key = ec.generate_private_key(ec.SECP256R1())
    Path("ec.pem").write_bytes(ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", "ec.pem"]) == 3
    assert "not ed25519" in capsys.readouterr().err
    Path("junk.pem").write_text("not a key\n")
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", "junk.pem"]) == 3
    assert "A002" in capsys.readouterr().err
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", "missing.pem"]) == 3
    assert "cannot read key" in capsys.readouterr().err

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    locked = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.BestAvailableEncryption(b"s3cret"))
    Path("locked.pem").write_bytes(locked)
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", "locked.pem"]) == 3
    assert "POLICYRUN_SIGN_KEY_PASSPHRASE" in capsys.readouterr().err
    monkeypatch.setenv("POLICYRUN_SIGN_KEY_PASSPHRASE", "s3cret")
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", "locked.pem"]) == 0


def test_without_cryptography_the_error_says_how_to_install_it(scenario: Scenario, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    private, _ = _keys(tmp_path)
    assert scenario.evaluate() == 0
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives", None)  # import fails as if absent
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "-f", "in-toto", "--sign-key", str(private)]) == 3
    err = capsys.readouterr().err
    assert "A001" in err and "pip install 'policyrun[sign]'" in err
    assert main(["report", str(scenario.trace), "-f", "in-toto"]) == 0  # unsigned statements need nothing


# --- verify ENVELOPE with --facts or --trace: what the statement claims ----------------------------


def test_signed_statement_checked_against_facts_and_trace(scenario: Scenario, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    private, public = _keys(tmp_path)
    assert scenario.evaluate() == 0
    sign = ["--sign-key", str(private)]
    assert main(["report", str(scenario.trace), "-f", "in-toto", *sign, "-o", "env.json"]) == 0
    capsys.readouterr()
    assert main(["verify", "env.json", "--key", str(public), "--facts", str(scenario.facts)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "verified: the statement is what its rulebook gives over these facts" in out
    assert main(["verify", "env.json", "--key", str(public), "--trace", str(scenario.trace)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "statement matches out/trace.json"

    # A trace edited consistently (its own checks cannot tell), then signed: the signature is
    # valid, the claim is not.
    data = scenario.load()
    data["verdict"]["summary"] = "ready, and reviewed by the release board"
    Path("forged.json").write_text(json.dumps(data))
    assert main(["report", "forged.json", "-f", "in-toto", *sign, "-o", "forged.env.json"]) == 0
    capsys.readouterr()
    assert main(["verify", "forged.env.json", "--key", str(public), "--facts", str(scenario.facts)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("signature valid:")
    assert ('predicate.verdict.summary: statement has "ready, and reviewed by the release board", evaluation gives '
            f'"ready at {"2" * 40}"') in out
    assert out[-1].startswith("NOT VERIFIED: the statement differs from its re-evaluation in 1 field(s)")
    assert main(["verify", "forged.env.json", "--key", str(public), "--trace", str(scenario.trace)]) == 1
    assert ('predicate.verdict.summary: statement has "ready, and reviewed by the release board", trace gives '
            f'"ready at {"2" * 40}"') in capsys.readouterr().out.splitlines()


def test_signed_vsa_needs_its_trace_to_be_replayed(scenario: Scenario, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    private, public = _keys(tmp_path)
    assert scenario.evaluate() == 0
    assert main(["report", str(scenario.trace), "-f", "vsa", "--sign-key", str(private), "--verifier-id",
                 "https://ci.example.com/gate", "-o", "vsa.json"]) == 0
    capsys.readouterr()
    assert main(["verify", "vsa.json", "--key", str(public), "--facts", str(scenario.facts)]) == 3
    assert "V004" in capsys.readouterr().err
    assert main(["verify", "vsa.json", "--key", str(public), "--trace", str(scenario.trace), "--facts",
                 str(scenario.facts)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  statement https://slsa.dev/verification_summary/v1 about 1 subject(s)"
    assert any(line.startswith("verified: out/trace.json is what its rulebook gives") for line in out)
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2)))
    assert scenario.evaluate() == 1  # the same path now holds a FAILED trace
    assert main(["verify", "vsa.json", "--key", str(public), "--trace", str(scenario.trace)]) == 1
    assert "predicate.verificationResult: statement has PASSED, trace gives FAILED" in capsys.readouterr().out
