"""`policyrun completion`: scripts that complete every command's options, checked in the real shells."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.cli import COMMANDS, main
from policyrun.commands.completion import full_parser, script


def _script(shell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["completion", shell]) == 0
    path = tmp_path / f"policyrun.{shell}"
    path.write_text(capsys.readouterr().out)
    return path


def test_full_parser_knows_every_command_and_its_options() -> None:
    parser = full_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)  # type: ignore[arg-type]
    lint = sub.choices["lint"]  # type: ignore[index]
    fmt = next(a for a in lint._actions if a.dest == "format")
    assert list(fmt.choices) == ["text", "json", "sarif", "github"]


def test_lint_does_not_build_the_full_parser(tmp_path: Path) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text("policyrun: 1\nname: x\nmodes:\n  a: {phases: [P]}\nphases:\n  - {id: P}\n")
    code = ("import sys; from policyrun.cli import main; rc = main(['lint', sys.argv[1]]); "
            "print(sorted(m for m in sys.modules if m.startswith(('shtab', 'policyrun.commands.'))))")
    proc = subprocess.run([sys.executable, "-c", code, str(rb)], capture_output=True, text=True, timeout=600,
                          env={"POLICYRUN_NO_CACHE": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['policyrun.commands.lint']"


def test_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "powershell"]) == 3
    assert "invalid choice: 'powershell'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_options_and_choices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("bash", tmp_path, capsys)

    def complete(*words: str) -> list[str]:
        words_text = " ".join(f"'{w}'" for w in words)
        probe = (f"source {path}; COMP_WORDS=(policyrun {words_text}); COMP_CWORD={len(words)}; "
                 "_shtab_policyrun; printf '%s\\n' \"${COMPREPLY[@]}\"")
        proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stdout.splitlines() if line]

    assert complete("ev") == ["evaluate", "evidence", "eval"]
    assert complete("comp") == ["completion"]
    assert complete("lint", "--format", "") == ["text", "json", "sarif", "github"]
    assert "github" in complete("report", "t.json", "--format", "")
    assert complete("evaluate", "--mo") == ["--mode"]
    assert complete("completion", "") == ["bash", "zsh", "fish"]
    (tmp_path / "facts.json").write_text("{}")
    assert "facts.json" in complete("eval", "x", "--facts", "fa")  # file arguments complete files


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_rulebook_names_modes_probe_kinds_and_formats(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("bash", tmp_path, capsys)
    (tmp_path / "mine.yaml").write_text("policyrun: 1\nname: mine\nmodes:\n  quick: {phases: [P]}\n"
                                        "  thorough: {phases: [P]}\nphases:\n  - {id: P}\n")

    def complete(*words: str) -> list[str]:
        # `policyrun` here is this interpreter's, as an installed console script would be.
        words_text = " ".join(f"'{w}'" for w in words)
        probe = (f"policyrun() {{ '{sys.executable}' -m policyrun \"$@\"; }}; source {path}; "
                 "complete -p policyrun >/dev/null || exit 9; "
                 f"COMP_WORDS=(policyrun {words_text}); COMP_CWORD={len(words)}; "
                 "_shtab_policyrun; printf '%s\\n' \"${COMPREPLY[@]}\"")
        proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stdout.splitlines() if line]

    assert complete("evaluate", "upg") == ["upgrade-gpu-version", "upgrade-python-deps", "upgrade-vllm-plugin"]  # a shipped rulebook's name
    assert complete("lint", "gpu") == ["gpu-cell-preflight", "gpu-node-preflight"]
    assert complete("evaluate", "mi") == ["mine.yaml"]  # and files
    assert complete("eval", "--rulebook", "upgrade-g") == ["upgrade-gpu-version"]
    assert complete("evaluate", "upgrade-gpu-version", "--mode", "") == ["planning-audit", "implementation",
                                                                         "final-validation"]
    assert complete("collect", "mine.yaml", "-m", "th") == ["thorough"]  # the named file's modes
    assert complete("eval", "facts.x", "--facts", "f.json", "-r", "mine.yaml", "--mode", "") == ["quick", "thorough"]
    assert complete("evaluate", "missing.yaml", "--mode", "") == []  # quietly nothing, no error text
    assert complete("probes", "search.") == ["search.literal", "search.regex"]
    assert complete("probes", "git.re") == ["git.repo", "git.resolve"]
    assert complete("test", "--format", "") == ["text", "json", "junit"]
    assert complete("report", "t.json", "--format", "ju") == ["junit"]


def test_modes_helper_names_the_modes_of_the_rulebook_on_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "--modes", "evaluate", "gpu-node-preflight", "--mode"]) == 0
    assert capsys.readouterr().out == "preflight\ninventory\n"
    assert main(["completion", "--modes", "evaluate", "no-such-rulebook", "-m"]) == 0
    assert capsys.readouterr() == ("", "")


def test_completion_without_a_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion"]) == 3
    assert "name the shell: policyrun completion bash|zsh|fish" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_commands_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("fish", tmp_path, capsys)

    def complete(line: str) -> list[str]:
        proc = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return [row.split("\t")[0] for row in proc.stdout.splitlines()]

    assert complete("policyrun ev") == ["eval", "evaluate", "evidence"]
    assert complete("policyrun lint --format ") == ["text", "json", "sarif", "github"]
    assert complete("policyrun evaluate --mo") == ["--mode"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_parses_and_lists_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("zsh", tmp_path, capsys)
    text = path.read_text()
    assert text.startswith("#compdef policyrun\n")
    assert subprocess.run(["zsh", "-n", str(path)], capture_output=True, timeout=60).returncode == 0
    # The command list the script offers, as zsh reads it.
    proc = subprocess.run(["zsh", "-f", "-c", f"_describe() {{ print -l -- ${{(P)2}} }}; source {path}; "
                                              "_shtab_policyrun_commands"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(line.split(":", 1)[0] for line in proc.stdout.splitlines()) == sorted(COMMANDS)
    assert ":format:(text json sarif github)" in text


def test_scripts_are_deterministic() -> None:
    assert script("bash") == script("bash") and script("fish").startswith("#")


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_rulebook_names_modes_and_probe_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("fish", tmp_path, capsys)

    def complete(line: str) -> list[str]:
        code = f"function policyrun; '{sys.executable}' -m policyrun $argv; end; source {path}; complete -C '{line}'"
        proc = subprocess.run(["fish", "--no-config", "-c", code], capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return [row.split("\t")[0] for row in proc.stdout.splitlines()]

    assert complete("policyrun evaluate upgrade-g") == ["upgrade-gpu-version"]
    assert complete("policyrun evaluate gpu-node-preflight --mode ") == ["preflight", "inventory"]
    assert complete("policyrun probes search.") == ["search.literal", "search.regex"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_functions_offer_rulebook_names_and_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script("zsh", tmp_path, capsys)
    # compadd and _alternative stand in for the completion system, printing what they are offered.
    code = (f"policyrun() {{ '{sys.executable}' -m policyrun \"$@\" }}; compadd() {{ print -l -- ${{(P)2}} }}; "
            f"_alternative() {{ print -l -- \"$@\" }}; _arguments() {{ }}; source {path}; "
            "words=(policyrun evaluate gpu-node-preflight --mode ''); CURRENT=5; _policyrun_modes; _policyrun_rulebooks")
    proc = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["preflight", "inventory", "files:file:_files",
                                        "shipped:shipped rulebook:(gpu-cell-preflight gpu-node-preflight upgrade-gpu-version upgrade-python-deps upgrade-vllm-plugin)"]
