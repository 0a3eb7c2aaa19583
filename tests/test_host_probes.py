"""Host probes: command (exec permission, isolation, bounds, timeouts), env (masking), path
(lstat only, root containment, listings) and python.modules (isolated imports in a target
interpreter). Programs are small shell scripts and Python in tmp dirs; no network, no GPU."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.cli import main
from policyrun.collection.run import collect
from policyrun.language.lint import findings_for
from policyrun.model import Rulebook
from policyrun.probes.base import SIDE_EFFECTS, ProbeContext, ProbeError
from policyrun.probes.host.command import DEFAULT_ENV_ALLOW, CommandProbe
from policyrun.probes.host.env import EnvProbe
from policyrun.probes.host.path import PathProbe
from policyrun.probes.python.modules import PythonModulesProbe, modules_script
from policyrun.probes.registry import get
from policyrun.language.rulebook import load_rulebook
from tests.fakes import stack_site

KINDS = ["command", "env", "path", "python.modules"]


def _run(probe: Any, tmp_path: Path, params: Mapping[str, Any], *, timeout: float = 30,
         env: Mapping[str, str] | None = None) -> Any:
    value = probe.run(params, ProbeContext(base_dir=tmp_path, timeout_s=timeout, env=dict(env or {}))).value
    jsonschema.Draft202012Validator(probe.fact_schema).validate(value)  # every fact matches its own schema
    return value


def _error(probe: Any, tmp_path: Path, params: Mapping[str, Any], **kw: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        _run(probe, tmp_path, params, **kw)
    return info.value


def _exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (killed, not yet reaped by its new parent).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


# --- the contract ---------------------------------------------------------------------------------

def _untyped(schema: Mapping[str, Any], path: str) -> list[str]:
    out: list[str] = []
    if "type" not in schema:
        out.append(path)
    for name, sub in (schema.get("properties") or {}).items():
        out += _untyped(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        out += _untyped(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        out += _untyped(schema["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_registered_with_typed_schemas(kind: str) -> None:
    probe = get(kind)
    assert probe is not None
    assert _untyped(probe.fact_schema, "facts") == []
    jsonschema.Draft202012Validator.check_schema(probe.params_schema)
    jsonschema.Draft202012Validator.check_schema(probe.fact_schema)
    assert probe.params_schema.get("additionalProperties") is False


def test_side_effects() -> None:
    assert SIDE_EFFECTS["exec"] == "runs a program named by the rulebook"
    assert CommandProbe().side_effects({"argv": ["true"]}) == frozenset({"exec"})
    assert EnvProbe().side_effects({"names": ["HOME"]}) == frozenset()
    assert PathProbe().side_effects({"paths": ["."]}) == frozenset()
    assert PythonModulesProbe().side_effects({"modules": ["json"]}) == frozenset()
    assert PythonModulesProbe().side_effects({"modules": ["json"], "gpu_visible": True}) == frozenset({"gpu_context"})


def test_params_refuse_a_shell_string_and_nul_bytes() -> None:
    validator = jsonschema.Draft202012Validator(CommandProbe.params_schema)
    assert not validator.is_valid({"argv": "echo hi"})
    assert not validator.is_valid({"argv": []})
    assert not validator.is_valid({"argv": ["echo", "a\x00b"]})
    assert not validator.is_valid({"argv": ["true"], "env": {"A=B": "x"}})
    assert not validator.is_valid({"argv": ["true"], "timeout_s": 100000})
    assert validator.is_valid({"argv": ["true"], "env": {"A": "x"}, "env_allow": ["PATH", "CUDA_*"], "stdin": "x",
                               "head_bytes": 0, "tail_bytes": 10, "ok_exit_codes": [0, 1], "cwd": "."})
    modules = jsonschema.Draft202012Validator(PythonModulesProbe.params_schema)
    assert not modules.is_valid({"modules": ["os; import x"]})
    assert modules.is_valid({"modules": ["torch", "vllm._C"]})


# --- command --------------------------------------------------------------------------------------

def test_command_runs_argv_in_an_empty_temporary_directory(tmp_path: Path) -> None:
    (tmp_path / "audited.txt").write_text("from the tree under audit")
    prog = _exe(tmp_path / "bin" / "report", 'pwd; ls -A; echo "args:$1|$2"; echo warn >&2; exit 0\n')
    v = _run(CommandProbe(), tmp_path, {"argv": ["report", "a b", "$HOME;*"]},
             env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert v["executable"] == str(prog)
    assert v["argv"] == ["report", "a b", "$HOME;*"]
    assert (v["exit_code"], v["signal"], v["ok"], v["timed_out"], v["cwd"]) == (0, None, True, False, None)
    lines = v["stdout"]["head"].splitlines()
    workdir = Path(lines[0])
    assert workdir != tmp_path and workdir.name.startswith("policyrun-command-")
    assert lines[1] == "args:a b|$HOME;*"  # no shell: nothing expanded; ls -A printed nothing (empty dir)
    assert not workdir.exists()  # removed afterwards
    assert v["stderr"] == {"head": "warn\n", "tail": "warn\n", "bytes": 5, "truncated": False}
    assert v["stdout"]["bytes"] == len(v["stdout"]["head"].encode())


def test_command_exit_codes_and_ok(tmp_path: Path) -> None:
    prog = _exe(tmp_path / "three", "exit 3\n")
    v = _run(CommandProbe(), tmp_path, {"argv": [str(prog)], "ok_exit_codes": [0]})
    assert (v["exit_code"], v["ok"]) == (3, False)  # listed codes keep a failing run as a fact
    v = _run(CommandProbe(), tmp_path, {"argv": ["./three"], "ok_exit_codes": [0, 3]})
    assert (v["exit_code"], v["ok"], v["executable"]) == (3, True, str(prog))  # relative to the base dir


def test_command_fails_closed_without_ok_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The trap the issue names: a network tool that cannot reach its index exits non-zero with an
    # empty stdout; read as a fact, "no line printed" said "nothing outdated".
    monkeypatch.setenv("POLICYRUN_TEST_API_TOKEN", "tok-0123456789abcdef")
    prog = _exe(tmp_path / "pip", "echo 'ERROR: SSL: CERTIFICATE_VERIFY_FAILED tok-0123456789abcdef' >&2\nexit 2\n")
    err = _error(CommandProbe(), tmp_path, {"argv": [str(prog), "list", "--outdated"]})
    assert err.code == "command.exit_status"
    assert err.message.startswith(f"{prog} list --outdated exited 2; stderr ends: ERROR: SSL: "
                                  "CERTIFICATE_VERIFY_FAILED")
    assert "tok-0123456789abcdef" not in err.message and "***" in err.message  # masked like the fact
    assert "ok_exit_codes" in err.message and err.commands == [f"{prog} list --outdated"]
    long = _exe(tmp_path / "long", "yes x | head -c 5000 >&2\nexit 1\n")
    assert len(_error(CommandProbe(), tmp_path, {"argv": [str(long)]}).message) < 1300  # a tail, not all of it
    err = _error(CommandProbe(), tmp_path, {"argv": [str(_exe(tmp_path / "segv", "kill -SEGV $$\n"))]})
    assert err.code == "command.signal" and "was ended by SIGSEGV; stderr is empty" in err.message
    err = _error(CommandProbe(), tmp_path, {"argv": ["sleep", "30"], "timeout_s": 0.5})
    assert err.code == "command.timed_out" and "did not finish within 0.5 s" in err.message
    assert _run(CommandProbe(), tmp_path, {"argv": ["true"]})["ok"] is True  # exit 0 is a fact


def test_command_env_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from policyrun.probes.host.command import ENV_PRESETS

    for name in ENV_PRESETS["tls"] + ENV_PRESETS["proxy"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/site.pem")
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/site.pem")
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    v = _run(CommandProbe(), tmp_path, {"argv": ["env"], "env_allow": ["@default", "@tls", "@proxy"]})
    names = set(v["env_names"])
    assert {"SSL_CERT_FILE", "PIP_CERT", "https_proxy", "NO_PROXY", "PATH"} <= names and "PYTHONPATH" not in names
    v = _run(CommandProbe(), tmp_path, {"argv": ["/usr/bin/env"], "env_allow": ["@tls"]})
    assert set(v["env_names"]) == {"SSL_CERT_FILE", "PIP_CERT"}
    schema = jsonschema.Draft202012Validator(CommandProbe().params_schema)
    assert not schema.is_valid({"argv": ["x"], "env_allow": ["@tsl"]})  # an unknown preset is refused
    assert schema.is_valid({"argv": ["x"], "env_allow": ["@proxy", "CUDA_*"]})


def test_command_that_needs_the_network_needs_the_permission(tmp_path: Path) -> None:
    assert CommandProbe().side_effects({"argv": ["pip"], "network": True}) == frozenset({"exec", "network"})
    prog = _exe(tmp_path / "ok", "echo hi\n")
    rb = Rulebook.model_validate({
        "policyrun": 1, "name": "net",
        "modes": {"offline": {"phases": ["P"], "permissions": {"exec": True}},
                  "online": {"phases": ["P"], "permissions": {"exec": True, "network": True}}},
        "phases": [{"id": "P", "evidence": [{"id": "ran", "check": "!failed(facts.c)"}]}],
        "probes": {"c": {"uses": "command", "with": {"argv": [str(prog)], "network": True}}},
    })
    fact = collect(rb, "offline", {}, base_dir=tmp_path).facts["c"]
    assert fact.error is not None and fact.error.code == "refused.permission" and "'network'" in fact.error.message
    assert collect(rb, "online", {}, base_dir=tmp_path).facts["c"].error is None


def test_error_message_quotes_a_failed_command_in_a_check_message(tmp_path: Path) -> None:
    prog = _exe(tmp_path / "pip", "echo 'no index' >&2\nexit 2\n")
    rb = tmp_path / "rb.yaml"
    rb.write_text(f"""\
