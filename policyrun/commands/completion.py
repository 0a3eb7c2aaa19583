"""`policyrun completion bash|zsh|fish`: print a shell completion script.

The CLI imports only the chosen command's module (so `lint` stays fast), which means the parser
it builds knows the options of one command. Completion needs all of them: this builds the full
parser — every command module imported — only when a script is asked for, and lets shtab write
the script from it.

What the script completes beyond options and fixed choices: a rulebook argument completes file
names and the shipped rulebooks' names, `policyrun probes KIND` the probe kinds (both written into
the script: regenerate it after an upgrade), and `--mode` the modes of the rulebook already on the
command line, which the script asks of `policyrun completion --modes WORDS...` (a hidden form that
prints one mode a line, and nothing when the words name no rulebook it can load).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

SHELLS = ("bash", "zsh", "fish")
# Arguments whose values are files or folders (shtab completes them from the file system).
_FILE_DESTS = frozenset({"rulebook", "paths", "trace", "old", "new", "facts", "inputs", "template", "context",
                         "output", "waivers", "sign_key"})
_DIR_METAVARS = frozenset({"DIR"})

INSTALL = {
    "bash": "policyrun completion bash > ~/.local/share/bash-completion/completions/policyrun",
    "zsh": "policyrun completion zsh > \"${fpath[1]}/_policyrun\"  (a folder on $fpath; then restart zsh)",
    "fish": "policyrun completion fish > ~/.config/fish/completions/policyrun.fish",
}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print a completion script for SHELL (bash, zsh or fish) to stdout.",
                       epilog="install it with one of:\n  " + "\n  ".join(INSTALL.values()),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", nargs="?", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    # The scripts' helper: the words of the command line being completed, after `policyrun`.
    p.add_argument("--modes", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def full_parser() -> argparse.ArgumentParser:
    """The CLI's parser with every command's arguments (cli._build adds only the chosen one's)."""
    from policyrun import __version__
    from policyrun.cli import COMMANDS

    parser = argparse.ArgumentParser(prog="policyrun", description="Executable, gated engineering policy.")
    parser.add_argument("--version", action="version", version=f"policyrun {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        try:
            importlib.import_module(module).add_parser(sub)
        except ImportError:  # a command whose optional extra is not installed: complete its name only
            sub.add_parser(name, help=help_text)
    return parser


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _mark_paths(child)
            continue
        if action.choices is not None or action.nargs == 0:
            continue
        marked: Any = action
        if action.metavar in _DIR_METAVARS:
            marked.complete = shtab.DIRECTORY
        elif action.type is Path or action.dest in _FILE_DESTS:
            marked.complete = shtab.FILE


def _words(name: str, words: list[str]) -> dict[str, Any]:
    """A completer offering fixed words (probe kinds), for each shell."""
    listed = " ".join(words)
    return {"bash": name, "zsh": f"({listed})", "fish": listed,
            "preamble": {"bash": f'{name}() {{\n  compgen -W "{listed}" -- "$1"\n}}'}}


def _rulebooks() -> dict[str, Any]:
    """Files, and the names of the shipped rulebooks (a rulebook argument takes either)."""
    from policyrun.language.locate import shipped_rulebooks

    names = " ".join(shipped_rulebooks())
    # shtab lets bash treat the words as file names (a '/' after a folder) when the function's
    # name says `_file`.
    return {"bash": "_shtab_policyrun_rulebook_files", "zsh": "_policyrun_rulebooks",
            "fish": f"(__fish_complete_path (commandline -ct)) {names}",
            "preamble": {
                "bash": ('_shtab_policyrun_rulebook_files() {\n  compgen -f -- "$1"\n'
                         f'  compgen -W "{names}" -- "$1"\n}}'),
                "zsh": ("_policyrun_rulebooks() {\n  _alternative 'files:file:_files' "
                        f"'shipped:shipped rulebook:({names})'\n}}")}}


# `--mode` asks policyrun for the modes of the rulebook on the line (the words before the cursor).
_MODES: dict[str, Any] = {
    "bash": "_shtab_policyrun_modes", "zsh": "_policyrun_modes",
    "fish": "(policyrun completion --modes (commandline -opc)[2..-1] 2>/dev/null)",
    "preamble": {
        "bash": ('_shtab_policyrun_modes() {\n  compgen -W "$(policyrun completion --modes '
                 '"${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$1"\n}'),
        "zsh": ('_policyrun_modes() {\n  local -a modes\n  modes=(${(f)"$(policyrun completion --modes '
                '${words[2,CURRENT-1]} 2>/dev/null)"})\n  compadd -a modes\n}')}}


def _mark_values(parser: argparse.ArgumentParser) -> None:
    """Rulebook arguments, `--mode` and probe kinds complete their values (see the module's doc)."""
    from policyrun.probes.registry import registry

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    kinds = _words("_shtab_policyrun_probe_kinds", sorted(registry()))
    for command, child in sub.choices.items():
        for action in child._actions:
            marked: Any = action
            if action.dest == "rulebook" or (command == "lint" and action.dest == "paths"):
                marked.complete = _rulebooks()
            elif action.dest == "mode":
                marked.complete = _MODES
            elif command == "probes" and action.dest == "kind":
                marked.complete = kinds


def script(shell: str) -> str:
    import shtab

    parser = full_parser()
    _mark_paths(parser)
    _mark_values(parser)
    text: str = shtab.complete(parser, shell=shell)
    return text if text.endswith("\n") else text + "\n"


def modes(words: list[str]) -> list[str]:
    """The modes of the rulebook that `words` (a command line after `policyrun`, up to the word
    being completed) names, or none when it names none that loads: completion stays quiet."""
    import contextlib
    import io

    from policyrun.cli import COMMANDS, _build
    from policyrun.errors import PolicyrunError
    from policyrun.language.rulebook import load_rulebook

    if words and words[-1].startswith("-"):
        words = words[:-1]  # the option (`--mode`, `-m`) whose value is being completed
    command = next((w for w in words if w in COMMANDS), None)
    if command is None:
        return []
    parser = _build([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[command]._actions:  # a half-typed line lacks later arguments
        action.required = False
        if not action.option_strings and action.nargs is None:
            action.nargs = "?"
    with contextlib.redirect_stderr(io.StringIO()):  # argparse's complaints about a half-typed line
        try:
            args, _ = parser.parse_known_args(words)
        except SystemExit:
            return []
    try:
        return list(load_rulebook(getattr(args, "rulebook", None)).model.modes)
    except (PolicyrunError, OSError, ValueError):
        return []


def run(args: argparse.Namespace) -> int:
    import sys

    from policyrun.errors import UsageError

    if args.modes is not None:
        sys.stdout.writelines(f"{mode}\n" for mode in modes(args.modes))
        return 0
    if args.shell is None:
        raise UsageError("name the shell: policyrun completion bash|zsh|fish", code="U003")
    sys.stdout.write(script(args.shell))
    return 0
