"""`policyrun completion bash|zsh|fish`: print a shell completion script.

The CLI imports only the chosen command's module (so `lint` stays fast), which means the parser
it builds knows the options of one command. Completion needs all of them: this builds the full
parser — every command module imported — only when a script is asked for, and lets shtab write
the script from it.
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
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
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


def script(shell: str) -> str:
    import shtab

    parser = full_parser()
    _mark_paths(parser)
    text: str = shtab.complete(parser, shell=shell)
    return text if text.endswith("\n") else text + "\n"


def run(args: argparse.Namespace) -> int:
    import sys

    sys.stdout.write(script(args.shell))
    return 0
