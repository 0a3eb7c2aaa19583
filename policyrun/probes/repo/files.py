"""Document probes: `file.read` parses YAML/JSON/TOML; `attestation` also validates the
document against a JSON Schema declared in the rulebook.

Attestations carry judgments no probe can make (an architecture decision, a review). A document
that does not match its schema is an error fact listing every problem at file:line:col, so the
checks that read it are missing, never passing.
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
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import Skipped, read_regular

FORMATS = ("yaml", "json", "toml")
# Documents, pins and source files a probe parses whole. A larger file is `file.too_large`; a FIFO
# or device is never opened (it would block, or never end).
DOCUMENT_BYTES = 16 * 1024 * 1024
_BY_SUFFIX = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}
_MAX_PROBLEMS = 20  # listed in the error message; the count says how many more


def _format_of(path: Path, given: str | None) -> str:
    fmt = given or _BY_SUFFIX.get(path.suffix.lower())
    if fmt is None:
        raise ProbeError("params.invalid", f"cannot tell the format of {path.name} from its extension; "
                                           f"add `format:` ({', '.join(FORMATS)})")
    return fmt


class _TooLong(Exception):
    def __init__(self, where: str, digits: int) -> None:
        super().__init__(where)
        self.where, self.digits = where, digits


def _plain(value: Any, where: str = "") -> Any:
    """TOML dates and times as ISO strings, so facts stay JSON; integers bounded as JSON's are
    (tomllib reads integers of any length, so a fact could hold one no reader accepts back)."""
    if isinstance(value, dict):
        return {k: _plain(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if type(value) is int and value.bit_length() > 300 and len(str(value)) > limits.NUMBER_CHARS:
        raise _TooLong(where, len(str(value)))
    return value


def _non_finite(value: Any) -> tuple[str | int, ...] | None:
    """The path of the first NaN or infinite float in a document, or None."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))
    return None


