"""Every code `policyrun lint` reports: its severity, a one-line description and how to fix it.

One table for SARIF rule metadata (`shortDescription`, `help`), the `--format github` titles and
docs/lint.md (a test keeps that page listing exactly these codes with these severities). A
finding carries its own severity; the one here is the code's default, shown to code scanning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class LintCode:
    code: str
    severity: Severity
    short: str
    help: str  # Markdown: what the code means and what to change


def _c(code: str, severity: Severity, short: str, help: str) -> LintCode:
    return LintCode(code, severity, short, help)


_TABLE = [
    _c("Y000", "error", "YAML syntax error",
       "The file is not valid YAML. Fix the syntax at the reported line and column (indentation, an unclosed "
       "quote or bracket, a tab used for indentation)."),
    _c("Y001", "error", "Duplicate key",
       "A mapping names the same key twice; YAML would silently keep the last one. Remove or rename one."),
    _c("Y002", "error", "Mapping key that is not a string",
       "Keys must be strings. Quote keys such as `1`, `true` or `null`."),
    _c("Y003", "error", "YAML tag",
       "Tags (`!!python/...`, `!custom`) are refused: policy files hold plain data. Remove the tag."),
    _c("Y004", "error", "Invalid UTF-8",
       "The file is not UTF-8. Re-save it as UTF-8."),
    _c("Y005", "error", "Document expands to too many nodes",
       "Aliases expand the document past policyrun's node bound (an alias bomb). Write the repeated data out "
       "or share it through `vars` or `derive`."),
    _c("Y006", "error", "File larger than 4 MiB",
       "Rulebooks are policy a person reads. Move data into facts (a probe) or an attestation file."),
    _c("Y007", "error", "File cannot be read",
       "Check the path and its permissions; it must be a regular file."),
    _c("Y008", "error", "Nesting too deep",
       "Lists and mappings nest deeper than policyrun's bound. Flatten the structure."),
    _c("Y009", "error", "Number too long",
       "A number has more characters than policyrun's bound (100). Quote it if it is an identifier, or "
       "fix what wrote it."),
    _c("S001", "error", "Schema error",
       "A required key is missing, a value has the wrong type or an unsupported value, or the format version "
       "is not supported. `policyrun schema rulebook` prints the schema; docs/language.md explains each key."),
    _c("S002", "error", "Unknown key",
       "The key is not part of the rulebook language (a typo?). Use the suggested key, or remove it."),
    _c("X001", "error", "CEL syntax error",
       "The expression does not parse. The column points at the offending character of the expression."),
    _c("X002", "error", "CEL type error, or a condition that is not a bool",
       "An operator or function is applied to values of the wrong type, or a condition does not produce a "
       "bool. Compare like with like (`int(x) > 0`, `string(v) == '1'`)."),
    _c("X003", "error", "Undeclared variable",
       "Expressions may read only `facts`, `inputs`, `vars`, `mode`, `phases`, `derived`, and `violations` "
       "inside an evidence with a `violations:` list."),
    _c("X004", "error", "Empty or unterminated `${...}`",
       "An interpolation has no expression or no closing brace. Write `${ expr }`, or `$${` for a literal."),
    _c("L001", "error", "Reads an undeclared input",
       "Declare the input under `inputs:`, or fix the name."),
    _c("L002", "error", "Reads an undeclared var",
       "Declare it under `vars:`, or fix the name."),
    _c("L003", "error", "Reads facts of an undeclared probe",
       "Declare a probe with that id under `probes:`, or fix the id (the message suggests the nearest one)."),
    _c("L004", "error", "Unknown phase, or reads a phase not decided yet",
       "Phases are decided in rulebook order: a condition can read `phases.X` only for an earlier phase X."),
    _c("L005", "error", "Duplicate phase or verdict id",
       "Phase and verdict ids must be unique. Rename one."),
    _c("L006", "error", "Duplicate check id in a phase",
       "Preconditions, stop conditions and evidence of one phase need distinct ids. Rename one."),
    _c("L007", "error", "A mode lists a phase that does not exist",
       "Fix the phase id in the mode's `phases:` list, or add the phase."),
    _c("L008", "error", "`requires` cycle, self-reference or a later phase",
       "A phase may require only earlier phases. Reorder the phases or drop the requirement."),
    _c("L009", "error", "A phase no mode runs",
       "Add the phase to a mode's `phases:` list, or remove it."),
    _c("L010", "warning", "A probe no check reads",
       "The probe would run for nothing. Read its facts in a check or derived value, or remove it."),
    _c("L011", "error", "Unknown probe kind",
       "`policyrun probes` lists the kinds. Fix the `uses:` name, or install the package that provides it."),
    _c("L012", "error", "Probe parameters do not match the kind's schema",
       "`policyrun probes` shows each kind's parameters. Fix the `with:` mapping."),
    _c("L013", "error", "A probe's or derived value's `modes` names an unknown mode",
       "Use a mode declared under `modes:`."),
    _c("L014", "error", "`on_missing` names an unknown mode",
       "Use a mode declared under `modes:`."),
    _c("L015", "error", "An input default does not match its type",
       "Change the default, or the input's `type`."),
    _c("L016", "warning", "An input is both required and defaulted",
       "A default makes `required` meaningless. Drop one of them."),
    _c("L017", "error", "A mode lists a phase twice",
       "Remove the repeated phase id from the mode."),
    _c("L018", "warning", "A mode lists phases out of rulebook order",
       "Phases always run in rulebook order; list them in that order so the mode reads as it runs."),
    _c("L019", "error", "Unknown permission",
       "Use a permission policyrun knows (docs/language.md, modes)."),
    _c("L020", "error", "Probe parameters or a derived value read `phases`",
       "Facts and derived values are computed before any phase is decided; read `phases` only in phase "
       "conditions and verdicts."),
    _c("L021", "error", "Probes depend on each other in a cycle",
       "Break the cycle of `${facts.x}` references between probe parameters."),
    _c("L022", "error", "Reads a derived value that is not declared",
       "Declare it under `derive:`, or fix the name (the message suggests the nearest one)."),
    _c("L023", "error", "Reads `violations` outside an evidence that declares it",
       "`violations` exists only inside an evidence with a `violations:` list (its check and message)."),
    _c("L024", "error", "Derived values depend on each other in a cycle",
       "Break the cycle between `derive` values."),
    _c("L025", "warning", "A derived value nothing reads",
       "Read it in a check, message or another derived value, or remove it."),
    _c("L026", "warning", "A `const` probe computes its value from facts",
       "Move the computation to `derive`: a derived value is recomputed at every evaluation and replay "
       "instead of being frozen into the facts snapshot."),
    _c("L027", "error", "An attestation names an undeclared schema",
       "Declare the schema under `schemas:`, or fix its name."),
    _c("L028", "error", "Unknown field of a probe's facts",
       "The fact path names a field the probe kind's fact schema does not have. Use the suggested field; "
       "`policyrun probes` shows each kind's facts."),
    _c("L029", "error", "Compares a fact field with a constant of another type",
       "The field's schema type is known and differs from the constant's (e.g. `totals.passed > \"0\"`). "
       "Compare with a constant of the field's type."),
    _c("L030", "warning", "A phase's checks on test results pass when no test ran",
       "Every check of the phase that reads a test-results fact holds for a report with zero tests "
       "(`<testsuites/>`), so the gate passes when nothing ran. Require tests to have run: "
       "`&& facts.unit.totals.tests > 0`, or an evidence `facts.unit.totals.passed > 0`."),
    _c("L031", "warning", "Reads a command's output without asking how the run ended",
       "The `command` probe lists `ok_exit_codes`, so a failed run is a fact too and its `stdout` is no "
       "answer. Also test `facts.x.ok` (in the check or its `applies_when`), or drop `ok_exit_codes` so a "
       "failing run fails the fact."),
    _c("L032", "warning", "Tests a fail-closed command's `ok` or exit code",
       "Without `ok_exit_codes` a run that does not exit 0 fails the fact, so `facts.x.ok` is missing, not "
       "false, when the program fails (a format-1 rulebook's behaviour changed: docs/migrating.md). Test "
       "`failed(facts.x)` and quote `error_message(facts.x)`, or list `ok_exit_codes: [0]`."),
    _c("L040", "error", "A probe's `when` reads facts or derived values",
       "`when` is decided before collection, so it may read only `inputs`, `vars` and `mode`. To skip a check "
       "because of a fact, give the check an `applies_when`."),
    _c("L041", "error", "Reads `item` outside a fan-out probe",
       "`item` is the element one run of a probe with `for_each` is for: only that probe's `with:` and `key:` "
       "can read it."),
    _c("L042", "error", "Asks about an element of a probe without `for_each`",
       "`failed(facts.p.k)` and `error_code(facts.p['k'])` ask about one element of a fan-out. For a probe "
       "without `for_each`, ask about the whole fact: `failed(facts.p)`."),
    _c("L043", "error", "A probe reads `baseline`",
       "`baseline` is an earlier evaluation (`evaluate --baseline DIR`): derived values, checks, messages and "
       "verdicts can read it, but probes run before evaluation and never see it. Compare in a check instead."),
    _c("L044", "error", "An input alias collides with another input or alias",
       "An input's `aliases` are other names for that input only. Rename the alias, or drop it."),
    _c("O001", "error", "Overlay base not found, or overlay without a name",
       "`extends` must name a rulebook file or a shipped rulebook, and an overlay needs its own `name`."),
    _c("O002", "error", "`extends` cycle or chain too long",
       "Overlays may chain at most 8 rulebooks and never back to themselves."),
    _c("O003", "error", "Overlay disables a check wrongly",
       "Disabling a check needs a `reason`, and the phase must have that check."),
    _c("O004", "error", "Overlay renames a phase wrongly",
       "Rename a base phase as `{id: <new id>, renames: <base phase id>}`: the base must have that phase, and no "
       "other phase the new id."),
    _c("O005", "warning", "Overlay disables a check",
       "Every loosening an overlay makes is listed, so a reader of the overlay sees what policy it no longer "
       "enforces. Keep it (the reason is recorded in the trace), or replace the check instead of disabling it."),
    _c("W001", "error", "Waivers file does not match its schema",
       "Fix the waivers file as the message says (docs/waivers.md has the format)."),
    _c("W002", "error", "Waiver names an unknown phase or check",
       "Fix the phase or check id, or remove the waiver."),
    _c("W003", "warning", "Waiver has expired",
       "An expired waiver no longer applies. Fix what it waived, or renew it with a new `expires` date and "
       "reason."),
    _c("K001", "error", "Test file names a rulebook that cannot be loaded",
       "A test file's `rulebook:` is a path relative to the test file, or a shipped name. Fix the path, or the "
       "rulebook (`policyrun lint` on it lists its errors)."),
    _c("K002", "error", "Test case names something the rulebook does not have",
       "A case's mode, inputs, facts, or expected phases and checks must exist in the rulebook it tests. Use the "
       "suggested name, or remove the entry."),
    _c("K003", "error", "Test file names a file that is missing or unreadable",
       "Snapshot (`facts_files`) and `waivers` paths are relative to the test file. Fix the path, or write the "
       "snapshot again with `policyrun collect`."),
    _c("R001", "error", "Report template does not compile",
       "Fix the Jinja2 syntax at the template line (or the unknown filter or test)."),
    _c("R002", "error", "Report template is missing",
       "Template paths are relative to the rulebook file. Fix the path or add the template."),
    _c("R007", "error", "Report template policyrun will not read",
       "Templates must be regular files of bounded size inside the rulebook's folder. Move the template "
       "beside the rulebook, or pass one with `policyrun report --template`."),
]

LINT_CODES: dict[str, LintCode] = {c.code: c for c in _TABLE}


def describe(code: str) -> LintCode:
    """The code's entry; a code not in the table (a third-party probe's, say) gets a generic one."""
    return LINT_CODES.get(code) or LintCode(code, "error", f"policyrun lint {code}",
                                            f"See the finding's message for {code}.")


def help_markdown(entry: LintCode) -> str:
    return f"**{entry.code}** ({entry.severity}): {entry.short}.\n\n{entry.help}\n\nSee docs/lint.md."
