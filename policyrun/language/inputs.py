"""Bind a rulebook's typed inputs from `--set k=v`, an inputs file and defaults; pick the mode."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun import limits, masking
from policyrun.errors import Location, RulebookError, UsageError
from policyrun.jsonfile import parse_json
from policyrun.model import InputSpec, Rulebook
from policyrun.yamlsource import load_yaml_file

if TYPE_CHECKING:  # lint binds input defaults without loading the facts model
    from policyrun.facts import FactsSnapshot

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def select_mode(rulebook: Rulebook, mode: str | None) -> str:
    modes = list(rulebook.modes)
    if mode is None:
        if len(modes) == 1:
            return modes[0]
        raise UsageError(f"rulebook {rulebook.name!r} has several modes; choose one with --mode "
                         f"({', '.join(modes)})", code="U002")
    if mode not in rulebook.modes:
        hint = difflib.get_close_matches(mode, modes, n=1)
        extra = f"did you mean {hint[0]!r}? " if hint else ""
        raise UsageError(f"unknown mode {mode!r}; {extra}modes of {rulebook.name!r}: {', '.join(modes)}",
                         code="U002")
    return mode


def secret_input(spec: InputSpec, value: Any) -> bool:
    """Whether an input's value is never shown: declared `secret: true`, or bound to an environment
    variable whose name or value the masking rule (policyrun/masking.py) flags."""
    if spec.secret:
        return True
    if spec.env is None or value is None:
        return False
    texts = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return any(masking.mask_value(t, name=spec.env).masked for t in texts)


def secret_inputs(rulebook: Rulebook, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The bound inputs whose values are never shown."""
    return {name: value for name, value in inputs.items()
            if name in rulebook.inputs and value is not None and secret_input(rulebook.inputs[name], value)}


def secret_texts(secrets: Mapping[str, Any]) -> list[str]:
    """The text of secret input values (a list input: each item) to mask wherever it appears."""
    return [x for v in secrets.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, str) and x]


def mask_snapshot(facts: FactsSnapshot, rulebook: Rulebook, inputs: Mapping[str, Any]) -> FactsSnapshot:
    """A facts snapshot to write: a secret input's text masked in parameters, commands and values.
    Replay (`evaluate --facts`) reads what was written, so it evaluates over the same masked text."""
    texts = secret_texts(secret_inputs(rulebook, inputs))
    if not texts:
        return facts
    return type(facts).model_validate(masking.redact_tree(facts.model_dump(mode="json"), texts, exact=texts))


