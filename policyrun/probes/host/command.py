"""`command`: run a program named by the rulebook, and keep what it did as a fact.

`command` declares the side effect `exec` (a program named by the rulebook runs, with whatever
effects it has), so a mode must grant it. It never goes through a shell: `argv` is a list. The
program starts in a fresh empty directory (unless `cwd` is given) with an allow-listed
environment, in its own process group; at the deadline the whole group is killed. Its output is
kept as a head and a tail with byte counts, so a program printing gigabytes costs the caps, not
the output: `bounded.run_child` keeps all of stdout (and raises on a cap or a timeout, losing
what was printed), which is right for a script policyrun parses and wrong for a program whose
partial output is the evidence. A timed-out command is a fact (`timed_out: true`, what it
printed until then), not an error: "did not answer within 10 s" is what a check may be about.

Every secret of policyrun's environment is masked wherever the command's argv or output shows it.
`env` (host/env.py) and `path` (host/path.py), the other kinds for policy authors once beside
this one, read without running anything and share none of its machinery.
"""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policyrun import masking
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import exited, kill_group

# What a command inherits from policyrun's environment unless `env_allow` says otherwise: enough
# to find programs and behave as on the command line, nothing that carries credentials.
DEFAULT_ENV_ALLOW = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR")
# Named groups for `env_allow` (`@tls`, `@proxy`, `@default`): network tools that cannot see the
# site's CA bundle or proxy fail, and a rulebook author should not have to know every tool's name
# for them. Proxy URLs may carry credentials: policyrun masks those wherever output shows them.
ENV_PRESETS: dict[str, tuple[str, ...]] = {
    "default": DEFAULT_ENV_ALLOW,
    "tls": ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
            "UV_NATIVE_TLS", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "AWS_CA_BUNDLE"),
    "proxy": ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
              "all_proxy"),
}
# How much of stderr's tail a failed command's error message quotes.
ERROR_STDERR_CHARS = 1000
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 3600.0
DEFAULT_CAPTURE = 4096
MAX_CAPTURE = 1 << 20
MAX_STDIN = 1 << 20
_CHUNK = 1 << 16
_NO_NUL = "^[^\\x00]*$"

_STREAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "head": {"type": "string", "description": "The first head_bytes bytes, decoded as UTF-8 (invalid bytes "
                                                  "become U+FFFD)."},
        "tail": {"type": "string", "description": "The last tail_bytes bytes, decoded the same way. For output "
                                                  "no longer than a cap, head or tail is the whole output."},
        "bytes": {"type": "integer", "description": "Bytes the program wrote in all."},
        "truncated": {"type": "boolean", "description": "Some bytes are in neither head nor tail."},
    },
}

_COMMAND_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "argv": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1, "pattern": _NO_NUL},
                 "description": "Program and arguments; never run through a shell. A program name without `/` is "
                                "looked up on the command's PATH; a relative path resolves against the working "
                                "directory policyrun runs in."},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S, "default": DEFAULT_TIMEOUT_S,
                      "description": "Kill the command (and everything it started) after this many seconds; also "
                                     "bounded by the probe's own timeout_s."},
        "cwd": {"type": "string", "description": "Existing directory to run in (relative to the working directory). "
                                                 "Default: a fresh empty temporary directory."},
        "env": {"type": "object", "additionalProperties": {"type": "string", "pattern": _NO_NUL},
                "propertyNames": {"pattern": "^[^=\\x00]+$"},
                "description": "Variables to set (over the inherited ones)."},
        "env_allow": {"type": "array",
                      "items": {"type": "string", "minLength": 1,
                                "pattern": "^(@(" + "|".join(ENV_PRESETS) + ")|[^@=\\x00][^=\\x00]*)$"},
                      "description": "Names inherited from policyrun's environment; `PREFIX*` matches a prefix; "
                                     "`@tls` (CA bundle variables), `@proxy` (proxy variables, both cases) and "
                                     "`@default` name groups. "
                                     f"Default: {', '.join(DEFAULT_ENV_ALLOW)}. Giving it replaces the default."},
        "stdin": {"type": "string", "maxLength": MAX_STDIN, "description": "Text written to the command's stdin "
                                                                          "(default: none, stdin is /dev/null)."},
        "head_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_CAPTURE, "default": DEFAULT_CAPTURE,
                       "description": "Bytes kept from the start of stdout and of stderr."},
        "tail_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_CAPTURE, "default": DEFAULT_CAPTURE,
                       "description": "Bytes kept from the end of stdout and of stderr."},
        "ok_exit_codes": {"type": "array", "items": {"type": "integer"}, "minItems": 1,
                          "description": "Exit codes that make `ok` true. Listing them keeps every run as a fact "
                                         "(`ok` says how it ended); without them, a run that does not exit 0 (an "
                                         "exit code, a signal, a timeout) fails the fact."},
        "network": {"type": "boolean", "default": False,
                    "description": "The program reaches the network: the probe then needs the side effect "
                                   "`network` too, which its mode must grant."},
    },
    "required": ["argv"],
    "additionalProperties": False,
}

