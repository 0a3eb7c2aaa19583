"""`python.record`: whether an installed distribution is the build of a source tree at a revision.

A version string proves nothing: a stub package named `vllm` can claim `0.27.0`. This probe ties
the installed package to its sources. In the target interpreter (isolated, as `python.stack`
runs it, and without importing the package) it reads the distribution's RECORD and, for every
Python file RECORD lists, hashes the installed bytes: their sha256 must be RECORD's (nothing was
edited after install), and their git blob id must be the blob at the same path in the source
repository at `rev` (read with `git ls-tree`; nothing is checked out). Compiled extensions have no
counterpart in the source tree and are not compared here (`python.stack` records their sha256).

The fact: the counts, the paths that differ (cut at 50 per list), `matches` (at least
`min_files` files compared and none differing; files the build generates, named by `generated`
globs, are listed apart when the source lacks them), and the wheel's provenance as the installer
recorded it (`INSTALLER`, `direct_url.json`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import ChildOutputTooLarge, ChildTimeout, child_env, run_child
from policyrun.probes._kit.gitclient import open_root, resolve_commits, rev_param
from policyrun.probes._kit.paths import glob_regex
from policyrun.probes.python.session import script_label, script_text
from policyrun.probes.python.stack import ISOLATED, MAX_RESULT_BYTES, _resolve_python, _tail

LISTED = 50  # paths kept per list: enough to act on, bounded for the trace

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "python": {"type": "string", "description": "Interpreter whose installed distribution is checked (a path "
                                                    "or a name on PATH). Default: the interpreter running policyrun."},
        "distribution": {"type": "string", "minLength": 1, "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                         "description": "The distribution's name, e.g. vllm."},
        "source": {"type": "string", "minLength": 1,
                   "description": "The source repository (a directory inside it) the build should come from."},
        "rev": rev_param("The revision of `source` the build should be, e.g. the target tag."),
        "prefix": {"type": "string", "default": "", "pattern": r"^([^/].*/)?$",
                   "description": "Where the installed paths lie in the source tree (`src/` for a src layout); "
                                  "default: at its root."},
        "generated": {"type": "array", "items": {"type": "string", "minLength": 1}, "default": [],
                      "description": "Globs (.gitignore rules) of installed files the build generates, e.g. "
                                     "vllm/_version.py: when the source tree lacks one it is listed in `generated`, "
                                     "not in `not_in_source`; one the source has is compared as any other."},
        "min_files": {"type": "integer", "minimum": 1, "default": 1,
                      "description": "Fewer Python files compared than this is no match (a stub has few)."},
    },
    "required": ["distribution", "source", "rev"],
    "additionalProperties": False,
}

_PATHS = {"type": "array", "items": {"type": "string"}}
_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "python": {"type": "string"}, "python_version": {"type": "string"},
        "installed": {"type": "boolean", "description": "Whether the interpreter has the distribution at all."},
        "distribution": {"type": ["string", "null"]}, "version": {"type": ["string", "null"]},
        "rev": {"type": "string"}, "commit": {"type": "string", "description": "The commit `rev` resolved to."},
        "record_files": {"type": "integer", "description": "Entries in RECORD."},
        "compared": {"type": "integer", "description": "Python files compared with the source tree."},
        "matched": {"type": "integer"},
        "differ": {**_PATHS, "description": "Installed bytes differ from the source at rev."},
        "differ_count": {"type": "integer"},
        "not_in_source": {**_PATHS, "description": "Installed files the source tree at rev does not have."},
        "not_in_source_count": {"type": "integer"},
        "generated": {**_PATHS, "description": "Installed files the source lacks that match `generated` (not "
                                               "compared, allowed)."},
        "generated_count": {"type": "integer"},
        "record_mismatch": {**_PATHS, "description": "Installed bytes differ from RECORD's hash (edited after "
                                                     "install), unreadable, or unhashed in RECORD."},
        "record_mismatch_count": {"type": "integer"},
        "matches": {"type": "boolean", "description": "At least min_files compared, and no list above has an entry."},
        "installer": {"type": ["string", "null"]},
        "direct_url": {"description": "direct_url.json (PEP 610) as the installer wrote it, or null."},
    },
}


def record_script() -> str:
    return script_text("_record_script.py")


class PythonRecordProbe:
    kind = "python.record"
    summary = ("Whether an installed distribution is the build of a source tree at a revision: RECORD hashes, "
               "installed bytes and the source's git blobs compared file by file.")
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA
    evidence = "measured"  # policyrun.evidencekinds

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        _, repo = open_root(str(params["source"]), str(params["rev"]), ctx, what="source")
        assert repo is not None  # open_root refuses a plain folder when a rev is asked for
        [commit] = resolve_commits(repo, [str(params["rev"])])
        listing = repo.run(["ls-tree", "-r", "-z", "--full-tree", commit]).stdout.decode("utf-8", "surrogateescape")
        blobs = {}
        for record in listing.split("\0"):
            meta, _, path = record.partition("\t")
            if path.endswith(".py") and len(meta.split()) == 3:
                blobs[path] = meta.split()[2]
        exe, got, command = self._installed(params, ctx, repo.object_format)
        generated = [glob_regex(str(g)) for g in params.get("generated") or []]
        value = compare(got, blobs, str(params.get("prefix") or ""), int(params.get("min_files", 1)),
                        lambda path: any(g.fullmatch(path) for g in generated))
        value = {"python": exe, "python_version": got.get("python_version"), "rev": str(params["rev"]),
                 "commit": commit, **value}
        result = repo.result(value)
        result.commands = [*result.commands, command]
        return result

    def _installed(self, params: Mapping[str, Any], ctx: ProbeContext, object_format: str) -> tuple[str, dict[str, Any],
                                                                                                       str]:
        env = {**os.environ, **ctx.env}
        exe = _resolve_python(str(params.get("python") or sys.executable), ctx, env)
        args = json.dumps({"distribution": str(params["distribution"]),
                           "object_format": "sha256" if object_format == "sha256" else "sha1"})
        command = f"{shlex.quote(exe)} {' '.join(ISOLATED)} -c <{script_label('_record_script.py')}> {shlex.quote(args)}"
        with tempfile.TemporaryDirectory(prefix="policyrun-record-") as cwd:
            try:
                proc = run_child([exe, *ISOLATED, "-c", record_script(), args], cwd=cwd,
                                 env=child_env(env, CUDA_VISIBLE_DEVICES=""), timeout_s=max(ctx.timeout_s - 1, 1),
                                 max_stdout=MAX_RESULT_BYTES)
            except ChildTimeout:
                raise ProbeError("python.timeout", f"{exe} did not list the distribution within the probe's "
                                 "timeout_s; raise it", commands=[command]) from None
            except ChildOutputTooLarge:
                raise ProbeError("python.script_failed", f"{exe} printed more than {MAX_RESULT_BYTES} bytes",
                                 commands=[command]) from None
            except OSError as exc:
                raise ProbeError("python.not_found", f"cannot run {exe!r}: {exc.strerror or exc}",
                                 commands=[command]) from None
        from policyrun import limits
        from policyrun.errors import PolicyrunError
        from policyrun.jsonfile import parse_json

        try:  # the interpreter is the user's: what it prints is parsed as strictly as any input
            got = parse_json(proc.stdout.decode("utf-8", "replace"), exe, what="record script output",
                             code="python.script_failed", max_depth=limits.RESULTS_DEPTH)
            if not isinstance(got, dict) or not isinstance(got.get("found"), bool):
                raise TypeError("no result")
        except (TypeError, PolicyrunError):
            stderr = proc.stderr.decode("utf-8", "replace")
            raise ProbeError("python.script_failed", f"the record script printed no result in {exe} (exit "
                             f"{proc.returncode}): {_tail(stderr) or '(no stderr)'}", commands=[command]) from None
        return exe, got, command


def compare(got: Mapping[str, Any], blobs: Mapping[str, str], prefix: str, min_files: int,
            is_generated: Callable[[str], bool] = lambda path: False) -> dict[str, Any]:
    """The fact's comparison fields from the script's output and the source tree's blob ids."""
    entries = got.get("entries") if got.get("found") else []
    differ: list[str] = []
    absent: list[str] = []
    made: list[str] = []
    record_bad: list[str] = []
    matched = 0
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ProbeError("python.script_failed", "the record script printed an entry without a path")
        path = entry["path"]
        record, sha = entry.get("record"), entry.get("sha256")
        if not isinstance(sha, str) or record != f"sha256={sha}":
            record_bad.append(path)
        source = blobs.get(prefix + path)
        if source is None:
            (made if is_generated(path) else absent).append(path)
        elif entry.get("blob") != source:
            differ.append(path)
        else:
            matched += 1
    compared = matched + len(differ)
    direct_url: Any = got.get("direct_url")
    if isinstance(direct_url, str):
        try:
            direct_url = json.loads(direct_url)
        except ValueError:
            pass  # kept as the text the installer wrote
    return {"installed": bool(got.get("found")), "distribution": _text(got.get("name")),
            "version": _text(got.get("version")),
            "record_files": got.get("record_files") if isinstance(got.get("record_files"), int) else 0,
            "compared": compared, "matched": matched,
            "differ": sorted(differ)[:LISTED], "differ_count": len(differ),
            "not_in_source": sorted(absent)[:LISTED], "not_in_source_count": len(absent),
            "generated": sorted(made)[:LISTED], "generated_count": len(made),
            "record_mismatch": sorted(record_bad)[:LISTED], "record_mismatch_count": len(record_bad),
            "matches": bool(got.get("found")) and compared >= min_files and not (differ or absent or record_bad),
            "installer": _text(got.get("installer")), "direct_url": direct_url}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


PROBES = [PythonRecordProbe()]
