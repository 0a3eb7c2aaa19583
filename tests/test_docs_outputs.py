"""The outputs README.md and docs/*.md show are what the commands print today (tests/docs_outputs.py
says how a page marks them); every block that shows a prompt is either checked or says why not,
and every sha256 a page shows is in a checked block."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import docs_outputs
import docs_sessions
from docs_outputs import PAGES, ROOT, blocks, check_page, matches, policyrun_argv, refreshed, shown_commands

@pytest.mark.parametrize("page", [p for p in PAGES if any(not b.not_run for b in blocks(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_shown_outputs_are_printed(page: Path) -> None:
    outcome = check_page(page)
    assert not outcome.differences, (
        "\n\n".join(outcome.differences)
        + f"\n\nIf the new output is right, refresh the page: python -m tests.docs_outputs --update "
          f"{page.relative_to(ROOT)}")
    if outcome.skipped:
        pytest.skip("; ".join(outcome.skipped))


def _fenced(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) content line ranges (0-based) of every fenced block of a page."""
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```\w*\s*$", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j] == f"{fence.group(1)}```")
            found.append((i + 1, end))
            i = end
        i += 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shown_prompt_is_checked_or_says_why_not(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").split("\n")
    marked = {b.line for b in blocks(page)}  # the 1-based fence line is the 0-based first content line
    unmarked = [f"{page.relative_to(ROOT)}:{first}" for first, end in _fenced(lines)
                if any(line.strip().startswith("$ ") for line in lines[first:end]) and first not in marked]
    assert not unmarked, ("blocks showing `$ ` commands need a <!-- docs-output: SESSION --> marker (the test "
                          "runs them) or <!-- docs-output: not run: REASON -->: " + ", ".join(unmarked))


def _checked_elsewhere(reason: str, page: Path) -> bool:
    """A block marked `not run: checked by tests/FILE.py::TEST (...)` whose output another test
    compares (normalising what varies, like durations): that test exists and reads this page."""
    named = re.match(r"checked by (tests/[\w/]+\.py)::(\w+)", reason)
    if named is None or not (ROOT / named.group(1)).is_file():
        return False
    source = (ROOT / named.group(1)).read_text(encoding="utf-8")
    return f"def {named.group(2)}(" in source and page.name in source


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_digest_shown_is_in_a_checked_block(page: Path) -> None:
    """Auditors compare hashes: a sha256 on a page is one a command printed, checked above."""
    lines = page.read_text(encoding="utf-8").split("\n")
    checked = {line for b in blocks(page) if b.not_run is None for s in b.steps for line in range(s.first, s.last)}
    # A command line that passes a digest (verify --rulebook-sha256 HEX) counts when its checked
    # output prints that digest back.
    digest = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
    checked |= {s.first - 1 for b in blocks(page) if b.not_run is None for s in b.steps
                if s.first > 0 and all(d in "\n".join(lines[s.first:s.last]) for d in digest.findall(lines[s.first - 1]))}
    for b in blocks(page):  # 0-based lines of a block whose output another named test compares
        if b.not_run is not None and _checked_elsewhere(b.not_run, page):
            end = next(j for j in range(b.line, len(lines)) if lines[j] == f"{b.indent}```")
            checked.update(range(b.line, end))
    stray = [f"{page.relative_to(ROOT)}:{i + 1}" for i, line in enumerate(lines)
             if re.search(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])", line) and i not in checked]
    assert not stray, f"sha256 digests outside a checked output block: {stray}"


def _usage_error(argv: list[str]) -> str | None:
    """What the CLI's parser says about `argv` (nothing runs), or None when it accepts it."""
    from policyrun.cli import _build

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _build(argv).parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1]
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_policyrun_command_shown_is_accepted_by_the_cli(page: Path) -> None:
    """Commands that cannot run here (they need ../vllm, a GPU) still name real commands and options."""
    wrong = []
    for line, command in shown_commands(page):
        argv = policyrun_argv(command)
        error = None if argv is None else _usage_error(argv)
        if error:
            wrong.append(f"{page.relative_to(ROOT)}:{line}: {command}\n    {error}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_policyrun_command_named_in_prose_is_accepted_by_the_cli(page: Path) -> None:
    """`policyrun ...` in running text: often a fragment (`policyrun explain --failures`), so
    missing arguments are fine, but every command, option and choice it names must exist."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    wrong = []
    for m in re.finditer(r"`((?:[A-Z_]+=\S+ )*policyrun [^`]+)`", text):
        command = m.group(1)
        if "[" in command or "..." in command or "…" in command:
            continue  # a synopsis
        argv = policyrun_argv(command)
        error = None if argv is None else _usage_error(argv)
        if error and "the following arguments are required" not in error:
            wrong.append(f"{page.relative_to(ROOT)}: `{command}`\n    {error}")
    assert not wrong, "\n".join(wrong)


def test_a_misspelt_option_in_a_shown_command_is_caught() -> None:
    assert _usage_error(policyrun_argv("policyrun evaluate x --mode m --facts f.json --no-timestamps") or [])
    assert _usage_error(policyrun_argv("E2E_BACKEND=cuda policyrun evaluate e2e-gate.yaml --mode preflight") or []) is None
    assert policyrun_argv("policyrun completion bash|zsh|fish") is None
    assert policyrun_argv("policyrun report t.json --format sarif | jq -c .") == ["report", "t.json", "--format", "sarif"]


# --- the mechanism itself --------------------------------------------------------------------------

def test_elision_matches_left_out_lines_and_text_only() -> None:
    actual = ["PHASE  STATUS", "A  PASS", "B  SKIPPED", "C  SKIPPED", "verdict: complete (exit 0)"]
    assert matches(["PHASE  STATUS", "A  PASS", "...", "verdict: complete (exit 0)"], actual)
    assert matches(["PHASE  STATUS", "...", "verdict: ... (exit 0)"], actual)
    assert not matches(["PHASE  STATUS", "...", "verdict: ... (exit 2)"], actual)
    assert not matches(["PHASE  STATUS", "A  PASS"], actual)  # no elision: every line is shown


def test_refresh_keeps_the_elisions_around_a_changed_line() -> None:
    shown = ["head", "  sha256 aaaa", "...", "verdict: ... (exit 2)"]
    actual = ["head", "  sha256 bbbb", "x", "y", "verdict: blocked (exit 2)"]
    assert refreshed(shown, actual) == ["head", "  sha256 bbbb", "...", "verdict: ... (exit 2)"]


def test_a_stale_output_is_reported_with_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-output: checkout -->\n```console\n$ policyrun lint upgrade-gpu-version\n"
                    "1 file(s) checked: 0 error(s), 7 warning(s)\n```\n")
    monkeypatch.setattr(docs_outputs, "ROOT", tmp_path)
    monkeypatch.setitem(docs_sessions.SESSIONS, "checkout", lambda root: root)
    outcome = check_page(page)
    [difference] = outcome.differences
    assert "page.md:4: `policyrun lint upgrade-gpu-version` prints otherwise" in difference
    assert "+1 file(s) checked: 0 error(s), 0 warning(s)" in difference
    docs_outputs.update(outcome)
    assert "1 file(s) checked: 0 error(s), 0 warning(s)\n```" in page.read_text()
    assert not check_page(page).differences


def test_a_file_left_in_the_walkthrough_checkout_is_reported(tmp_path: Path) -> None:
    """docs/first-rulebook.md runs in a clean git checkout: an output git does not ignore fails."""
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-output: first-rulebook cwd=policyrun -->\n```console\n$ touch stray.txt\n"
                    "$ mkdir -p x/.policyrun && touch x/.policyrun/trace.json\n```\n")
    outcome = check_page(page)
    [left] = outcome.differences
    assert "left files in the checkout that git does not ignore" in left
    assert "?? stray.txt" in left and ".policyrun" not in left  # .policyrun/ is ignored at any depth