_COMMAND_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "argv": {"type": "array", "items": {"type": "string"}},
        "executable": {"type": "string", "description": "The program that ran (absolute path)."},
        "cwd": {"type": ["string", "null"], "description": "The directory given, or null for a fresh temporary one."},
        "env_names": {"type": "array", "items": {"type": "string"},
                      "description": "Names of the variables the command received (values not recorded)."},
        "exit_code": {"type": ["integer", "null"], "description": "null when a signal ended it (a timeout too)."},
        "signal": {"type": ["string", "null"], "description": "Signal that ended it, e.g. SIGKILL, SIGSEGV."},
        "ok": {"type": "boolean", "description": "Finished in time with an exit code in ok_exit_codes."},
        "timed_out": {"type": "boolean"},
        "timeout_s": {"type": "number", "description": "The deadline it ran under."},
        "duration_s": {"type": "number"},
        "stdout": _STREAM_SCHEMA,
        "stderr": _STREAM_SCHEMA,
    },
}


class _Capture:
    """A stream kept as its first `head_cap` and last `tail_cap` bytes, with its length."""

    def __init__(self, head_cap: int, tail_cap: int) -> None:
        self.head_cap, self.tail_cap = head_cap, tail_cap
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.head_cap:
            self.head += data[: self.head_cap - len(self.head)]
        if self.tail_cap:
            self.tail += data
            if len(self.tail) > self.tail_cap + _CHUNK:  # trim in steps, not on every read
                del self.tail[: len(self.tail) - self.tail_cap]

    def value(self, secrets: Sequence[str] = ()) -> dict[str, Any]:
        """Head and tail as text, every secret in `secrets` masked (a piece of one at a cut too)."""
        tail = bytes(self.tail[-self.tail_cap:]) if self.tail_cap else b""
        head_cut, tail_cut = self.total > len(self.head), self.total > len(tail)
        return {"head": masking.redact(_decode(bytes(self.head), cut_end=head_cut), secrets, cut_end=head_cut),
                "tail": masking.redact(_decode(tail, cut_start=tail_cut), secrets, cut_start=tail_cut),
                "bytes": self.total, "truncated": self.total > self.head_cap + self.tail_cap}


def _decode(data: bytes, *, cut_start: bool = False, cut_end: bool = False) -> str:
    """UTF-8 with U+FFFD for invalid bytes; a character split by a cut is dropped, not replaced."""
    if cut_start:
        skip = 0
        while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
            skip += 1
        data = data[skip:]
    if cut_end:
        for back in range(1, min(4, len(data)) + 1):
            lead = data[-back]
            if lead < 0x80:
                break
            if 0xC2 <= lead <= 0xF4:  # the start of the last character: drop it if it is incomplete
                need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
                if back < need:
                    data = data[:-back]
                break
            if lead > 0xBF:  # not UTF-8 at all: left for the decoder to replace
                break
    return data.decode("utf-8", "replace")


def _allowed(name: str, allow: Sequence[str]) -> bool:
    return any(name.startswith(a[:-1]) if a.endswith("*") else name == a for a in allow)