def mask_trace_record(record: dict[str, Any], rulebook: Rulebook, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A trace record (as evaluation built it, over the real values) with every secret input's value
    masked: in `inputs`, in every read of it, and wherever its text appears (messages, errors,
    derived values, provenance). Expressions saw the real value; only what is written changes."""
    secrets = secret_inputs(rulebook, inputs)
    if not secrets:
        return record
    texts = secret_texts(secrets)
    out: dict[str, Any] = masking.redact_tree(record, texts, exact=texts)
    out["inputs"] = {k: masking.MASK if k in secrets else v for k, v in record.get("inputs", {}).items()}
    _mask_reads(out, secrets)
    return out


def _mask_reads(node: Any, secrets: Mapping[str, Any]) -> None:
    """Reads of a secret input whose value is not text (a number, a list, the whole `inputs` map)."""
    if isinstance(node, list):
        for item in node:
            _mask_reads(item, secrets)
        return
    if not isinstance(node, dict):
        return
    path = node.get("path")
    if isinstance(path, str) and "value" in node:
        parts = path.split(".")
        if path == "inputs" and isinstance(node["value"], dict):
            node["value"] = {k: masking.MASK if k in secrets else v for k, v in node["value"].items()}
        elif len(parts) >= 2 and parts[0] == "inputs" and parts[1] in secrets:
            node["value"] = masking.MASK
    for item in node.values():
        _mask_reads(item, secrets)


def coerce(name: str, spec: InputSpec, value: Any, *, from_text: bool) -> Any:
    """Convert a value to the input's declared type, or explain what was expected."""
    def bad(expected: str) -> UsageError:
        shown = masking.MASK if secret_input(spec, value) else repr(value)
        return UsageError(f"input {name!r} must be {expected}, got {shown}", code="U004")

    if spec.type in ("string", "path"):
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise bad("a string")
    if spec.type == "enum":
        allowed = spec.values or []
        text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
        if text is not None and text in allowed:
            return text
        hint = difflib.get_close_matches(text or "", allowed, n=1)
        shown = masking.MASK if secret_input(spec, value) else repr(value)
        raise UsageError(f"input {name!r} must be one of {', '.join(allowed)}, got {shown}"
                         + (f"; did you mean {hint[0]!r}?" if hint else ""), code="U004")
    if spec.type == "int":
        if isinstance(value, bool):
            raise bad("an integer")
        if isinstance(value, int):
            return value
        if from_text and isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise bad("an integer") from None
        raise bad("an integer")
    if spec.type == "number":
        return _number(value, from_text, bad)
    if spec.type == "bool":
        if isinstance(value, bool):
            return value
        if from_text and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise bad("true or false")
    # list
    if isinstance(value, list):
        return value
    if from_text and isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:  # the guarded parser: no NaN, no duplicate keys, nesting bounded like a policy file
                parsed = parse_json(text, f"--set {name}", what=f"input {name!r}", code="U004",
                                    max_depth=limits.POLICY_DEPTH)
            except UsageError as exc:
                if "not valid JSON" not in exc.message:
                    raise
                raise bad("a JSON list or comma-separated values") from None
            if isinstance(parsed, list):
                return parsed
        return [v.strip() for v in text.split(",") if v.strip()] if text else []
    raise bad("a list")


def _number(value: Any, from_text: bool, bad: Callable[[str], UsageError]) -> float:
    """A `number` input is a CEL double whatever was written (`50` binds 50.0), so arithmetic with
    it never mixes int and double, which CEL refuses ("no matching overload")."""
    expected = "a finite number"
    if isinstance(value, bool):
        raise bad(expected)
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a double's range
            raise bad(expected) from None
    elif from_text and isinstance(value, str) and len(value.strip()) <= limits.NUMBER_CHARS:
        try:
            number = float(value.strip())
        except ValueError:
            raise bad(expected) from None
    else:
        raise bad(expected)
    if not math.isfinite(number):  # NaN compares false with everything: a check could pass on it
        raise bad(expected)
    return number


def parse_sets(sets: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects key=value, got {item!r}", code="U003")
        out[key.strip()] = value
    return out


def input_aliases(rulebook: Rulebook) -> dict[str, str]:
    """Every name an input is given by: its declared name and its `aliases`, to the declared name."""
    names = {name: name for name in rulebook.inputs}
    for name, spec in rulebook.inputs.items():
        names.update({alias: name for alias in spec.aliases})
    return names


def canonical_inputs(rulebook: Rulebook, given: Mapping[str, Any], *, what: str = "input") -> dict[str, Any]:
    """`given` keyed by declared names: an alias becomes its input's name; an input given under two
    of its names is refused (which one would win is not the user's guess to make)."""
    names = input_aliases(rulebook)
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in given.items():
        name = names.get(key, key)
        if name in spelled and spelled[name] != key:
            raise UsageError(f"{what} {name!r} is given twice, as {spelled[name]!r} and {key!r}; give it once",
                             code="U006")
        spelled[name] = key
        out[name] = value
    return out


def resolve_inputs(rulebook: Rulebook, sets: Iterable[str] = (), inputs_file: Path | None = None,
                   *, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """Inputs file first, then `values` (already typed), then `--set` (highest precedence)."""
    given: dict[str, tuple[Any, bool]] = {}
    if inputs_file is not None:
        try:
            data, _ = load_yaml_file(inputs_file)
        except RulebookError as exc:
            raise UsageError(exc.message, code=exc.code, location=exc.location) from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UsageError("an inputs file is a mapping of input name to value", code="U006",
                             location=Location(str(inputs_file), 1, 1))
        given.update(canonical_inputs(rulebook, {k: (v, False) for k, v in data.items()}))
    given.update(canonical_inputs(rulebook, {k: (v, False) for k, v in (values or {}).items()}))
    given.update(canonical_inputs(rulebook, {k: (v, True) for k, v in parse_sets(sets).items()}, what="--set"))

    declared = rulebook.inputs
    for name in given:
        if name not in declared:
            hint = difflib.get_close_matches(name, list(input_aliases(rulebook)), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else f"; inputs: {', '.join(declared) or 'none'}"
            raise UsageError(f"unknown input {name!r}{extra}", code="U006")

    bound: dict[str, Any] = {}
    missing: list[str] = []
    for name, spec in declared.items():
        if name in given:
            value, from_text = given[name]
            bound[name] = coerce(name, spec, value, from_text=from_text)
        elif spec.env is not None and os.environ.get(spec.env, "") != "":
            try:
                bound[name] = coerce(name, spec, os.environ[spec.env], from_text=True)
            except UsageError as exc:
                raise UsageError(f"{exc.message} (from environment variable {spec.env})", code=exc.code) from None
        elif spec.default is not None:
            bound[name] = coerce(name, spec, spec.default, from_text=False)
        elif spec.required:
            missing.append(name)
        else:
            bound[name] = None
    if missing:
        flags = " ".join(f"--set {m}=..." + (f" (or ${declared[m].env})" if declared[m].env else "") for m in missing)
        raise UsageError(f"missing required input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}; "
                         f"pass {flags}", code="U005")
    return bound
