"""Find, load and validate a rulebook, keeping every node's position.

`load_rulebook` returns a `LoadedRulebook` or raises `RulebookError` carrying every finding at
its file:line:col. Shape errors come from the pydantic model; unknown keys get a did-you-mean.
"""

from __future__ import annotations

import difflib
import hashlib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from policyrun.errors import Finding, Location, RulebookError
from policyrun.language.locate import display_name, resolve_ref
from policyrun.model import Rulebook
from policyrun.language.overlay import Layer, load_layered
from policyrun.language.rulebooktext import read_rulebook
from policyrun.yamlsource import NodePath, SourceMap

# Finding rulebooks lives in policyrun.language.locate (light enough for lint's cached path).


@dataclass(frozen=True)
class LoadedRulebook:
    model: Rulebook
    path: Path
    display: str  # the path as shown in messages and traces
    sha256: str
    source: SourceMap
    chain: tuple[Layer, ...] = ()  # with `extends`: every file of the chain, base first (this one last)

    def locate(self, path: NodePath, *, key: bool = False) -> Location:
        return self.source.locate(path, key=key)

    @property
    def directory(self) -> Path:
        return self.path.resolve().parent

    def file_of(self, path: NodePath) -> Path:
        """The file that wrote a node: this rulebook, or for an overlay the layer it came from (paths
        a rulebook names — templates, schema files — are relative to the file that names them)."""
        from policyrun.language.overlay import LayeredSourceMap

        if isinstance(self.source, LayeredSourceMap):
            smap, _ = self.source.origin(path)
            for layer in self.chain:
                if layer.path == smap.file and layer.file:
                    return Path(layer.file)
        return self.path


def load_rulebook(ref: str | Path | None) -> LoadedRulebook:
    path = ref if isinstance(ref, Path) else resolve_ref(ref)
    name = display_name(path)
    text, data, smap = read_rulebook(path, name)  # a file that is not a rulebook is refused quoting nothing
    chain: list[Layer] = []
    if "extends" in data:  # an overlay: merge the chain first, keeping every node's own file
        data, smap, chain = load_layered(path, name, data, smap)
    try:
        model = Rulebook.model_validate(data)
    except ValidationError as exc:
        findings = validation_findings(exc, smap)
        raise RulebookError(findings[0].message, code=findings[0].code, location=findings[0].location,
                            findings=findings) from None
    _check_aliases(model, smap)
    return LoadedRulebook(model, path, name, hashlib.sha256(text.encode()).hexdigest(), smap, tuple(chain))


def _check_aliases(model: Rulebook, smap: SourceMap) -> None:
    """An alias names one input only: never another input, nor an alias of another."""
    owner: dict[str, str] = {name: name for name in model.inputs}
    for name, spec in model.inputs.items():
        for k, alias in enumerate(spec.aliases):
            if alias in owner and owner[alias] != name or alias == name:
                other = "itself" if alias == name else (
                    f"input {owner[alias]!r}" if owner[alias] == alias else f"an alias of input {owner[alias]!r}")
                raise RulebookError(f"input {name!r}: alias {alias!r} is already {other}; an alias names one "
                                    "input only", code="L044", location=smap.locate(("inputs", name, "aliases", k)))
            owner[alias] = name


def validation_findings(exc: ValidationError, smap: SourceMap) -> list[Finding]:
    findings: list[Finding] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        node = node_path_text(loc)
        if err["type"] == "extra_forbidden":
            key = str(loc[-1])
            allowed = _fields_at(loc[:-1])
            hint = difflib.get_close_matches(key, allowed, n=1)
            suggestion = f"; did you mean {hint[0]!r}?" if hint else (
                f"; allowed keys: {', '.join(sorted(allowed))}" if allowed else "")
            findings.append(Finding("S002", f"unknown key {key!r}{suggestion}", smap.locate(loc, key=True),
                                    node=node_path_text(loc[:-1])))
            continue
        if err["type"] == "missing":
            findings.append(Finding("S001", f"missing required key {str(loc[-1])!r}", smap.locate(loc[:-1]),
                                    node=node_path_text(loc[:-1])))
            continue
        msg = err["msg"]
        if err["type"] == "literal_error" and loc == ("policyrun",):
            msg = "unsupported format version; this policyrun reads `policyrun: 1`"
        elif err["type"] == "string_pattern_mismatch":
            msg = (f"{err['input']!r} is not a valid identifier here (letters, digits and `_`, "
                   "not starting with a digit)")
        findings.append(Finding("S001", msg, smap.locate(loc), node=node))
    return sorted(findings, key=Finding.sort_key)


def node_path_text(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int) and parts:
            parts[-1] += f"[{p}]"
        else:
            parts.append(str(p))
    return " → ".join(parts)


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Names a model accepts at `loc` (for did-you-mean on unknown keys)."""
    current: Any = Rulebook
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
            if field is None:
                return []
            current = field.annotation
        else:
            origin = typing.get_origin(current)
            args = typing.get_args(current)
            if origin in (list, dict) and args:
                current = args[-1]
            else:
                return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items()]
    return []


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            models = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]
            others = [a for a in typing.get_args(tp) if typing.get_origin(a) in (list, dict)]
            tp = models[0] if models else (others[0] if others else tp)
            if not models and not others:
                return tp
        else:
            return tp
