"""Every error code policyrun emits, lint findings and run-time errors alike, in one table.

Each code has one meaning, a family (its letter), a default severity, a one-line description, how
to fix it, and the docs section that explains it. SARIF rule metadata (`shortDescription`, `help`),
the `--format github` titles, docs/lint.md and docs/errors.md all read this table, and
tests/test_codes.py keeps it whole: every code the package constructs is here, every entry is
used, every docs link names an existing heading. A finding carries its own severity; the one here
is the code's default, shown to code scanning. `lint` marks the codes `policyrun lint` reports; the
others are run-time errors, which exit 3 like every `PolicyrunError`.
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
    lint: bool = True  # reported by `policyrun lint` (else a run-time error only)
    docs: str = ""  # "page.md#heading-anchor" under docs/; empty: the family's default

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]][0]

    @property
    def docs_link(self) -> str:
        return self.docs or FAMILIES[self.code[0]][1]


Code = LintCode

# Each prefix names one family, with the docs section that explains most of its codes.
FAMILIES: dict[str, tuple[str, str]] = {
    "Y": ("YAML and file reading", "lint.md#policyrun-lint"),
    "S": ("rulebook schema", "language.md#the-rulebook-language"),
    "X": ("CEL expressions", "language.md#cel-in-one-minute"),
    "L": ("lint: static checks of a rulebook", "lint.md#policyrun-lint"),
    "O": ("overlays", "overlays.md#overlays-adapting-a-rulebook-without-forking-it"),
    "W": ("waivers", "waivers.md#waivers-governed-exceptions-with-an-owner-and-an-expiry"),
    "K": ("rulebook tests (*.test.yaml)", "testing-rulebooks.md#testing-rulebooks-policyrun-test"),
    "R": ("reports and report templates", "reports.md#templates"),
    "U": ("usage: command-line options, inputs, paths", "cli.md#command-line-reference"),
    "C": ("collection", "cli.md#collect"),
    "F": ("facts snapshots", "security.md#bounds-on-what-policyrun-reads"),
    "T": ("traces", "security.md#bounds-on-what-policyrun-reads"),
    "G": ("the evaluation guard", "semantics.md#cost-bounds"),
    "V": ("verify", "auditors.md#verify-a-trace"),
    "A": ("attestations and signing keys", "auditors.md#signing-dsse-envelopes"),
    "P": ("probe plugins", "cli.md#probes-schema"),
    "E": ("internal", "cli.md#exit-codes"),
}


def _c(code: str, severity: Severity, short: str, help: str, docs: str = "") -> LintCode:
    return LintCode(code, severity, short, help, True, docs)


def _r(code: str, short: str, help: str, docs: str = "") -> LintCode:
    """A run-time error (exit 3), never a lint finding."""
    return LintCode(code, "error", short, help, False, docs)


_TABLE = [
    # --- reported by `policyrun lint` (and, at error level, refused by evaluate, collect and test) ---
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
       "The file is not UTF-8. Re-save it as UTF-8.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y005", "error", "Document expands to too many nodes",
       "Aliases expand the document past policyrun's node bound (an alias bomb). Write the repeated data out "
       "or share it through `vars` or `derive`.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y006", "error", "File larger than 4 MiB",
       "Rulebooks are policy a person reads. Move data into facts (a probe) or an attestation file.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y007", "error", "File cannot be read",
       "Check the path and its permissions; it must be a regular file.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y008", "error", "Nesting too deep",
       "Lists and mappings nest deeper than policyrun's bound. Flatten the structure.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y009", "error", "Number too long",
       "A number has more characters than policyrun's bound (100). Quote it if it is an identifier, or "
       "fix what wrote it.",
       docs="security.md#bounds-on-what-policyrun-reads"),
    _c("Y010", "error", "A `<<` merge key whose value is not a mapping",
       "`<<` merges a mapping, or a list of mappings, into the mapping it sits in (`<<: *name`). Merge a "
       "mapping, or write the keys out."),
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
       "inside an evidence, precondition or stop condition with a `violations:` list."),
    _c("X004", "error", "Empty or unterminated `${...}`",
       "An interpolation has no expression or no closing brace. Write `${ expr }`, or `$${` for a literal."),
    _c("X005", "error", "Expression longer than 20,000 characters",
       "An expression is bounded so that compiling it stays cheap. Move parts of the computation into `derive` "
       "values (each named once and read by name) or into a probe.", docs="language.md#cost-bounds"),
    _c("L001", "error", "Reads an undeclared input",
       "Declare the input under `inputs:`, or fix the name.",
       docs="language.md#inputs"),
    _c("L002", "error", "Reads an undeclared var",
       "Declare it under `vars:`, or fix the name.",
       docs="language.md#vars"),
    _c("L003", "error", "Reads facts of an undeclared probe",
       "Declare a probe with that id under `probes:`, or fix the id (the message suggests the nearest one).",
       docs="language.md#probes"),
    _c("L004", "error", "Unknown phase, or reads a phase not decided yet",
       "Phases are decided in rulebook order: a condition can read `phases.X` only for an earlier phase X.",
       docs="language.md#phases"),
    _c("L005", "error", "Duplicate phase or verdict id",
       "Phase and verdict ids must be unique. Rename one.",
       docs="language.md#phases"),
    _c("L006", "error", "Duplicate check id in a phase",
       "Preconditions, stop conditions and evidence of one phase need distinct ids. Rename one.",
       docs="language.md#phases"),
    _c("L007", "error", "A mode lists a phase that does not exist",
       "Fix the phase id in the mode's `phases:` list, or add the phase.",
       docs="language.md#modes"),
    _c("L008", "error", "`requires` cycle, self-reference or a later phase",
       "A phase may require only earlier phases. Reorder the phases or drop the requirement.",
       docs="language.md#phases"),
    _c("L009", "error", "A phase no mode runs",
       "Add the phase to a mode's `phases:` list, or remove it.",
       docs="language.md#modes"),
    _c("L010", "warning", "A probe no check reads",
       "The probe would run for nothing. Read its facts in a check or derived value, or remove it.",
       docs="language.md#probes"),
    _c("L011", "error", "Unknown probe kind",
       "`policyrun probes` lists the kinds. Fix the `uses:` name, or install the package that provides it.",
       docs="cli.md#probes-schema"),
    _c("L012", "error", "Probe parameters do not match the kind's schema",
       "`policyrun probes` shows each kind's parameters. Fix the `with:` mapping.",
       docs="cli.md#probes-schema"),
    _c("L013", "error", "A probe's or derived value's `modes` names an unknown mode",
       "Use a mode declared under `modes:`.",
       docs="language.md#modes"),
    _c("L014", "error", "`on_missing` names an unknown mode",
       "Use a mode declared under `modes:`.",
       docs="language.md#modes"),
    _c("L015", "error", "An input default does not match its type",
       "Change the default, or the input's `type`.",
       docs="language.md#inputs"),
    _c("L016", "warning", "An input is both required and defaulted",
       "A default makes `required` meaningless. Drop one of them.",
       docs="language.md#inputs"),
    _c("L017", "error", "A mode lists a phase twice",
       "Remove the repeated phase id from the mode.",
       docs="language.md#modes"),
    _c("L018", "warning", "A mode lists phases out of rulebook order",
       "Phases always run in rulebook order; list them in that order so the mode reads as it runs.",
       docs="language.md#modes"),
    _c("L019", "error", "Unknown permission",
       "Use a permission policyrun knows (docs/language.md, modes).",
       docs="language.md#modes"),
    _c("L020", "error", "Probe parameters or a derived value read `phases`",
       "Facts and derived values are computed before any phase is decided; read `phases` only in phase "
       "conditions and verdicts.",
       docs="semantics.md#derived-values"),
    _c("L021", "error", "Probes depend on each other in a cycle",
       "Break the cycle of `${facts.x}` references between probe parameters.",
       docs="semantics.md#derived-values"),
    _c("L022", "error", "Reads a derived value that is not declared",
       "Declare it under `derive:`, or fix the name (the message suggests the nearest one).",
       docs="language.md#derive"),
    _c("L023", "error", "Reads `violations` outside a check that declares it",
       "`violations` exists only inside an evidence, precondition or stop condition with a `violations:` list "
       "(its check or `when`, message or blocker, and next action).",
       docs="language.md#evidence-that-lists-what-is-wrong"),
    _c("L024", "error", "Derived values depend on each other in a cycle",
       "Break the cycle between `derive` values.",
       docs="semantics.md#derived-values"),
    _c("L025", "warning", "A derived value nothing reads",
       "Read it in a check, message or another derived value, or remove it.",
       docs="language.md#derive"),
    _c("L026", "warning", "A `const` probe computes its value from facts",
       "Move the computation to `derive`: a derived value is recomputed at every evaluation and replay "
       "instead of being frozen into the facts snapshot.",
       docs="language.md#derive"),
    _c("L027", "error", "An attestation names an undeclared schema",
       "Declare the schema under `schemas:`, or fix its name.",
       docs="language.md#schemas-and-report"),
    _c("L028", "error", "Unknown field of a probe's facts",
       "The fact path names a field the probe kind's fact schema does not have. Use the suggested field; "
       "`policyrun probes` shows each kind's facts.",
       docs="language.md#cel-in-one-minute"),
    _c("L029", "error", "Compares a fact field with a constant of another type",
       "The field's schema type is known and differs from the constant's (e.g. `totals.passed > \"0\"`). "
       "Compare with a constant of the field's type.",
       docs="language.md#cel-in-one-minute"),
    _c("L030", "warning", "A phase's checks on test results pass when no test ran",
       "Every check of the phase that reads a test-results fact holds for a report with zero tests "
       "(`<testsuites/>`), so the gate passes when nothing ran. Require tests to have run: "
       "`&& facts.unit.totals.tests > 0`, or an evidence `facts.unit.totals.passed > 0`.",
       docs="lint.md#l030-a-gate-an-empty-test-report-passes"),
    _c("L031", "warning", "Reads a command's output without asking how the run ended",
       "The `command` probe lists `ok_exit_codes`, so a failed run is a fact too and its `stdout` is no "
       "answer. Also test `facts.x.ok` (in the check or its `applies_when`), or drop `ok_exit_codes` so a "
       "failing run fails the fact.",
       docs="migrating.md#the-command-probe-fails-closed"),
    _c("L032", "warning", "Tests a fail-closed command's `ok` or exit code",
       "Without `ok_exit_codes` a run that does not exit 0 fails the fact, so `facts.x.ok` is missing, not "
       "false, when the program fails (a format-1 rulebook's behaviour changed: docs/migrating.md). Test "
       "`failed(facts.x)` and quote `error_message(facts.x)`, or list `ok_exit_codes: [0]`.",
       docs="migrating.md#the-command-probe-fails-closed"),
    _c("L040", "error", "A probe's `when` reads facts or derived values",
       "`when` is decided before collection, so it may read only `inputs`, `vars` and `mode`. To skip a check "
       "because of a fact, give the check an `applies_when`.",
       docs="language.md#conditional-probes-when"),
    _c("L041", "error", "Reads `item` outside a fan-out probe",
       "`item` is the element one run of a probe with `for_each` is for: only that probe's `with:` and `key:` "
       "can read it.",
       docs="language.md#fan-out-for_each"),
    _c("L042", "error", "Asks about an element of a probe without `for_each`",
       "`failed(facts.p.k)` and `error_code(facts.p['k'])` ask about one element of a fan-out. For a probe "
       "without `for_each`, ask about the whole fact: `failed(facts.p)`.",
       docs="language.md#fan-out-for_each"),
    _c("L043", "error", "A probe reads `baseline`",
       "`baseline` is an earlier evaluation (`evaluate --baseline DIR`): derived values, checks, messages and "
       "verdicts can read it, but probes run before evaluation and never see it. Compare in a check instead.",
       docs="language.md#comparing-with-an-earlier-evaluation-baseline"),
    _c("L044", "error", "An input alias collides with another input or alias",
       "An input's `aliases` are other names for that input only. Rename the alias, or drop it.",
       docs="overlays.md#renaming-a-phase-aliasing-an-input"),
    _c("L045", "error", "Reads a field the violations' rows do not declare",
       "A check with `row:` declares the fields of its `violations` rows once; its check, message, blocker and "
       "next action may read only those. Read a declared field, or add it to `row.fields` (and to the rows).",
       docs="language.md#rows-violations-with-fields-and-a-location"),
    _c("O001", "error", "Overlay base not found",
       "`extends` must name a rulebook file (written as a path) or a shipped rulebook."),
    _c("O002", "error", "`extends` cycle or chain too long",
       "Overlays may chain at most 8 rulebooks and never back to themselves."),
    _c("O003", "error", "Overlay disables a check wrongly",
       "Disabling a check needs a `reason`, and the phase must have that check."),
    _c("O004", "error", "Overlay renames a phase wrongly",
       "Rename a base phase as `{id: <new id>, renames: <base phase id>}`: the base must have that phase, and no "
       "other phase the new id.",
       docs="overlays.md#renaming-a-phase-aliasing-an-input"),
    _c("O005", "warning", "Overlay disables a check",
       "Every loosening an overlay makes is listed, so a reader of the overlay sees what policy it no longer "
       "enforces. Keep it (the reason is recorded in the trace), or replace the check instead of disabling it."),
    _c("O006", "error", "Overlay without a name",
       "An overlay needs its own `name`: the trace says which policy ran. Add `name:`."),
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
       "beside the rulebook, or pass one with `policyrun report TRACE --template FILE`."),
    # --- run-time errors: exit 3, printed as `[file:line:col: ]CODE message` ---
    _r("A001", "Signing support is not installed",
       "Signing and checking signatures need the `cryptography` package: `pip install 'policyrun[sign]'`."),
    _r("A002", "A signing or verifying key cannot be used",
       "The key cannot be read, is not PEM, is encrypted without `POLICYRUN_SIGN_KEY_PASSPHRASE` (or the other way "
       "round), is not ed25519, is private where a public key is needed, or is missing for a DSSE envelope. "
       "Follow the message; `openssl genpkey -algorithm ed25519` makes a key."),
    _r("A003", "A verification summary cannot be made from this trace",
       "A VSA needs a repository commit (a subject), a `generated_at` (no `--no-timestamp`) and an absolute "
       "resource URI. Use `--format in-toto`, evaluate again, or pass `--resource-uri`.",
       docs="auditors.md#--format-vsa-a-slsa-verification-summary"),
    _r("C001", "`--only` names a probe that is not collected",
       "Name a probe of the rulebook that the mode collects; the message lists them."),
    _r("C002", "Collection was asked for a mode the rulebook does not define",
       "Pass one of the modes the message lists. (The command line refuses an unknown mode first, as U002; "
       "C002 is what the collection API says to a program that calls it directly.)", docs="language.md#modes"),
    _r("E000", "An error that carries no code of its own",
       "Every error policyrun raises should carry a code; this one does not. The message says what to do; "
       "please report the missing code."),
    _r("F001", "Facts file cannot be read",
       "The facts snapshot must be a readable regular file of bounded size, in UTF-8. Check the path."),
    _r("F002", "Facts file is not acceptable JSON",
       "Facts are evidence: invalid JSON, NaN or Infinity, duplicate keys, over-long numbers and deep nesting "
       "are refused at their line and column. Collect the snapshot again, or fix what wrote it."),
    _r("F003", "Facts file has an unknown format version or does not match its schema",
       "Write the snapshot with `policyrun collect` of this policyrun version."),
    _r("F004", "Facts snapshots disagree",
       "Two snapshots give the same fact (or host) different values, or one scopes a fact to a host and another "
       "to the run. Pass one snapshot of each host, collected with the same rulebook.",
       docs="semantics.md#hosts"),
    _r("F005", "Facts do not match the rulebook, mode and inputs",
       "The snapshot was collected with other probe parameters (another rulebook, mode or inputs). Collect again "
       "with the command the message gives, or pass `--allow-stale-facts` to evaluate old facts on purpose.",
       docs="semantics.md#replaying-facts"),
    _r("G001", "The evaluation failed outside any expression",
       "A policyrun defect: the guarded evaluation stopped where no expression was running. Please report it."),
    _r("G002", "Too many expressions ran past their limits",
       "More than 16 expressions were stopped at their bounds, so the evaluation is refused. Fix the rulebook's "
       "expressions (see the trace of a smaller case)."),
    _r("G003", "A derived value was computed outside the guard",
       "A policyrun defect: derived values are computed only under the guard. Please report it.",
       docs="security.md#derived-values-one-guarded-stage-and-a-total-budget"),
    _r("G004", "The guarded computation ran past its deadline",
       "Collection or evaluation took longer than the total budget and was stopped. Make the expressions "
       "cheaper, or split the rulebook.",
       docs="security.md#derived-values-one-guarded-stage-and-a-total-budget"),
    _r("P001", "A probe plugin cannot be used",
       "A package registered under the `policyrun.probes` entry-point group failed to import or does not "
       "implement the probe protocol. Fix or uninstall it."),
    _r("R003", "Report template failed while rendering",
       "The template raised an error at the reported template line (an undefined name, a wrong type, a template "
       "that includes itself). Templates see `report`, `trace` and `context`."),
    _r("R004", "Unknown report format",
       "Choose a format the message lists (`policyrun report --help`)."),
    _r("R005", "Report output cannot be written",
       "`-o` names a file policyrun cannot write. Choose another path.",
       docs="security.md#output-files"),
    _r("R006", "Template context file cannot be used",
       "`--context` must be a readable YAML or JSON file of bounded size holding a mapping."),
    _r("R008", "Report template ran past a rendering bound",
       "Rendering is bounded in time, output and the size of what a template builds. Make the template build "
       "less.", docs="security.md#how-template-rendering-is-bounded"),
    _r("R009", "A report option given without its format",
       "Options of one format (`--template`, `--against`, `--junit-*`, `--sarif-*`, `--sign-key`, ...) apply only "
       "when that format is written. Add the format to `--format`, or drop the option.",
       docs="reports.md#policyrun-report"),
    _r("T001", "Trace cannot be read",
       "The trace must be a readable regular file of bounded size, in UTF-8. Check the path."),
    _r("T002", "Trace is not acceptable JSON",
       "Invalid JSON, NaN or Infinity, duplicate keys, over-long numbers and deep nesting are refused at their "
       "line and column. Evaluate again to get a genuine trace."),
    _r("T003", "Trace has an unknown format version or does not match its schema",
       "Read the trace with the policyrun version that wrote it, or evaluate again."),
    _r("T004", "`explain` names a phase the trace does not have",
       "Use one of the phases the message lists.", docs="reports.md#policyrun-explain"),
    _r("T005", "Trace is inconsistent",
       "Its statuses contradict its own checks (edited by hand?). Evaluate again; `report --force` renders it "
       "under a warning banner, but it is never attested.", docs="security.md#facts-and-traces-that-lie"),
    _r("T006", "Trace would be too large to read back",
       "Nothing was written: report, explain and verify read traces of bounded size. Split the rulebook's "
       "checks, or have them read fewer large values."),
    _r("U001", "Rulebook not found",
       "Pass a rulebook path (`./NAME` for a file in this folder) or a shipped rulebook name; `verify` needs the "
       "rulebook the trace names (`--rulebook FILE`).",
       docs="security.md#rulebook-resolution-and-the-mcp-servers-roots"),
    _r("U002", "Mode not given or unknown",
       "A rulebook with several modes needs `--mode`; use one of the modes the message lists.",
       docs="language.md#modes"),
    _r("U003", "Invalid option value or combination of options",
       "An option's value has the wrong form (`--set key=value`, `--as-of YYYY-MM-DD`, a hex digest, a host "
       "label), or options are combined in a way that cannot work. Follow the message."),
    _r("U004", "An input's value has the wrong type",
       "Give the value the input's declared `type` (or one of its `enum` values).", docs="language.md#inputs"),
    _r("U005", "A required input is missing",
       "Pass it with `--set NAME=VALUE` or `--inputs FILE` (for `verify`, the values of masked secret inputs).",
       docs="language.md#inputs"),
    _r("U006", "Unknown input, an input given twice, or an inputs file that is not a mapping",
       "Name inputs the rulebook declares (the message suggests the nearest), each once under one of its names; "
       "an inputs file maps input names to values.", docs="language.md#inputs"),
    _r("U007", "Output cannot be written",
       "`--out`, `-o` or the evidence path cannot be written (not a folder, no permission, locked by another "
       "policyrun). Choose another path.", docs="security.md#output-files"),
    _r("U008", "Unknown probe kind",
       "`policyrun probes` lists the kinds; the message suggests the nearest.", docs="cli.md#probes-schema"),
    _r("U009", "A path given holds nothing to work on",
       "`lint` found no `*.yaml` in a folder, or `test` no such test file or no `*.test.yaml` under the paths. "
       "Check the paths.", docs="cli.md#lint-test"),
    _r("U010", "`-k` expression is invalid or selects no case",
       "Terms are text in case names, combined with not, and, or and parentheses.",
       docs="testing-rulebooks.md#testing-rulebooks-policyrun-test"),
    _r("U020", "A test case's `merge` cannot be applied",
       "`merge` names facts the case states; state the whole fact when it cannot be merged into the snapshot.",
       docs="testing-rulebooks.md#testing-rulebooks-policyrun-test"),
    _r("U030", "The MCP SDK is not installed or cannot be imported",
       "`pip install 'policyrun[mcp]'`.", docs="agents.md#install-and-start"),
    _r("U031", "`mcp --cwd` or `--root` is not a folder",
       "Pass existing folders the tools may work in.", docs="agents.md#install-and-start"),
    _r("U032", "A path outside the MCP server's roots",
       "The tools read and write only under `--cwd` and each `--root`. Start the server with another `--root`.",
       docs="security.md#rulebook-resolution-and-the-mcp-servers-roots"),
    _r("U040", "Evidence schema not declared or not usable",
       "`policyrun evidence RULEBOOK` lists the declared schemas; a schema file must be readable, and a "
       "skeleton needs the derived value the schema names.", docs="cli.md#evidence"),
    _r("U041", "Evidence file cannot be checked",
       "The file's extension must say its format (.yaml, .yml, .json, .toml), and it must be readable and "
       "parse.", docs="cli.md#evidence"),
    _r("U042", "Evidence skeleton cannot be computed",
       "The derived value that prefills the skeleton failed in this mode; give the facts or inputs it needs.",
       docs="cli.md#evidence"),
    _r("U043", "Evidence file exists",
       "policyrun never overwrites evidence someone may have written; pass `--force` to replace it.",
       docs="cli.md#evidence"),
    _r("U050", "`--cluster ray` needs Ray",
       "`pip install 'policyrun[cluster]'`, or collect on each node with `--host-label` and merge the snapshots.",
       docs="cell-preflight.md#collecting-a-cell-with-ray"),
    _r("U051", "No Ray cluster to collect on",
       "Start one (`ray start --head`) or pass its address as `--cluster ray=HOST:PORT`.",
       docs="cell-preflight.md#collecting-a-cell-with-ray"),
    _r("U060", "`--baseline` folder is not a usable earlier evaluation",
       "The folder must hold the `trace.json`, `manifest.json` (and `facts.json`) of one `evaluate --out`, "
       "unchanged since. Pass such a folder.", docs="cli.md#comparing-with-a-baseline"),
    _r("V001", "Rulebook differs from the one the trace records",
       "Pass the exact rulebook file that produced the trace (its sha256 is in the message)."),
    _r("V002", "Overlay chain differs from the one the trace records",
       "Pass the overlay and base files the trace was evaluated with."),
    _r("V003", "Facts differ from those the trace was evaluated over",
       "Pass the snapshot(s) whose digest the trace records as `facts_sha256`."),
    _r("V004", "`verify` is missing the facts or the trace it needs",
       "Pass the facts snapshot with `--facts FILE` (and, for a verification summary, the trace with `--trace`)."),
    _r("V005", "Not a verifiable signed statement",
       "An unsigned statement, or a DSSE payload that is not acceptable JSON, is refused: verify a signed one "
       "(`report --sign-key`), or the trace it was made from.", docs="auditors.md#verifying-a-signed-statement"),
    _r("V006", "The signed statement is not policyrun's",
       "`--trace` and `--facts` check statements policyrun wrote (`--format in-toto` or `vsa`).",
       docs="auditors.md#verifying-a-signed-statement"),
    _r("V007", "Waivers file differs from the one the trace records",
       "Pass the waivers file the evaluation used (or leave `--waivers` out when it used none).",
       docs="auditors.md#exceptions-and-the-waivers-file"),
    _r("V008", "A trace evaluated with `--baseline` cannot be verified",
       "`verify` does not re-evaluate against a baseline; evaluate again with the same `--facts` and "
       "`--baseline`.", docs="cli.md#verify"),
    _r("V009", "`--key` or `--trace` given for a trace",
       "They apply to a DSSE envelope; verify a trace with `--facts`.",
       docs="auditors.md#verifying-a-signed-statement"),
]

CODES: dict[str, LintCode] = {c.code: c for c in _TABLE}
# The codes `policyrun lint` reports (SARIF rules, docs/lint.md); the rest are run-time errors.
LINT_CODES: dict[str, LintCode] = {c.code: c for c in _TABLE if c.lint}


def describe(code: str) -> LintCode:
    """The code's entry; a code not in the table (a third-party probe's, say) gets a generic one."""
    return CODES.get(code) or LintCode(code, "error", f"policyrun lint {code}",
                                       f"See the finding's message for {code}.")


def help_markdown(entry: LintCode) -> str:
    where = f"docs/{entry.docs_link}" if entry.code in CODES else "docs/lint.md"
    return f"**{entry.code}** ({entry.severity}): {entry.short}.\n\n{entry.help}\n\nSee {where}."