def _doc_value(doc: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def read_file(path: Path, shown: str, limit: int = DOCUMENT_BYTES, param: str = "path") -> bytes:
    """A named regular file's bytes (links followed: the rulebook named it), as ProbeErrors otherwise."""
    try:
        data = read_regular(path, limit)
    except OSError as exc:
        raise ProbeError("file.unreadable", f"{shown}: {exc.strerror or exc}") from None
    if isinstance(data, Skipped):
        if data.reason == "missing":
            raise ProbeError("file.not_found", f"{shown} does not exist; check the {param} parameter")
        if data.reason == "too_large":
            raise ProbeError("file.too_large", f"{shown} is {data.size} bytes, over the {limit}-byte limit for "
                                               "files policyrun parses")
        raise ProbeError("file.unreadable", f"{shown} is not a regular file ({data.reason}); policyrun reads "
                                            "only regular files")
    return data


def load_document(path: Path, fmt: str, shown: str, data: bytes | None = None) -> tuple[Any, Any, bytes]:
    """(document, YAML source map or None, raw bytes): of `data` when given (a file read from git
    objects), else of the file at `path`. Errors are ProbeErrors with a location."""
    from policyrun.yamlsource import load_yaml_text

    if data is None:
        data = read_file(path, shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeError("file.parse_error", f"{shown}: not UTF-8 text") from None
    if fmt == "yaml":
        try:
            doc, smap = load_yaml_text(text, shown, data=True)
        except PolicyrunError as exc:
            raise ProbeError("file.parse_error", exc.render()) from None
        bad = _non_finite(doc)
        if bad is not None:  # YAML's .nan/.inf, refused as JSON's NaN/Infinity are (jsonfile)
            raise ProbeError("file.parse_error", f"{smap.locate(bad)}: {_doc_value(doc, bad)} at "
                             f"{' → '.join(map(str, bad)) or 'the top level'}: numbers must be finite (NaN compares "
                             "false with everything, so a check could pass on a broken value); write null or a number")
        return doc, smap, data
    if fmt == "json":
        from policyrun.jsonfile import parse_json

        try:  # duplicate keys, NaN/Infinity and runaway nesting refused with their position
            doc = parse_json(text, shown, what="JSON document", code="file.parse_error",
                             max_depth=limits.RESULTS_DEPTH)
        except PolicyrunError as exc:
            raise ProbeError("file.parse_error", exc.render()) from None
        try:  # JSON is (almost always) YAML: borrow the YAML loader's positions for error locations
            return doc, load_yaml_text(text, shown, data=True)[1], data
        except PolicyrunError:
            return doc, None, data
    import tomllib

    try:
        return _plain(tomllib.loads(text)), None, data
    except _TooLong as exc:
        raise ProbeError("file.parse_error", f"{shown}: a number of {exc.digits:,} characters at {exc.where}: "
                                             f"numbers are limited to {limits.NUMBER_CHARS} characters") from None
    except ValueError as exc:  # TOMLDecodeError, and Python's refusal of integers over 4,300 digits
        raise ProbeError("file.parse_error", f"{shown}: invalid TOML: {exc}") from None


def _path_params(optional: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"path": {"type": "string", "minLength": 1, "description": "The file."},
                           "format": {"enum": list(FORMATS), "description": "Default: from the extension."},
                           **extra, **(optional or {})},
            "required": ["path", *extra], "additionalProperties": False}


def _rev_param() -> dict[str, Any]:
    from policyrun.probes._kit.gitclient import rev_param

    return rev_param("Read the file as it is at this revision (a commit, branch or tag), from git objects: "
                     "nothing is checked out. Default: the working tree.")


class ReadProbe:
    kind = "file.read"
    summary = "A YAML, JSON or TOML document, parsed (YAML safely: plain data only); `rev:` reads it at a revision."
    params_schema: Mapping[str, Any] = _path_params({"rev": _rev_param()})
    fact_schema: Mapping[str, Any] = {"description": "The parsed document."}

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        path = ctx.resolve(params["path"])
        fmt = _format_of(path, params.get("format"))
        rev = params.get("rev")
        if rev is None:
            doc, _, _ = load_document(path, fmt, params["path"])
            return ProbeResult(value=doc, sources=[str(path)])
        from policyrun.probes._kit.revfiles import read_file_at

        got = read_file_at(params["path"], rev, ctx, limit=DOCUMENT_BYTES)
        doc, _, _ = load_document(path, fmt, f"{params['path']}@{rev}", got.data)
        return ProbeResult(value=doc, sources=[got.source], commands=got.repo.commands,
                           repo_path=str(got.repo.root), repo_head=got.repo.head())


def load_schema(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    path = Path(value)
    try:
        doc, _, _ = load_document(path, _BY_SUFFIX.get(path.suffix.lower(), "yaml"), str(path))
    except ProbeError as exc:
        code = "attestation.schema_not_found" if exc.code == "file.not_found" else "attestation.bad_schema"
        raise ProbeError(code, f"schema: {exc.message}") from None
    if not isinstance(doc, dict):
        raise ProbeError("attestation.bad_schema", f"schema file {path} does not hold a JSON Schema object")
    return doc


def checked_validator(schema: dict[str, Any], shown: str) -> Any:
    """A validator for `schema` (its own `$schema` draft, 2020-12 by default), or an error when it
    is not a valid JSON Schema."""
    import jsonschema

    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ProbeError("attestation.bad_schema", f"the schema for {shown} is not a valid JSON "
                                                   f"Schema: {exc.message}") from None
    return validator_cls(schema)


def schema_problems(validator: Any, doc: Any, smap: Any, shown: str) -> list[str]:
    """Every way `doc` breaks the schema, as `file:line:col: at node: message`, in file order."""
    problems: list[tuple[tuple[int, int], str]] = []
    for err in validator.iter_errors(doc):
        loc = smap.locate(tuple(err.absolute_path)) if smap else None
        node = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        message = err.message
        if err.validator == "not" and isinstance(err.validator_value, dict) and set(err.validator_value) == {"pattern"}:
            # jsonschema says "... should not be valid under {'pattern': '^TODO'}": say what it means.
            message = f"{err.instance!r} must not match {err.validator_value['pattern']!r}"
        message = message if len(message) <= 200 else message[:197] + "..."
        problems.append(((loc.line, loc.column) if loc else (0, 0),
                         f"{loc or shown}: {'at ' + node + ': ' if node else ''}{message}"))
    return [text for _, text in sorted(problems)]


class AttestationProbe:
    kind = "attestation"
    summary = "An evidence file (YAML/JSON/TOML) validated against a JSON Schema declared in the rulebook."
    # collect() replaces a `schema` naming an entry of the rulebook's `schemas:` with that entry, and
    # resolves a schema path against the rulebook's directory.
    schema_params = ("schema",)
    params_schema: Mapping[str, Any] = _path_params(schema={
        "type": ["object", "string"],
        "description": "A name from the rulebook's `schemas:`, a schema file path (relative to the rulebook), "
                       "or an inline JSON Schema."})
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "document": {"description": "The validated document."},
                       "sha256": {"type": "string", "description": "Of the file's bytes."}},
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        path = ctx.resolve(params["path"])
        schema_ref = params["schema"]
        schema = load_schema(schema_ref if isinstance(schema_ref, dict) else ctx.resolve(schema_ref))
        validator = checked_validator(schema, params["path"])
        doc, smap, data = load_document(path, _format_of(path, params.get("format")), params["path"])
        problems = schema_problems(validator, doc, smap, params["path"])
        if problems:
            listed = problems[:_MAX_PROBLEMS]
            more = len(problems) - len(listed)
            raise ProbeError("attestation.invalid", f"{params['path']} does not match its schema "
                                                    f"({len(problems)} problem{'s' if len(problems) > 1 else ''}): "
                                                    + "; ".join(listed) + (f"; and {more} more" if more else ""))
        sources = [str(path)] + ([] if isinstance(schema_ref, dict) else [str(ctx.resolve(schema_ref))])
        return ProbeResult(value={"path": str(path), "document": doc, "sha256": hashlib.sha256(data).hexdigest()},
                           sources=sources)


PROBES: list[Any] = [ReadProbe(), AttestationProbe()]
