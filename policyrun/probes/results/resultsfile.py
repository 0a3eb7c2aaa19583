"""`results`: a JSON or YAML results file (lm-eval's results.json, a benchmark summary) as a fact.

The value is the document itself, so a rulebook reads it the way the file is laid out:
`facts.lm_eval.results.gsm8k["exact_match,strict-match"] >= 0.85`. Where the file came from is
added under the reserved key `_file` ({path, sha256, format, size}), which lets a rule pin the
exact file it judged. A top-level list is exposed as `items`.

Non-finite numbers (JSON NaN/Infinity, YAML .nan/.inf) become null: a NaN compares false with
everything, so `!(x < 0.5)` would pass on a broken metric; null makes such a check fail closed.
YAML dates stay the strings they were written as.

The file goes through policyrun's guarded loaders (policyrun.limits): a regular file of at most
64 MiB, nesting at most 120 levels, YAML expanding to at most 1,000,000 nodes (alias bombs), no
duplicate keys, YAML keys that are strings and no YAML tags beyond plain scalars. A file over a
bound is `results.too_large`; one that breaks a rule is `results.parse_error`, located.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun import limits
from policyrun.errors import PolicyrunError
from policyrun.jsonfile import parse_json
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.yamlsource import load_yaml_text

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
    "additionalProperties": True,  # the document's own keys: any
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
        if not path.exists():
            raise ProbeError("file.not_found", f"results file {str(path)!r} does not exist; run the step that "
                             "writes it or fix the probe's path")
        if path.is_dir():
            raise ProbeError("file.not_found", f"{str(path)!r} is a directory, not a results file")
        try:
            data = limits.read_limited(path, limits.RESULTS_BYTES)
        except limits.TooLarge as exc:
            raise ProbeError("results.too_large", f"{str(path)!r} is {exc.reason}") from None
        except limits.Unreadable as exc:
            raise ProbeError("file.unreadable", f"cannot read {str(path)!r}: {exc.reason}") from None
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
    try:
        if fmt == "json":
            return parse_json(text, str(path), what="results file", code="results.parse_error",
                              depth_code="results.too_large", max_depth=limits.RESULTS_DEPTH, allow_nonfinite=True)
        return load_yaml_text(text, str(path), max_depth=limits.RESULTS_DEPTH, max_nodes=limits.RESULTS_NODES,
                              data=True)[0]
    except PolicyrunError as exc:
        code = exc.code if exc.code.startswith("results.") else (
            "results.too_large" if exc.code in ("Y005", "Y008") else "results.parse_error")
        raise ProbeError(code, f"{exc.location}: {exc.message}") from None


PROBES = [ResultsProbe()]