def _expand_presets(allow: Sequence[str]) -> list[str]:
    return [name for a in allow for name in (ENV_PRESETS[a[1:]] if a.startswith("@") else (a,))]


def _command_env(params: Mapping[str, Any], ctx: ProbeContext) -> dict[str, str]:
    inherited = {**os.environ, **ctx.env}
    allow = _expand_presets(list(params.get("env_allow", DEFAULT_ENV_ALLOW)))
    env = {k: v for k, v in inherited.items() if _allowed(k, allow)}
    env.update({str(k): str(v) for k, v in (params.get("env") or {}).items()})
    return env


def _executable(program: str, env: Mapping[str, str], ctx: ProbeContext) -> str:
    if "/" in program:
        path = ctx.resolve(program)
        if not path.exists():
            raise ProbeError("command.not_found", f"program {str(path)!r} does not exist; fix argv[0]")
    else:
        search = env.get("PATH", os.defpath)
        found = shutil.which(program, path=search)
        if found is None:
            raise ProbeError("command.not_found", f"program {program!r} is not on the command's PATH ({search}); "
                             "give its full path in argv[0], or pass PATH with `env` or `env_allow`")
        path = Path(found)
    path = Path(os.path.abspath(path))
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ProbeError("command.not_executable", f"{str(path)!r} is not an executable file; fix argv[0]")
    return str(path)


def _effective_timeout(requested: float, budget: float) -> float:
    # Finish (and kill the group) before collect abandons the probe at its own timeout_s, so the
    # fact is a timed-out command rather than `probe.timeout` with a process still running.
    return max(min(requested, budget - min(1.0, budget * 0.1)), 0.001)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _pump(proc: subprocess.Popen[bytes], stdin: bytes, deadline: float,
          captures: Mapping[int, _Capture]) -> bool:
    """Feed stdin and read both pipes until they close; False when the deadline passed first."""
    sel = selectors.DefaultSelector()
    with sel:
        for fd in captures:
            sel.register(fd, selectors.EVENT_READ)
        view, offset = memoryview(stdin), 0
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        grace: float | None = None  # once the program has exited: how long its pipes may stay open
        while sel.get_map():
            now = time.monotonic()
            if grace is not None and now > grace:
                break  # a process that left the group holds the pipes; what the program wrote is read
            if deadline - now <= 0:
                return False
            events = sel.select(min(deadline - now, 0.2))
            if not events and grace is None and exited(proc):
                kill_group(proc.pid)  # the program is gone; something it started still holds the pipes
                grace = time.monotonic() + 1.0
            for key, _ in events:
                fd = int(key.fd)
                if fd in captures:
                    data = os.read(fd, _CHUNK)
                    if data:
                        captures[fd].feed(data)
                    else:
                        sel.unregister(fd)
                    continue
                try:
                    offset += os.write(fd, view[offset:offset + _CHUNK])
                except BlockingIOError:
                    continue
                except BrokenPipeError:  # the program stopped reading: its business
                    offset = len(view)
                if offset >= len(view):
                    sel.unregister(fd)
                    assert proc.stdin is not None
                    proc.stdin.close()
    return True


