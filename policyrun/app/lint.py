"""Lint: the rulebook files PATHs name, and their findings, sorted.

Imports stay inside the functions: `policyrun lint` answers from the lint cache without importing
the rulebook model, YAML or CEL (docs/lint.md, bench/bench_lint_cold.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.errors import Finding


@dataclass(frozen=True)
class LintRequest:
    paths: tuple[str, ...] = ("rulebooks",)


@dataclass(frozen=True)
class LintResult:
    files: list[Path]
    findings: list[Finding]  # sorted by file, line, column

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return len(self.findings) - self.errors

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


def rulebook_files(args: list[str] | tuple[str, ...]) -> list[Path]:
    """Files as given; folders contribute their *.yaml / *.yml files (not recursive); a name of a
    shipped rulebook stands for that file, even where a folder of that name is here."""
    from policyrun.errors import UsageError
    from policyrun.language.locate import is_path_form, resolve_ref, shipped_rulebooks

    out: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir() and (is_path_form(arg) or arg not in shipped_rulebooks()):
            # `*.test.yaml` files beside a rulebook are its test suites (`policyrun test`), not rulebooks.
            files = sorted(f for f in [*p.glob("*.yaml"), *p.glob("*.yml")] if not f.stem.endswith(".test"))
            if not files:
                raise UsageError(f"{arg}: no *.yaml or *.yml files in this folder", code="U009")
            out.extend(files)
        else:
            out.append(resolve_ref(arg))
    return out


def lint(request: LintRequest, access: PathCheck | None = None) -> LintResult:
    """With `access`, every argument that names a file or folder of the caller's, then every file
    found, is checked before any is read."""
    from policyrun.language import lintcache
    from policyrun.errors import Finding

    if access is not None:
        from policyrun.language.locate import is_path_form, shipped_rulebooks

        for arg in request.paths:
            if is_path_form(arg) or arg not in shipped_rulebooks():
                access.check(arg, "path")
    files = rulebook_files(request.paths)
    if access is not None:
        for path in files:
            access.check(path, "rulebook")
    findings: list[Finding] = []
    for path in files:
        # The cache answers without importing the rulebook model, YAML or CEL (docs/lint.md).
        cached = lintcache.lookup(path)
        if cached is None:
            from policyrun.language.lint import lint_file

            cached = lint_file(path)
        findings.extend(cached)
    return LintResult(files, sorted(set(findings), key=Finding.sort_key))
