"""Every command output shown in README.md and docs/*.md, run again and compared with the page.

A fenced block is checked when the line above it is a marker naming a *session*:

    <!-- docs-output: SESSION [cwd=DIR] [before=STEP,...] [$ COMMAND] -->

- Without `$ COMMAND`, the block is a terminal session: each line starting with `$ ` is a command
  (a line ending in a backslash continues it), the lines after it, up to the next `$ `, are what it
  printed (stdout and stderr together). With `$ COMMAND` in the marker, the whole block is what
  that command printed (for a page that names the command in its prose).
- Blocks of one page that name the same session run in page order in one temporary folder, set up
  by `SESSIONS[SESSION]` (tests/docs_sessions.py); `cwd=` is relative to that folder, and `cd` in a
  block carries over to the session's next block. `before=` runs named steps (`STEPS`: writing the
  page's rulebook, forging a trace for the auditors' page, a process without the `mcp` extra)
  before the block, or around it.
- `policyrun` commands run in this process, with the clock fixed at `NOW` (a trace's
  `generated_at`, and so a signature over it, is the same on every run); any other command runs in
  a shell. A line that is only `...` in a shown output stands for any number of lines left out, and
  `...` inside a line for any text; nothing else is normalised.
- `<!-- docs-output: not run: REASON -->` marks a block of commands that cannot run here (a GPU
  node, a network install); `tests/test_docs_outputs.py` requires one marker or the other on every
  block that shows a `$ ` prompt, and that every sha256 a page shows is in a checked block.

`python -m tests.docs_outputs [--update] [PAGE...]` (from the repository root) runs the pages and
prints a diff for each shown output that differs; with `--update` it writes the new outputs into
the pages, keeping the `...` elisions where the surrounding lines still match.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from unittest import mock

# Run as `python -m tests.docs_outputs` too, where tests/ is not on the path as pytest puts it.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_sessions import SESSIONS, STEPS, Session, Unavailable, git  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOW = "2026-12-02T18:03:50Z"
# Who ran an evaluation, where (a trace's `run`): fixed like the clock, so pages read the same on
# every machine.
RUN = {"user": "ada", "hostname": "build-7", "policyrun_version": "0.1.0", "python_version": "3.11.7",
       "platform": "Linux-6.8.0-x86_64-with-glibc2.36"}
ENV = {"COLUMNS": "160", "PYTHONUNBUFFERED": "1"}

MARKER = re.compile(r"^\s*<!-- docs-output: (.*?) -->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


@dataclass
class Step:
    command: str
    shown: list[str]
    first: int  # index (in the page's lines) of the first shown output line
    last: int   # one past the last
    indent: str = ""  # the fenced block's indentation (a block inside a list item)


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    session: str
    cwd: str | None
    before: list[str]
    indent: str
    steps: list[Step]
    not_run: str | None = None


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The marked fenced blocks of a page, in order."""
    lines = (page.read_text(encoding="utf-8") if text is None else text).split("\n")
    found: list[Block] = []
    inside: str | None = None  # the closing fence of the block being skipped (a marker shown as text)
    for i, line in enumerate(lines):
        if inside is not None:
            inside = None if line == inside else inside
            continue
        fenced = FENCE.match(line)
        if fenced:
            inside = f"{fenced.group(1)}```"
            continue
        marker = MARKER.match(line)
        if not marker:
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise ValueError(f"{page.name}:{i + 1}: a docs-output marker must be right above a fenced block")
        indent = fence.group(1)
        end = next(j for j in range(i + 2, len(lines)) if lines[j] == f"{indent}```")
        body = [raw[len(indent):] for raw in lines[i + 2:end]]
        spec = marker.group(1)
        if spec.startswith("not run:"):
            found.append(Block(page, i + 2, "", None, [], indent, [], not_run=spec[len("not run:"):].strip()))
            continue
        head, _, command = spec.partition("$ ")
        words = head.split()
        options = dict(w.split("=", 1) for w in words[1:])
        unknown = set(options) - {"cwd", "before"}
        if not words or unknown:
            raise ValueError(f"{page.name}:{i + 1}: a docs-output marker is SESSION [cwd=DIR] [before=STEP,...] "
                             f"[$ COMMAND]; unknown: {sorted(unknown)}")
        steps = [Step(command.strip(), body, i + 2, end)] if command else _steps(body, i + 2)
        for step in steps:
            step.indent = indent
        found.append(Block(page, i + 2, words[0], options.get("cwd"),
                           [s for s in options.get("before", "").split(",") if s], indent, steps))
    return found


