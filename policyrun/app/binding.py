"""A rulebook bound to one run: loaded and checked, its mode chosen and its inputs resolved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.language.rulebook import LoadedRulebook


@dataclass(frozen=True)
class RulebookRequest:
    """Which rulebook, mode and inputs (as `RULEBOOK --mode M --inputs F --set K=V` name them)."""

    rulebook: str | Path | None = None
    mode: str | None = None
    sets: tuple[str, ...] = ()
    inputs_file: str | Path | None = None  # as the caller wrote it: a refusal quotes it
    values: Mapping[str, Any] = field(default_factory=dict)  # typed input values (the MCP `inputs`)


@dataclass(frozen=True)
class Bound:
    rb: LoadedRulebook
    mode: str
    inputs: dict[str, Any]


def bind(request: RulebookRequest, access: PathCheck | None = None) -> Bound:
    """Load the rulebook (refused when lint finds errors), choose the mode, resolve the inputs.
    With `access`, the rulebook and inputs file are checked before anything is read."""
    from policyrun.evaluate.engine import load_checked

    ref: str | Path | None = request.rulebook
    if access is not None:
        from policyrun.language.locate import is_path_form, resolve_ref

        if ref is not None and is_path_form(str(ref)):
            access.check(ref, "rulebook")  # before resolving: an error must not tell what exists outside
        ref = resolve_ref(str(ref) if ref is not None else None)  # a bare name is a shipped rulebook
        access.check(ref, "rulebook")
        if request.inputs_file:
            access.check(request.inputs_file, "inputs_file")
    return bind_loaded(load_checked(ref), request)


def bind_loaded(rb: LoadedRulebook, request: RulebookRequest) -> Bound:
    """A rulebook already loaded, its mode chosen and inputs resolved as `request` says."""
    from policyrun.language.inputs import resolve_inputs, select_mode

    mode = select_mode(rb.model, request.mode)
    inputs_file = Path(request.inputs_file) if request.inputs_file is not None else None
    inputs = resolve_inputs(rb.model, request.sets, inputs_file,
                            values=dict(request.values) if request.values else None)
    return Bound(rb, mode, inputs)


def check_path_inputs(bound: Bound, access: PathCheck | None) -> None:
    """The folders the probes will read, as given to this call (a rulebook's own defaults are its own)."""
    if access is None:
        return
    for name, spec in bound.rb.model.inputs.items():
        value = bound.inputs.get(name)
        if spec.type == "path" and isinstance(value, str) and value and value != spec.default:
            access.check(value, f"input {name}")
