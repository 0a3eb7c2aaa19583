"""`results`: a JSON or YAML results file (lm-eval's results.json, a benchmark summary) as a fact.

The value is the document itself, so a rulebook reads it the way the file is laid out:
`facts.lm_eval.results.gsm8k["exact_match,strict-match"] >= 0.85`. Where the file came from is
added under the reserved key `_file` ({path, sha256, format, size}), which lets a rule pin the
exact file it judged. A top-level list is exposed as `items`.

Non-finite numbers (JSON NaN/Infinity, YAML .nan/.inf) become null: a NaN compares false with
everything, so `!(x < 0.5)` would pass on a broken metric; null makes such a check fail closed.
YAML dates and other non-JSON scalars become strings.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

RESERVED_KEY = "_file"

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The results file (relative to the working directory)."},
        "format": {"enum": ["auto", "json", "yaml"], "default": "auto",
                   "description": "auto: .yaml/.yml are YAML, everything else JSON."},
    },
    "required": ["path"],
    "additionalProperties": False,
}

_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The document's top-level mapping (or {items: [...]} for a list), plus `_file`.",
    "properties": {
        RESERVED_KEY: {"type": "object", "properties": {
            "path": {"type": "string"}, "sha256": {"type": "string"}, "format": {"enum": ["json", "yaml"]},
            "size": {"type": "integer"}, "nonfinite": {"type": "integer",
                                                       "description": "NaN/Infinity values replaced by null."}}},
    },
}


def _jsonable(value: Any, counter: list[int]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        counter[0] += 1
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, counter) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, counter) for v in value]
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # bytes, sets and other YAML-only types: keep something readable


class ResultsProbe:
    kind = "results"
    summary = "A JSON or YAML results file (e.g. lm-eval results.json); the value is the document plus `_file`."
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        path = ctx.resolve(str(params["path"]))
        fmt = params.get("format", "auto")
        if fmt == "auto":
            fmt = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "json"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ProbeError("file.not_found", f"results file {str(path)!r} does not exist; run the step that "
                             "writes it or fix the probe's path") from None
        except IsADirectoryError:
            raise ProbeError("file.not_found", f"{str(path)!r} is a directory, not a results file") from None
        except OSError as exc:
            raise ProbeError("file.unreadable", f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        doc = _load(data, fmt, path)
        counter = [0]
        doc = _jsonable(doc, counter)
        if isinstance(doc, list):
            doc = {"items": doc}
        elif not isinstance(doc, dict):
            raise ProbeError("results.not_a_mapping", f"{path}: the document is a {type(doc).__name__}, "
                             "expected a mapping or a list")
        if RESERVED_KEY in doc:
            raise ProbeError("results.reserved_key", f"{path}: the document has a top-level {RESERVED_KEY!r} key, "
                             "which policyrun reserves for the file's path and hash")
        doc[RESERVED_KEY] = {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "format": fmt,
                             "size": len(data), "nonfinite": counter[0]}
        return ProbeResult(value=doc, sources=[str(path)])


def _load(data: bytes, fmt: str, path: Path) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProbeError("results.parse_error", f"{path}: not UTF-8 text (byte {exc.start})") from None
    if fmt == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProbeError("results.parse_error", f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: "
                             f"{exc.msg}") from None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ProbeError("results.parse_error", f"{where}: not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ProbeError("results.parse_error", f"{path}: not valid YAML: {exc}") from None


PROBES = [ResultsProbe()]