def _run_captured(exe: str, argv: list[str], *, cwd: str, env: Mapping[str, str], stdin: bytes | None,
                  timeout_s: float, out: _Capture, err: _Capture) -> tuple[int, bool]:
    """(returncode, timed_out); the process group is always killed before returning."""
    deadline = time.monotonic() + timeout_s
    proc = subprocess.Popen(argv, executable=exe, cwd=cwd, env=dict(env), start_new_session=True,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        finished = _pump(proc, stdin or b"", deadline, {proc.stdout.fileno(): out, proc.stderr.fileno(): err})
        if finished:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                finished = False
    finally:
        kill_group(proc.pid)  # at the deadline, and whatever the program left running in its group
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return proc.returncode, not finished


class CommandProbe:
    kind = "command"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = ("Run a program (argv list, no shell) in an empty directory with an allow-listed environment: exit code, "
               "signal, timeout, head and tail of stdout and stderr; a run that does not exit 0 fails the fact unless "
               "ok_exit_codes is listed. Side effect exec (and network, with network: true).")
    params_schema: Mapping[str, Any] = _COMMAND_PARAMS
    fact_schema: Mapping[str, Any] = _COMMAND_FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"exec", "network"}) if params.get("network") else frozenset({"exec"})

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        argv = [str(a) for a in params["argv"]]
        env = _command_env(params, ctx)
        exe = _executable(argv[0], env, ctx)
        # Every secret policyrun's environment holds (not only what the command inherits: it may
        # read the same token from a file) and every secret `env` passes, wherever the fact would
        # show it: argv (an input bound from the environment), stdout and stderr.
        secrets = masking.secret_fragments({**os.environ, **ctx.env, **{str(k): str(v) for k, v in
                                                                        (params.get("env") or {}).items()}})
        shown_argv = [masking.redact(a, secrets) for a in argv]
        commands = [shlex.join(shown_argv)]
        cwd_param = params.get("cwd")
        cwd = ctx.resolve(str(cwd_param)) if cwd_param is not None else None
        if cwd is not None and not cwd.is_dir():
            raise ProbeError("command.bad_cwd", f"cwd {str(cwd)!r} is not an existing directory; fix the probe's "
                             "`cwd` parameter (or leave it out to run in an empty temporary directory)")
        timeout = _effective_timeout(float(params.get("timeout_s", DEFAULT_TIMEOUT_S)), ctx.timeout_s)
        stdin = params.get("stdin")
        out = _Capture(int(params.get("head_bytes", DEFAULT_CAPTURE)), int(params.get("tail_bytes", DEFAULT_CAPTURE)))
        err = _Capture(out.head_cap, out.tail_cap)
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="policyrun-command-") as empty:
            try:
                code, timed_out = _run_captured(exe, argv, cwd=str(cwd or empty), env=env,
                                                stdin=None if stdin is None else str(stdin).encode("utf-8"),
                                                timeout_s=timeout, out=out, err=err)
            except OSError as exc:
                raise ProbeError("command.start_failed", f"cannot start {exe!r}: {exc.strerror or exc}",
                                 commands=commands) from None
        duration = time.monotonic() - t0
        exit_code = code if code >= 0 else None
        ok_codes = list(params.get("ok_exit_codes") or [0])
        value = {"argv": shown_argv, "executable": exe, "cwd": str(cwd) if cwd is not None else None,
                 "env_names": sorted(env), "exit_code": exit_code,
                 "signal": _signal_name(-code) if code < 0 else None,
                 "ok": not timed_out and exit_code in ok_codes, "timed_out": timed_out,
                 "timeout_s": round(timeout, 3), "duration_s": round(duration, 3),
                 "stdout": out.value(secrets), "stderr": err.value(secrets)}
        if not value["ok"] and "ok_exit_codes" not in params:
            raise _failed_run(value, commands)
        return ProbeResult(value=value, commands=commands)


def _failed_run(value: Mapping[str, Any], commands: list[str]) -> ProbeError:
    """Fail closed: a run that did not exit 0 is no fact (its stdout is not the answer a check
    expects, and parsing it gave "nothing outdated" for a tool that could not reach its index).
    The message keeps what a person needs: how it ended and what it said on stderr."""
    if value["timed_out"]:
        code, how = "command.timed_out", f"did not finish within {value['timeout_s']} s"
    elif value["exit_code"] is None:
        code, how = "command.signal", f"was ended by {value['signal']}"
    else:
        code, how = "command.exit_status", f"exited {value['exit_code']}"
    tail = value["stderr"]["tail"].strip()
    if len(tail) > ERROR_STDERR_CHARS:
        tail = "..." + tail[-ERROR_STDERR_CHARS:]
    said = f"; stderr ends: {tail}" if tail else "; stderr is empty"
    return ProbeError(code, f"{commands[0]} {how}{said} (list `ok_exit_codes` in the probe to keep a failing "
                            "run as a fact)", commands=commands)

PROBES = [CommandProbe()]