def _steps(body: list[str], offset: int) -> list[Step]:
    steps: list[Step] = []
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            raise ValueError(f"line {offset + i + 1}: output before the first `$ ` command")
        command = body[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + body[i].strip()
        i += 1
        start = i
        while i < len(body) and not body[i].startswith("$ "):
            i += 1
        steps.append(Step(command, body[start:i], offset + start, offset + i))
    return steps


def shown_commands(page: Path) -> list[tuple[int, str]]:
    """(1-based line, command) of every `policyrun` command line in a page's shell blocks (fenced
    `sh`, `console` or plain; a `$ ` prompt and an `ENV=value` prefix are allowed; a trailing
    backslash continues the line). Synopses with `[optional]` parts or `...` are left out."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent = fence.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j] == f"{indent}```")
        if fence.group(2) in ("sh", "console", ""):
            k = i + 1
            while k < end:
                first, line = k, lines[k][len(indent):]
                while line.endswith("\\") and k + 1 < end:
                    k += 1
                    line = line[:-1] + " " + lines[k].strip()
                line = line.removeprefix("$ ")
                if re.match(r"^([A-Z_]+=\S+\s+)*policyrun\s", line) and "[" not in line and "..." not in line:
                    found.append((first + 1, line))
                k += 1
        i = end + 1
    return found


def policyrun_argv(command: str) -> list[str] | None:
    """The arguments a shown command passes to policyrun, up to a pipe, redirection or comment;
    None for a synopsis (`bash|zsh|fish`)."""
    words = shlex.split(command, comments=True)
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        words.pop(0)
    argv: list[str] = []
    for word in words[1:]:
        if word in {"|", "||", "&&", ";"} or word.startswith((">", "2>")):
            break
        if "|" in word:
            return None
        argv.append(word)
    return argv


# --- running -------------------------------------------------------------------------------------

def _path() -> str:
    """PATH with this interpreter's folder first: the walkthrough's `python3 -m pytest --version`
    probe then finds the interpreter running the tests (which has pytest), as in an activated venv."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@contextlib.contextmanager
def _environment(cwd: Path, extra: dict[str, str]) -> Iterator[None]:
    saved_cwd, saved_env = Path.cwd(), dict(os.environ)
    os.chdir(cwd)
    os.environ.update({**ENV, "PATH": _path(), **extra})
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_command(session: Session, command: str) -> str:
    """What `command` prints in the session's folder (stdout and stderr, interleaved)."""
    words = shlex.split(command, comments=True)
    env: dict[str, str] = {}
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[0] == "cd":
        session.cwd = (session.cwd / words[1]).resolve()
        return ""
    if words[0] == "policyrun" and not re.search(r"[|<>;&]", command):
        from policyrun.cli import main

        out = io.StringIO()
        with _environment(session.cwd, env), mock.patch("policyrun.evaluate.engine.now_utc", return_value=NOW), \
                mock.patch("policyrun.evaluate.engine.run_record", return_value=RUN), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                main(words[1:])
            except SystemExit:
                pass
        return out.getvalue()
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    tokens = list(lexer)
    programs = [t for i, t in enumerate(tokens) if i == 0 or tokens[i - 1] in {"|", "||", "&&", ";"}]
    for program in programs:
        if program != "policyrun" and "=" not in program and shutil.which(program) is None:
            raise Unavailable(program)
    path = f"{_shim(session)}{os.pathsep}{_path()}"
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(command, shell=True, cwd=session.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env={**os.environ, **ENV, **env, "PATH": path, "PYTHONPATH": pythonpath},
                          text=True, timeout=600)
    return proc.stdout


def _shim(session: Session) -> Path:
    """A folder with a `policyrun` for shell commands (pipes): this checkout's, with the clock at NOW."""
    folder = session.root / ".bin"
    if not folder.is_dir():
        folder.mkdir()
        shim = folder / "policyrun"
        shim.write_text(f"#!{sys.executable}\n"
                        "import sys\nfrom unittest import mock\n"
                        f"mock.patch('policyrun.evaluate.engine.now_utc', return_value={NOW!r}).start()\n"
                        f"mock.patch('policyrun.evaluate.engine.run_record', return_value={RUN!r}).start()\n"
                        "from policyrun.cli import main\nsys.exit(main(sys.argv[1:]))\n")
        shim.chmod(0o755)
    return folder


def _clean(lines: list[str]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def _elided(line: str) -> bool:
    return line.strip() == "..."


def _line_matches(shown: str, actual: str) -> bool:
    if shown == actual:
        return True
    return "..." in shown and re.fullmatch(".*?".join(map(re.escape, shown.split("..."))), actual) is not None


def matches(shown: list[str], actual: list[str]) -> bool:
    """`shown` is `actual` with some lines (a `...` line) or parts of lines (`...` inside one) left out."""
    @cache
    def match(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        if _elided(shown[i]):
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and _line_matches(shown[i], actual[j]) and match(i + 1, j + 1)
    return match(0, 0)


def refreshed(shown: list[str], actual: list[str]) -> list[str]:
    """`actual`, leaving out again what `shown` left out where the lines around it still agree."""
    if matches(shown, actual):
        return shown
    # A shown line with `...` inside it stands for the actual line it matches.
    partial = [s for s in shown if "..." in s and not _elided(s)]
    view = [next((s for s in partial if _line_matches(s, a)), a) for a in actual]
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, shown, view, autojunk=False).get_opcodes():
        if tag == "equal":
            out += shown[i1:i2]
            continue
        marks = [i for i in range(i1, i2) if _elided(shown[i])]
        if not marks or j1 == j2:
            out += view[j1:j2]
            continue
        # The shown lines before the first `...` and after the last one are replaced one for one
        # by the printed lines at the same ends; what lies between stays left out.
        head, tail = min(marks[0] - i1, j2 - j1), min(i2 - 1 - marks[-1], j2 - j1)
        if head + tail >= j2 - j1:
            out += view[j1:j2]
        else:
            out += view[j1:j1 + head] + [shown[marks[0]]] + view[j2 - tail:j2]
    return out


@dataclass
class Outcome:
    page: Path
    differences: list[str] = field(default_factory=list)  # unified diffs and other complaints
    skipped: list[str] = field(default_factory=list)      # why a session could not finish here
    updates: dict[tuple[int, int], tuple[str, list[str]]] = field(default_factory=dict)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def _run_block(block: Block, session: Session, outcome: Outcome) -> None:
    for step in block.steps:
        actual = _clean(run_command(session, step.command).split("\n"))
        shown = _clean(step.shown)
        if not matches(shown, actual):
            where = f"{_name(block.page)}:{step.first + 1}"
            outcome.differences.append(f"{where}: `{step.command}` prints otherwise:\n" + "\n".join(
                difflib.unified_diff(shown, actual, "shown", "printed", lineterm="")))
            outcome.updates[(step.first, step.last)] = (step.indent, refreshed(shown, actual))


def check_page(page: Path) -> Outcome:
    text = page.read_text(encoding="utf-8")
    outcome = Outcome(page)
    sessions: dict[str, Session] = {}
    unavailable: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="policyrun-docs-") as tmp:
        for block in blocks(page, text):
            if block.not_run is not None or block.session in unavailable:
                continue
            if block.session not in sessions:
                root = Path(tmp, block.session)
                root.mkdir()
                try:
                    cwd = SESSIONS[block.session](root)
                except Unavailable as exc:  # e.g. the real corpus a session clones is not here
                    unavailable[block.session] = str(exc)
                    outcome.skipped.append(f"{_name(page)}:{block.line}: session {block.session} needs {exc}, "
                                           "which is not here; its blocks were not run")
                    continue
                clean = [p.parent for p in root.glob("*/.git")]
                sessions[block.session] = Session(root, cwd, clean)
            session = sessions[block.session]
            if block.cwd is not None:
                session.cwd = session.root / block.cwd
            try:
                with contextlib.ExitStack() as during:
                    for name in block.before:
                        effect = STEPS[name](session, text)
                        if effect is not None:
                            during.enter_context(effect)
                    _run_block(block, session, outcome)
            except Unavailable as exc:
                unavailable[block.session] = str(exc)
                outcome.skipped.append(f"{_name(page)}:{block.line}: session {block.session} "
                                       f"needs {exc}, which is not installed; its later blocks were not run")
        for session in sessions.values():
            for checkout in session.must_stay_clean:
                left = git(checkout, "status", "--porcelain", "--untracked-files=all").strip()
                if left:
                    outcome.differences.append(f"{_name(page)}: the commands left files in the "
                                               f"checkout that git does not ignore:\n{left}")
    return outcome


def update(outcome: Outcome) -> None:
    lines = outcome.page.read_text(encoding="utf-8").split("\n")
    for (first, last), (pad, new) in sorted(outcome.updates.items(), reverse=True):
        lines[first:last] = [pad + line if line else line for line in new]
    outcome.page.write_text("\n".join(lines), encoding="utf-8")


def cli(argv: list[str]) -> int:
    # As under pytest (tests/conftest.py): no machine git config, and a lint cache of our own.
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    os.environ.setdefault("POLICYRUN_CACHE_DIR", tempfile.mkdtemp(prefix="policyrun-docs-cache-"))
    do_update = "--update" in argv
    named = [ROOT / a for a in argv if a != "--update"]
    status = 0
    for page in named or PAGES:
        outcome = check_page(page)
        for line in outcome.differences + outcome.skipped:
            print(line)
        if outcome.differences:
            status = 1
            if do_update and outcome.updates:
                update(outcome)
                print(f"updated {_name(page)}")
    return status


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
