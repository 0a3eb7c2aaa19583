"""How much CEL a rulebook states (issue 23, item 3: state each predicate once).

    python bench/cel_size.py [RULEBOOK ...]        (default: every shipped rulebook)

For each rulebook, as loaded (an overlay resolved onto its base), prints the number of CEL
expressions and their bytes: conditions, derived values, `violations` lists, probe parameters
and every `${...}` inside a template, as lint lists them (policyrun.language.checks.expression_sites).
Also the bytes of the rulebook's own file, and of the guards of the shape "an input given and not
empty" written out by hand (`inputs.x != null && inputs.x != ""` and its negation), which the
`given()` helper replaces. Deterministic: run it before and after a rewrite and compare.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from policyrun.language.checks import expression_sites
from policyrun.language.locate import shipped_rulebooks
from policyrun.language.rulebook import load_rulebook

# `inputs.x == null || inputs.x == ""` (and `!= ... &&`), spaces and quotes as written.
_HAND_GUARD = re.compile(r'inputs\.(\w+)\s*(==|!=)\s*null\s*(\|\||&&)\s*inputs\.\1\s*(==|!=)\s*(""|\'\')')


def measure(ref: str | Path) -> dict[str, int]:
    rb = load_rulebook(ref)
    sites = list(expression_sites(rb))
    text = "\n".join(s.source for s in sites)
    return {"expressions": len(sites), "cel_bytes": sum(len(s.source.encode()) for s in sites),
            "hand_guards": len(_HAND_GUARD.findall(text)),
            "file_bytes": len(rb.path.read_bytes())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rulebooks", nargs="*")
    args = parser.parse_args(argv)
    refs: list[str | Path] = list(args.rulebooks) or list(sorted(shipped_rulebooks()))
    print(f"{'rulebook':<28} {'expressions':>11} {'CEL bytes':>10} {'hand guards':>11} {'file bytes':>10}")
    for ref in refs:
        m = measure(ref)
        print(f"{str(ref):<28} {m['expressions']:>11} {m['cel_bytes']:>10} {m['hand_guards']:>11} {m['file_bytes']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