policyrun: 1
name: quote
modes:
  run: {{phases: [P], permissions: {{exec: true}}}}
probes:
  c: {{uses: command, with: {{argv: [{prog}]}}}}
phases:
  - id: P
    evidence:
      - id: ran
        check: "!failed(facts.c)"
        message: "pip: ${{error_code(facts.c)}}: ${{error_message(facts.c)}}"
""")
    assert main(["evaluate", str(rb), "--out", str(tmp_path / "o"), "-q"]) == 1
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    [check] = trace["phases"][0]["evidence"]
    assert check["message"] == f"pip: command.exit_status: {prog} exited 2; stderr ends: no index (list " \
                               "`ok_exit_codes` in the probe to keep a failing run as a fact)"


def test_command_killed_by_a_signal(tmp_path: Path) -> None:
    prog = _exe(tmp_path / "segv", "kill -SEGV $$\n")
    v = _run(CommandProbe(), tmp_path, {"argv": [str(prog)], "ok_exit_codes": [0, 139, -11]})
    assert (v["exit_code"], v["signal"], v["ok"], v["timed_out"]) == (None, "SIGSEGV", False, False)


def test_command_not_found_and_not_executable(tmp_path: Path) -> None:
    err = _error(CommandProbe(), tmp_path, {"argv": ["policyrun-no-such-program", "x"]},
                 env={"PATH": str(tmp_path)})
    assert err.code == "command.not_found"
    assert "'policyrun-no-such-program' is not on the command's PATH" in err.message and str(tmp_path) in err.message
    err = _error(CommandProbe(), tmp_path, {"argv": ["bin/missing"]})
    assert err.code == "command.not_found" and str(tmp_path / "bin" / "missing") in err.message
    (tmp_path / "plain.txt").write_text("echo no\n")
    err = _error(CommandProbe(), tmp_path, {"argv": ["./plain.txt"]})
    assert err.code == "command.not_executable" and "plain.txt" in err.message
    err = _error(CommandProbe(), tmp_path, {"argv": [str(tmp_path)]})
    assert err.code == "command.not_executable"


def test_command_start_failure_is_a_probe_error(tmp_path: Path) -> None:
    bad = tmp_path / "garbage"
    bad.write_bytes(b"\x7fELF\x00\x00 not really")
    bad.chmod(0o755)
    err = _error(CommandProbe(), tmp_path, {"argv": [str(bad)]})
    assert err.code == "command.start_failed" and str(bad) in err.message


def test_command_cwd(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "here.txt").write_text("x")
    v = _run(CommandProbe(), tmp_path, {"argv": ["sh", "-c", "pwd; ls"], "cwd": "work"})
    assert v["cwd"] == str(tmp_path / "work")
    assert v["stdout"]["head"] == f"{tmp_path / 'work'}\nhere.txt\n"
    err = _error(CommandProbe(), tmp_path, {"argv": ["true"], "cwd": "nope"})
    assert err.code == "command.bad_cwd" and "is not an existing directory" in err.message
    err = _error(CommandProbe(), tmp_path, {"argv": ["true"], "cwd": "work/here.txt"})
    assert err.code == "command.bad_cwd"


def test_command_environment_is_allow_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CUDA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("POLICYRUN_TEST_SECRET_TOKEN", "s3cr3t")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("HOME", "/home/tester")
    v = _run(CommandProbe(), tmp_path, {"argv": ["env"]})
    seen = dict(line.split("=", 1) for line in v["stdout"]["head"].splitlines())
    assert set(seen) == set(v["env_names"]) <= set(DEFAULT_ENV_ALLOW)
    assert seen["HOME"] == "/home/tester" and "PATH" in seen
    assert "s3cr3t" not in v["stdout"]["head"] and "PYTHONPATH" not in seen and "CUDA_HOME" not in seen

    v = _run(CommandProbe(), tmp_path, {"argv": ["/usr/bin/env"], "env_allow": ["CUDA_*"],
                                        "env": {"NCCL_DEBUG": "INFO", "CUDA_HOME": "/opt/cuda"}})
    seen = dict(line.split("=", 1) for line in v["stdout"]["head"].splitlines())
    assert seen == {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_HOME": "/opt/cuda", "NCCL_DEBUG": "INFO"}
    assert v["env_names"] == ["CUDA_HOME", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG"]


def test_command_without_path_uses_the_default_search_path(tmp_path: Path) -> None:
    err = _error(CommandProbe(), tmp_path, {"argv": ["policyrun-nope"], "env_allow": []})
    assert err.code == "command.not_found" and os.defpath in err.message
    v = _run(CommandProbe(), tmp_path, {"argv": ["sh", "-c", "echo ok"], "env_allow": []})
    assert v["stdout"]["head"] == "ok\n" and v["env_names"] == []


def test_command_stdin(tmp_path: Path) -> None:
    v = _run(CommandProbe(), tmp_path, {"argv": ["cat"], "stdin": "héllo\nworld\n"})
    assert v["stdout"]["head"] == "héllo\nworld\n"
    # A program that never reads its stdin does not hang the probe, whatever it is given.
    v = _run(CommandProbe(), tmp_path, {"argv": ["true"], "stdin": "x" * (1 << 20)}, timeout=10)
    assert v["ok"] and not v["timed_out"]
    v = _run(CommandProbe(), tmp_path, {"argv": ["sh", "-c", "cat; echo end"]})  # no stdin: /dev/null
    assert v["stdout"]["head"] == "end\n"


def test_command_output_head_and_tail(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write(''.join(f'{i:05d}\\n' for i in range(2000)))"
    v = _run(CommandProbe(), tmp_path, {"argv": [sys.executable, "-c", script], "head_bytes": 12, "tail_bytes": 18})
    assert v["stdout"] == {"head": "00000\n00001\n", "tail": "01997\n01998\n01999\n", "bytes": 12000,
                           "truncated": True}
    # Exactly head + tail bytes: nothing dropped.
    v = _run(CommandProbe(), tmp_path, {"argv": ["printf", "abcdef"], "head_bytes": 2, "tail_bytes": 4})
    assert v["stdout"] == {"head": "ab", "tail": "cdef", "bytes": 6, "truncated": False}
    v = _run(CommandProbe(), tmp_path, {"argv": ["printf", "abcdefg"], "head_bytes": 2, "tail_bytes": 4})
    assert v["stdout"] == {"head": "ab", "tail": "defg", "bytes": 7, "truncated": True}
    v = _run(CommandProbe(), tmp_path, {"argv": ["printf", "abc"], "head_bytes": 0, "tail_bytes": 0})
    assert v["stdout"] == {"head": "", "tail": "", "bytes": 3, "truncated": True}


def test_command_large_output_costs_the_caps(tmp_path: Path) -> None:
    script = "import os\nfor _ in range(256): os.write(1, b'y' * (1 << 20))\nos.write(2, b'done')"
    v = _run(CommandProbe(), tmp_path, {"argv": [sys.executable, "-c", script]}, timeout=60)
    assert v["stdout"]["bytes"] == 256 << 20 and v["stdout"]["truncated"]
    assert v["stdout"]["head"] == "y" * 4096 and v["stdout"]["tail"] == "y" * 4096
    assert v["stderr"]["head"] == "done" and v["ok"]


def test_command_output_that_is_not_utf8(tmp_path: Path) -> None:
    script = "import os; os.write(1, b'ok \\xff\\xfe end'); os.write(2, 'é'.encode() * 10)"
    v = _run(CommandProbe(), tmp_path, {"argv": [sys.executable, "-c", script], "head_bytes": 5, "tail_bytes": 5})
    assert v["stdout"]["head"] == "ok \ufffd\ufffd"
    assert v["stdout"]["tail"] == "\ufffd end"
    # A cut through a two-byte character drops that character instead of inventing U+FFFD.
    assert v["stderr"]["head"] == "éé" and v["stderr"]["tail"] == "éé" and v["stderr"]["bytes"] == 20
    json.dumps(v, ensure_ascii=False).encode("utf-8")  # a fact policyrun can write


def test_command_timeout_is_a_fact_and_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    prog = _exe(tmp_path / "hang", f"sleep 300 & echo $! > {pidfile}\necho started\nexec sleep 300\n")
    t0 = time.monotonic()
    v = _run(CommandProbe(), tmp_path, {"argv": [str(prog)], "timeout_s": 1.5, "ok_exit_codes": [0]})
    assert time.monotonic() - t0 < 120  # against 300 s without the kill; generous under load
    assert (v["timed_out"], v["ok"], v["exit_code"], v["signal"]) == (True, False, None, "SIGKILL")
    assert v["timeout_s"] == 1.5 and v["duration_s"] >= 1.5
    assert v["stdout"]["head"] == "started\n"  # what it printed before the deadline is kept
    assert _wait_dead(int(pidfile.read_text()))  # the background child went with the group


def test_command_timeout_fits_inside_the_probe_budget(tmp_path: Path) -> None:
    v = _run(CommandProbe(), tmp_path, {"argv": ["sleep", "30"], "timeout_s": 30, "ok_exit_codes": [0]}, timeout=2)
    assert v["timed_out"] and v["timeout_s"] < 2 and v["duration_s"] < 25  # not the command's 30 s


def test_command_leaves_nothing_running_after_it_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    prog = _exe(tmp_path / "daemonish", f"sleep 300 & echo $! > {pidfile}\necho bye\n")
    t0 = time.monotonic()
    v = _run(CommandProbe(), tmp_path, {"argv": [str(prog)], "timeout_s": 20})
    assert v["ok"] and not v["timed_out"]  # waiting for the 300 s child would hit the 20 s timeout
    assert v["stdout"]["head"] == "bye\n"
    assert _wait_dead(int(pidfile.read_text()))


# --- command through collect: the exec permission -------------------------------------------------

def _exec_rulebook(tmp_path: Path, marker: Path) -> Rulebook:
    prog = _exe(tmp_path / "touch-marker", f"echo ran > {marker}\necho hello\n")
    return Rulebook.model_validate({
        "policyrun": 1, "name": "t",
        "modes": {"audit": {"phases": ["P"]},
                  "run": {"phases": ["P"], "permissions": {"exec": True}}},
        "phases": [{"id": "P", "evidence": [{"id": "ran", "check": "facts.c.ok"}]}],
        "probes": {"c": {"uses": "command", "with": {"argv": [str(prog)]}}},
    })


def test_command_is_refused_without_the_exec_permission(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    fact = collect(_exec_rulebook(tmp_path, marker), "audit", {}, base_dir=tmp_path).facts["c"]
    assert fact.error is not None and fact.error.code == "refused.permission"
    assert "needs permission 'exec' (runs a program named by the rulebook)" in fact.error.message
    assert "mode 'audit' does not grant" in fact.error.message
    assert not marker.exists()  # the program never ran


def test_command_runs_when_the_mode_grants_exec(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    fact = collect(_exec_rulebook(tmp_path, marker), "run", {}, base_dir=tmp_path).facts["c"]
    assert fact.error is None and fact.value["ok"] and fact.value["stdout"]["head"] == "hello\n"
    assert marker.read_text() == "ran\n"
    assert fact.provenance.commands == [str(tmp_path / "touch-marker")]


def test_lint_knows_exec_and_types_command_facts(tmp_path: Path) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text("""\
policyrun: 1
name: preflight
modes:
  run: {phases: [P], permissions: {exec: true}}
