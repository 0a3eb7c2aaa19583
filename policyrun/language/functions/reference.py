"""The library's reference entries as Markdown: docs/functions.md is made of these, and the tests
check that it still is."""

from __future__ import annotations

from policyrun.language.functions.base import literal
from policyrun.language.functions.library import LIBRARY, Function, Overload


def signature(fn: Function, ov: Overload) -> str:
    params = ", ".join(f"{name}: {kind}" for name, kind in zip(ov.names, ov.params))
    text = f"`{fn.name}({params}) -> {ov.result}`"
    if ov.member:
        text += f" or `{ov.names[0]}.{fn.name}({', '.join(ov.names[1:])})`"
    return text


def entry(fn: Function) -> str:
    lines = [f"### {fn.name}", ""]
    lines += [f"- {signature(fn, ov)}" for ov in fn.overloads]
    lines += ["", fn.doc, "", f"Complexity: {fn.complexity}.", "", "```cel", fn.example, "```", ""]
    if fn.outcome == "unknown":
        lines.append(f"Result: the check is UNKNOWN with the reason `{fn.result}`.")
    else:
        lines.append(f"Result: `{literal(fn.result)}`")
    return "\n".join(lines) + "\n"


def reference() -> str:
    """Every entry, under a `##` heading per group, in the table's order."""
    out: list[str] = []
    group = None
    for fn in LIBRARY:
        if fn.group != group:
            group = fn.group
            out.append(f"## {group}\n")
        out.append(entry(fn))
    return "\n".join(out)


if __name__ == "__main__":
    print(reference(), end="")