probes:
  smi: {uses: command, with: {argv: [nvidia-smi, -L]}}
  e: {uses: env, with: {names: [HF_HOME]}}
  p: {uses: path, with: {paths: [/dev/shm]}}
  m: {uses: python.modules, with: {modules: [torch]}}
phases:
  - id: P
    evidence:
      - {id: a, check: "facts.smi.exit_code == 0 && !facts.smi.stdout.truncated"}
      - {id: b, check: "facts.smi.exit_cod == 0"}
      - {id: c, check: "facts.e.vars.HF_HOME.set && facts.p.paths['/dev/shm'].exists"}
      - {id: d, check: "facts.m.modules.torch.importable && facts.smi.timed_out == 'no'"}
      - {id: f, check: "facts.p.paths['/dev/shm'].sizes > 0"}
""")
    findings = findings_for(load_rulebook(rb))
    got = sorted((f.code, f.location.line) for f in findings if f.severity == "error")
    assert ("L019", 4) not in got  # `exec` is a known permission
    assert got == [("L028", 14), ("L028", 17), ("L029", 16)]
    by_line = {f.location.line: f.message for f in findings}
    assert "exit_code" in by_line[14] and "size" in by_line[17]


# --- env ------------------------------------------------------------------------------------------

def test_env_values_masks_and_missing(tmp_path: Path) -> None:
    env = {"HF_HOME": "/data/hf", "MODEL_PATH": "/models/Qwen2/Qwen2_5_7B_Instruct", "HF_TOKEN": "hf_abcdefghij0123456789",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI", "DB_PASSWORD": "hunter2", "EMPTY": "",
           "NOTES": "ghp_0123456789abcdefABCDEF", "MY_SESSION_ID": "abc"}
    v = _run(EnvProbe(), tmp_path, {"names": [*env, "UNSET_ONE"]}, env=env)
    assert v["vars"]["HF_HOME"] == {"set": True, "value": "/data/hf", "masked": False, "length": 8}
    assert v["vars"]["MODEL_PATH"]["value"] == env["MODEL_PATH"]  # a model directory stays readable
    assert v["vars"]["EMPTY"] == {"set": True, "value": "", "masked": False, "length": 0}
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_SESSION_ID", "NOTES"):
        assert v["vars"][name] == {"set": True, "value": None, "masked": True, "length": len(env[name])}, name
    assert v["vars"]["UNSET_ONE"] == {"set": False, "value": None, "masked": False, "length": None}
    assert v["missing"] == ["UNSET_ONE"]
    text = json.dumps(v)
    for secret in ("hf_abcdefghij0123456789", "wJalrXUtnFEMI", "hunter2", "ghp_0123456789abcdefABCDEF"):
        assert secret not in text


# Shapes of real credentials (made up, never issued): what the env probe once wrote in clear.
LEAKED = {
    "MYSQL_PWD": "hunter2hunter2", "DOCKER_PASS": "d0ckerPa55", "SENTRY_DSN": "https://f00dfeed@o1.ingest.sentry.io/42",
    "STRIPE": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "GOOGLE": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "PYPI": "pypi-AgEIcHlwaS5vcmc" + "CJDY2Y2E4ZTYtMzM0ZS00Y2Q3LWJkOTYtM2FiMzE3ZmM4NDRmAAIqWzMsIjRmZjU0YTQ0In0AAAYg",
    "NPM": "npm_" + "abcdefghijklmnopqrstuvwxyzABCDEF0123",
    "HOOK": "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
}


def test_env_masks_common_secrets_by_name_and_by_value(tmp_path: Path) -> None:
    env = {**LEAKED, "DATABASE_URL": "postgres://app:s3cr3t-pw@db.internal:5432/prod?sslmode=require",
           "PWD": "/home/ada/work", "MIRROR_URL": "https://pypi.example.com/simple"}
    v = _run(EnvProbe(), tmp_path, {"names": list(env)}, env=env)
    for name in LEAKED:
        assert v["vars"][name] == {"set": True, "value": None, "masked": True, "length": len(env[name])}, name
    # A password inside a URL: only the password is hidden.
    assert v["vars"]["DATABASE_URL"]["value"] == "postgres://app:***@db.internal:5432/prod?sslmode=require"
    assert v["vars"]["DATABASE_URL"]["masked"] is True
    assert v["vars"]["PWD"]["value"] == "/home/ada/work"  # the shell's directory, not a password
    assert v["vars"]["MIRROR_URL"] == {"set": True, "value": env["MIRROR_URL"], "masked": False, "length": 31}
    text = json.dumps(v)
    for secret in [*LEAKED.values(), "s3cr3t-pw"]:
        assert secret not in text


def test_command_output_never_shows_a_secret_the_environment_holds(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("DATABASE_URL", "postgres://app:s3cr3t-pw@db/prod")
    v = _run(CommandProbe(), tmp_path, {"argv": ["printenv", "HF_TOKEN", "DATABASE_URL"],
                                        "env_allow": ["PATH", "HF_TOKEN", "DATABASE_URL"]})
    assert v["stdout"]["head"] == "***\npostgres://app:***@db/prod\n" and v["stdout"]["bytes"] == len(token) + 1 + 33
    # Read from elsewhere (not inherited), printed to stderr, passed on argv: masked all the same.
    (tmp_path / "token.txt").write_text(f"token={token}\n")
    v = _run(CommandProbe(), tmp_path, {"argv": ["sh", "-c", f"cat {tmp_path / 'token.txt'} >&2; echo $0", token]})
    assert v["stderr"]["head"] == "token=***\n" and v["stdout"]["head"] == "***\n"
    assert v["argv"][-1] == "***" and token not in json.dumps(v)
    # A secret cut by the head or tail bound: the piece of it left is masked too.
    v = _run(CommandProbe(), tmp_path, {"argv": ["printenv", "HF_TOKEN"], "env_allow": ["PATH", "HF_TOKEN"],
                                        "head_bytes": 12, "tail_bytes": 12})
    assert v["stdout"]["head"] == "***" and v["stdout"]["tail"] == "***\n"
    # The secret passed with `env` (from an input, say) too.
    v = _run(CommandProbe(), tmp_path, {"argv": ["printenv", "API_PASSWORD"], "env": {"API_PASSWORD": "opensesame"}})
    assert v["stdout"]["head"] == "***\n"


def test_env_unmask_and_custom_pattern(tmp_path: Path) -> None:
    env = {"SSH_AUTH_SOCK": "/run/agent.sock", "HF_HOME": "/data/hf", "API_KEY": "k"}
    v = _run(EnvProbe(), tmp_path, {"names": list(env), "unmask": ["SSH_AUTH_SOCK"]}, env=env)
    assert v["vars"]["SSH_AUTH_SOCK"]["value"] == "/run/agent.sock" and v["vars"]["API_KEY"]["masked"]
    v = _run(EnvProbe(), tmp_path, {"names": list(env), "mask_pattern": "^HF_"}, env=env)
    assert [n for n, e in v["vars"].items() if e["masked"]] == ["HF_HOME"]
    err = _error(EnvProbe(), tmp_path, {"names": ["A"], "mask_pattern": "(?=x)"})
    assert err.code == "env.bad_pattern" and "mask_pattern" in err.message


def test_env_reads_policyruns_own_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICYRUN_TEST_VAR", "from-os")
    monkeypatch.delenv("POLICYRUN_TEST_ABSENT", raising=False)
    v = _run(EnvProbe(), tmp_path, {"names": ["POLICYRUN_TEST_VAR", "POLICYRUN_TEST_ABSENT"]})
    assert v["vars"]["POLICYRUN_TEST_VAR"]["value"] == "from-os" and v["missing"] == ["POLICYRUN_TEST_ABSENT"]


# --- path -----------------------------------------------------------------------------------------

def test_path_types_and_metadata(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"12345")
    os.utime(tmp_path / "f.txt", (0, 1_700_000_000))
    (tmp_path / "f.txt").chmod(0o640)
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")  # opening it would block: the probe never does
    (tmp_path / "link").symlink_to("f.txt")
    (tmp_path / "dangling").symlink_to("nowhere")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        v = _run(PathProbe(), tmp_path, {"paths": ["f.txt", "d", "fifo", "link", "dangling", "sock", "none",
                                                   "/dev/null", "f.txt/below"]}, timeout=10)
    finally:
        sock.close()
    p = v["paths"]
    assert p["f.txt"] == {"path": str(tmp_path / "f.txt"), "exists": True, "type": "file", "size": 5,
                          "mtime": "2023-11-14T22:13:20Z", "mode": "0640", "readable": True,
                          "writable": True, "is_symlink": False, "target": None, "escapes_root": False,
                          "entries": None, "truncated": False, "error": None}
    assert {k: p[k]["type"] for k in p} == {"f.txt": "file", "d": "dir", "fifo": "fifo", "link": "symlink",
                                            "dangling": "symlink", "sock": "socket", "none": None,
                                            "/dev/null": "char_device", "f.txt/below": None}
    assert p["link"]["target"] == "f.txt" and p["link"]["is_symlink"] and p["link"]["readable"] is None
    assert v["missing"] == ["none", "f.txt/below"] and v["root"] is None


def test_path_follow_symlinks(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"12345")
    (tmp_path / "link").symlink_to("f.txt")
    (tmp_path / "dangling").symlink_to("nowhere")
    v = _run(PathProbe(), tmp_path, {"paths": ["link", "dangling"], "follow_symlinks": True})
    link, dangling = v["paths"]["link"], v["paths"]["dangling"]
    assert (link["type"], link["size"], link["is_symlink"], link["target"], link["readable"]) == \
           ("file", 5, True, "f.txt", True)
    assert (dangling["exists"], dangling["type"], dangling["is_symlink"], dangling["target"]) == \
           (False, None, True, "nowhere")
    assert v["missing"] == ["dangling"]


def test_path_access_bits(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.write_text("x")
    locked.chmod(0)
    v = _run(PathProbe(), tmp_path, {"paths": ["locked"]})
    root = os.geteuid() == 0  # root may read anything; access(2) says so
    assert (v["paths"]["locked"]["readable"], v["paths"]["locked"]["mode"]) == (root, "0000")


def test_path_root_containment(tmp_path: Path) -> None:
    inside = tmp_path / "tree"
    (inside / "sub").mkdir(parents=True)
    (inside / "sub" / "ok.txt").write_text("x")
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("top secret")
    (inside / "out").symlink_to(secret)
    (inside / "outdir").symlink_to(secret.parent)
    (inside / "in").symlink_to("sub/ok.txt")
    params = {"root": "tree", "paths": ["tree/sub/ok.txt", "tree/out", "tree/outdir/secret.txt", "tree/in"],
              "follow_symlinks": True}
    v = _run(PathProbe(), tmp_path, params)
    p = v["paths"]
    assert v["root"] == str(inside)
    assert p["tree/sub/ok.txt"]["type"] == "file"
    assert p["tree/in"]["type"] == "file" and not p["tree/in"]["escapes_root"]
    # A link out of the root is reported, never followed: nothing about the target is known.
    assert (p["tree/out"]["escapes_root"], p["tree/out"]["exists"], p["tree/out"]["size"]) == (True, None, None)
    assert p["tree/out"]["target"] == str(secret)
    assert (p["tree/outdir/secret.txt"]["escapes_root"], p["tree/outdir/secret.txt"]["exists"]) == (True, None)
    assert v["missing"] == []
    v = _run(PathProbe(), tmp_path, {"root": "tree", "paths": ["tree", "tree/sub"]})
    assert [(e["type"], e["escapes_root"]) for e in v["paths"].values()] == [("dir", False), ("dir", False)]
    err = _error(PathProbe(), tmp_path, {"root": "tree", "paths": ["tree/../outside/secret.txt"]})
    assert err.code == "path.outside_root" and "tree/../outside/secret.txt" in err.message
    err = _error(PathProbe(), tmp_path, {"root": "nope", "paths": ["x"]})
    assert err.code == "path.bad_root"


def test_path_listing(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "sub" / "deep").mkdir(parents=True)
    for name in ("config.json", "model-00001.safetensors", "model-00002.safetensors", "README.md",
                 "sub/config.json", "sub/deep/config.json"):
        (model / name).write_text("{}")
    os.symlink(tmp_path, model / "loop")  # a link to a directory is listed, never entered
    (model / os.fsdecode(b"bad\xffname.json")).write_text("")
    v = _run(PathProbe(), tmp_path, {"paths": ["model", "model/config.json"], "list": ["*.json", "*.safetensors"]})
    assert v["paths"]["model"]["entries"] == ["bad\\xffname.json", "config.json", "model-00001.safetensors",
                                              "model-00002.safetensors"]
    assert v["paths"]["model"]["truncated"] is False
    assert v["paths"]["model/config.json"]["entries"] is None  # not a directory
    v = _run(PathProbe(), tmp_path, {"paths": ["model"], "list": ["**/config.json", "loop*"]})
    assert v["paths"]["model"]["entries"] == ["config.json", "loop", "sub/config.json", "sub/deep/config.json"]
    v = _run(PathProbe(), tmp_path, {"paths": ["model"], "list": ["*"], "max_entries": 2})
    assert v["paths"]["model"]["truncated"] is True and len(v["paths"]["model"]["entries"]) == 2
    err = _error(PathProbe(), tmp_path, {"paths": ["model"], "list": ["[z-a]"]})
    assert err.code == "path.bad_glob"


def test_path_never_opens_what_it_describes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    opened: list[Any] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    _run(PathProbe(), tmp_path, {"paths": ["f", "fifo", "."], "list": ["*"]})
    assert [a for a in opened if "fifo" in str(a[0]) or str(a[0]).endswith("/f")] == []


# --- python.modules -------------------------------------------------------------------------------

SITE = {
    "goodmod/__init__.py": "print('banner on stdout at import')\n__version__ = '0.0.0-from-attr'\n",
    "goodmod-1.2.3.dist-info/METADATA": "Metadata-Version: 2.1\nName: goodmod\nVersion: 1.2.3\n",
    "goodmod-1.2.3.dist-info/RECORD": "goodmod/__init__.py,,\n",
    "goodmod-1.2.3.dist-info/top_level.txt": "goodmod\n",
    "attrversion.py": "__version__ = '4.5'\n",
    "brokenmod.py": "import policyrun_missing_dependency_xyz\n",
    "libfail.py": "raise OSError('libcudnn.so.9: cannot open shared object file')\n",
    "exitmod.py": "import sys\nsys.exit(3)\n",
    "sigmod.py": "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_DFL)\n",
    "cudaenv.py": "import os\nSEEN = os.environ.get('CUDA_VISIBLE_DEVICES')\nprint('cuda', SEEN)\n"
                  "if SEEN != '': raise RuntimeError('GPU visible: ' + repr(SEEN))\n",
    "hangmod.py": "import time\ntime.sleep(300)\n",
    "threadmod.py": "import threading, time\nthreading.Thread(target=time.sleep, args=(300,)).start()\n",
    "torch/__init__.py": "__version__ = '2.7.1+cu128'\n",
    "vllm/__init__.py": "__version__ = '0.27.0'\n",
    "flash_attn/__init__.py": "__version__ = '2.8.0'\n",
}


@pytest.fixture(scope="module")
def site_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("modsite")
    for rel, text in SITE.items():
        (base / "site" / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / "site" / rel).write_text(text)
    return stack_site.make_venv(base / "venv", base / "site", with_pip=False)


def test_modules_script_is_python39_syntax_and_stdlib_only() -> None:
    import ast

    tree = ast.parse(modules_script(), feature_version=(3, 9))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def _python39() -> str | None:
    import shutil
    import subprocess

    for candidate in (shutil.which("python3.9"), "/root/.pyenv/versions/3.9.18/bin/python3.9"):
        if candidate and os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(_python39() is None, reason="no Python 3.9 interpreter here")
def test_modules_on_python39(tmp_path: Path) -> None:
    v = _run(PythonModulesProbe(), tmp_path, {"python": _python39() or "", "modules": ["json", "nope_mod"]})
    assert v["python_version"].startswith("3.9.") and v["missing"] == ["nope_mod"]
    assert v["modules"]["json"]["location"].endswith("/python3.9/json/__init__.py")


def test_modules_in_the_running_interpreter(tmp_path: Path) -> None:
    import yaml

    v = _run(PythonModulesProbe(), tmp_path, {"modules": ["yaml", "json", "policyrun_no_such_module"]})
    assert v["python"] == sys.executable and v["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert v["modules"]["yaml"] == {"importable": True, "version": importlib.metadata.version("PyYAML"),
                                    "distribution": "PyYAML", "location": yaml.__file__, "error": None,
                                    "error_type": None}
    assert v["modules"]["json"]["location"] == json.__file__
    assert v["modules"]["json"]["distribution"] is None  # stdlib: __version__ if any
    assert v["modules"]["policyrun_no_such_module"] == {
        "importable": False, "version": None, "distribution": None, "location": None,
        "error": "ModuleNotFoundError: No module named 'policyrun_no_such_module'", "error_type": "ModuleNotFoundError"}
    assert v["missing"] == ["policyrun_no_such_module"]
    assert list(v["modules"]) == ["yaml", "json", "policyrun_no_such_module"]


def test_modules_findings_in_a_target_venv(tmp_path: Path, site_python: Path) -> None:
    names = ["goodmod", "attrversion", "brokenmod", "libfail", "exitmod", "sigmod", "cudaenv"]
    v = _run(PythonModulesProbe(), tmp_path, {"python": str(site_python), "modules": names},
             env={"CUDA_VISIBLE_DEVICES": "0"})
    m = v["modules"]
    assert v["python"] == str(site_python)
    assert (m["goodmod"]["version"], m["goodmod"]["distribution"]) == ("1.2.3", "goodmod")
    assert m["goodmod"]["location"].endswith("/site/goodmod/__init__.py")
    assert (m["attrversion"]["version"], m["attrversion"]["distribution"]) == ("4.5", None)
    assert m["brokenmod"]["error"] == "ModuleNotFoundError: No module named 'policyrun_missing_dependency_xyz'"
    assert m["libfail"]["error"] == "OSError: libcudnn.so.9: cannot open shared object file"
    assert (m["exitmod"]["error_type"], m["exitmod"]["error"]) == ("SystemExit", "SystemExit: 3")
    assert m["sigmod"]["importable"] is True  # imported in the main thread
    assert m["cudaenv"]["importable"] is True  # CUDA_VISIBLE_DEVICES was "" in the child
    assert v["missing"] == ["brokenmod", "libfail", "exitmod"]


def test_modules_gpu_visible_passes_cuda_devices(tmp_path: Path, site_python: Path) -> None:
    v = _run(PythonModulesProbe(), tmp_path, {"python": str(site_python), "modules": ["cudaenv"],
                                              "gpu_visible": True}, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert v["modules"]["cudaenv"]["error"] == "RuntimeError: GPU visible: '0'" and v["gpu_visible"] is True


def test_modules_hanging_import_is_reported_per_module(tmp_path: Path, site_python: Path) -> None:
    t0 = time.monotonic()
    v = _run(PythonModulesProbe(), tmp_path, {"python": str(site_python), "timeout_s": 4,
                                              "modules": ["goodmod", "hangmod", "attrversion"]})
    assert time.monotonic() - t0 < 120  # the hanging import never ends by itself
    m = v["modules"]
    assert m["goodmod"]["importable"] is True
    assert m["hangmod"]["error_type"] == "TimeoutError" and "did not finish within" in m["hangmod"]["error"]
    assert m["attrversion"]["error"] == "TimeoutError: not attempted: the import of 'hangmod' did not finish"
    assert v["missing"] == ["hangmod", "attrversion"]


def test_modules_threads_left_by_an_import_do_not_hold_the_child(tmp_path: Path, site_python: Path) -> None:
    t0 = time.monotonic()
    v = _run(PythonModulesProbe(), tmp_path, {"python": str(site_python), "modules": ["threadmod"]})
    assert v["modules"]["threadmod"]["importable"]  # a held child would end in the probe's timeout error


def test_modules_are_not_imported_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shadow_mod_policyrun.py").write_text("raise SystemExit('imported from the audited tree')\n")
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed json')\n")
    monkeypatch.chdir(tmp_path)
    v = _run(PythonModulesProbe(), tmp_path, {"modules": ["shadow_mod_policyrun", "json"]},
             env={"PYTHONPATH": str(tmp_path)})
    assert v["modules"]["shadow_mod_policyrun"]["error_type"] == "ModuleNotFoundError"
    assert v["modules"]["json"]["importable"] and v["modules"]["json"]["location"] == json.__file__


def test_modules_interpreter_errors(tmp_path: Path) -> None:
    err = _error(PythonModulesProbe(), tmp_path, {"python": "./nope/python", "modules": ["json"]})
    assert err.code == "python.not_found"
    fake = _exe(tmp_path / "fakepy", "echo 'not json'; echo boom >&2; exit 1\n")
    err = _error(PythonModulesProbe(), tmp_path, {"python": str(fake), "modules": ["json"]})
    assert err.code == "python.script_failed" and "boom" in err.message and "exit 1" in err.message
    liar = _exe(tmp_path / "liarpy", """echo '{"python_version": "3.11.0", "modules": {"json": "yes"}}'\n""")
    err = _error(PythonModulesProbe(), tmp_path, {"python": str(liar), "modules": ["json"]})
    assert err.code == "python.script_failed"
    deep = _exe(tmp_path / "deeppy", f"exec {sys.executable} -c \"print('[' * 200000)\"\n")  # too deep for json
    err = _error(PythonModulesProbe(), tmp_path, {"python": str(deep), "modules": ["json"]})
    assert err.code == "python.script_failed"
    slow = _exe(tmp_path / "slowpy", "exec sleep 300\n")
    err = _error(PythonModulesProbe(), tmp_path, {"python": str(slow), "modules": ["json"], "timeout_s": 1})
    assert err.code == "python.timeout"


def test_modules_gpu_visible_is_refused_without_gpu_context(tmp_path: Path) -> None:
    rb = Rulebook.model_validate({
        "policyrun": 1, "name": "t", "modes": {"m": {"phases": ["P"]}}, "phases": [{"id": "P"}],
        "probes": {"plain": {"uses": "python.modules", "with": {"modules": ["json"]}},
                   "gpu": {"uses": "python.modules", "with": {"modules": ["json"], "gpu_visible": True}}},
    })
    facts = collect(rb, "m", {}, base_dir=tmp_path).facts
    assert facts["plain"].error is None and facts["plain"].value["modules"]["json"]["importable"]
    assert facts["gpu"].error is not None and facts["gpu"].error.code == "refused.permission"
    assert "gpu_context" in facts["gpu"].error.message


def test_signal_names() -> None:
    from policyrun.probes.host.command import _signal_name

    assert _signal_name(int(signal.SIGKILL)) == "SIGKILL" and _signal_name(250) == "signal 250"


# --- the documented example -----------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "probes-host.md"


def test_documented_preflight_rulebook_runs(tmp_path: Path, site_python: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    rulebook = tmp_path / "preflight.yaml"
    rulebook.write_text(re.search(r"```yaml\n(.*?)```", DOCS.read_text(), re.S).group(1))  # type: ignore[union-attr]
    assert [f for f in findings_for(load_rulebook(rulebook)) if f.severity == "error"] == []
    _exe(tmp_path / "bin" / "nvidia-smi", "printf 'NVIDIA H200, 0 MiB\\nNVIDIA H200, 0 MiB\\n'\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model-00001.safetensors").write_text("")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)
    monkeypatch.chdir(tmp_path)
    args = ["evaluate", str(rulebook), "--set", f"model_dir={model}", "--set", f"python={site_python}", "-q"]
    assert main([*args, "--mode", "preflight", "--out", str(tmp_path / "pf")]) == 0
    trace = json.loads((tmp_path / "pf" / "trace.json").read_text())
    assert [(p["phase"], p["status"]) for p in trace["phases"]] == [("HOST", "PASS"), ("GPU", "PASS")]
    assert "hf_xxx" not in (tmp_path / "pf" / "trace.json").read_text()
    _exe(tmp_path / "bin" / "nvidia-smi", "printf 'NVIDIA H200, 70000 MiB\\n'\n")
    assert main([*args, "--mode", "preflight", "--out", str(tmp_path / "busy")]) == 1
    trace = json.loads((tmp_path / "busy" / "trace.json").read_text())
    assert [(p["phase"], p["status"]) for p in trace["phases"]] == [("HOST", "PASS"), ("GPU", "FAIL")]
