"""One glob semantics: CEL's glob_match and the probes' include/exclude agree with `git check-ignore`.

Each case is a pattern and a file path; git's answer comes from a scratch repository where every
case has its own folder holding a .gitignore with the pattern (a .gitignore's patterns are relative
to its folder, so each folder is a root of its own) and the path as a real file, so directories are
directories. One `git check-ignore --stdin` answers every case.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import re2  # type: ignore[import-untyped]

from policyrun.language.functions.base import FunctionError
from policyrun.language.functions.paths import glob_match
from policyrun.globs import GlobError, anchored_source, gitignore_source
from policyrun.probes.base import ProbeError
from policyrun.probes._kit.paths import PathFilter

CASES: list[tuple[str, str]] = [
    # a name without '/': any depth, and a matching directory covers what is below it
    ("*.py", "a.py"), ("*.py", "src/a.py"), ("*.py", "src/a.pyc"), ("*.py", "x.py/inner.txt"),
    ("foo", "foo"), ("foo", "a/foo"), ("foo", "foo/bar"), ("foo", "a/foo/bar"), ("foo", "foobar"), ("foo", "afoo"),
    ("*", "a"), ("*", "a/b"), (".*", ".hidden"), ("*", ".hidden"), (".git*", "a/.gitignore2"),
    # a '/' at the start or in the middle anchors at the root
    ("/foo", "foo"), ("/foo", "a/foo"), ("/foo", "foo/x"), ("a/b", "a/b"), ("a/b", "x/a/b"), ("a/b", "a/b/c"),
    ("/a/*.py", "a/x.py"), ("/a/*.py", "a/b/x.py"), ("a/*.py", "b/a/x.py"), ("a/*", "a/b/c"),
    ("/README*.md", "README.md"), ("/README*.md", "docs/README.md"), ("/README*.md", "README-dev.md"),
    # a trailing '/' matches directories only (the file itself is not one)
    ("build/", "build"), ("build/", "build/x"), ("build/", "a/build/x"), ("a/build/", "a/build/x"),
    ("a/build/", "x/a/build/y"), ("b*/", "bin/tool"), ("b*/", "bin"),
    # `**`
    ("**/foo", "foo"), ("**/foo", "a/b/foo"), ("**/foo", "a/foo/x"), ("**/a/b", "x/y/a/b"),
    ("a/**", "a/x"), ("a/**", "a/x/y"), ("a/**", "a"), ("a/**", "ab/x"),
    ("a/**/b", "a/b"), ("a/**/b", "a/x/b"), ("a/**/b", "a/x/y/b"), ("a/**/b", "a/xb"), ("a/**/b", "a/b/c"),
    ("**", "x"), ("**", "x/y/z"), ("src/**/*.py", "src/a.py"), ("src/**/*.py", "src/x/y/a.py"),
    ("src/**/*.py", "src/a.pyc"), ("a**b", "ab"), ("a**b", "axxb"), ("a**b", "a/b"), ("a**b", "x/a/b"),
    ("a/**b", "a/xb"), ("a/**b", "a/x/b"), ("**foo", "a/xfoo"), ("foo**", "foox/y"),
    # `?`
    ("a?.py", "a1.py"), ("a?.py", "a12.py"), ("a?.py", "a.py"), ("a?b", "a/b"), ("x/a?b", "x/a/b"),
    # character classes
    ("v[0-9].txt", "v1.txt"), ("v[0-9].txt", "va.txt"), ("v[!0-9].txt", "va.txt"), ("v[!0-9].txt", "v1.txt"),
    ("v[^0-9].txt", "v1.txt"), ("v[^0-9].txt", "vx.txt"), ("a[]]b", "a]b"), ("a[!]]b", "a]b"), ("a[!]]b", "axb"),
    ("a[-]b", "a-b"), ("a[b-]c", "a-c"), ("x[!a]y", "x/y"), ("d/x[!a]y", "d/x/y"), ("[[:digit:]]*", "1a"),
    ("[[:digit:]]*", "a1"), ("[[:upper:][:digit:]]x", "Ax"), ("[[:upper:][:digit:]]x", "ax"),
    ("[!a-c]*", "d"), ("[!a-c]*", "b"), ("*.[ch]", "x.c"), ("*.[ch]", "x.o"),
    # escapes and characters that are special elsewhere
    ("a\\*b", "a*b"), ("a\\*b", "axb"), ("\\!x", "!x"), ("\\#x", "#x"), ("a\\?", "a?"), ("a\\?", "ab"),
    ("a[\\]]b", "a]b"), ("a.b", "a.b"), ("a.b", "axb"), ("(x)+$", "(x)+$"), ("a+b", "a+b"), ("a{1}", "a{1}"),
    ("x\\ ", "x "), ("sp ace", "sp ace"), ("é/*.py", "é/ü.py"), ("*.PY", "a.py"),
]


@pytest.fixture(scope="module")
def git_says(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], bool]:
    repo = tmp_path_factory.mktemp("gitglobs")
    # Only this repository's rules count: no GIT_DIR from a hook, no global excludes file.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    asked = []
    for n, (pattern, path) in enumerate(CASES):
        case = repo / f"c{n}"
        (case / path).parent.mkdir(parents=True, exist_ok=True)
        (case / path).write_text("")
        (case / ".gitignore").write_text(pattern + "\n")
        asked.append(f"c{n}/{path}")
    done = subprocess.run(["git", "-c", "core.ignorecase=false", "-c", f"core.excludesFile={os.devnull}",
                           "check-ignore", "--no-index", "--stdin", "-z"],
                          cwd=repo, input="\0".join(asked) + "\0", capture_output=True, text=True, env=env)
    assert done.returncode in (0, 1), done.stderr
    ignored = set(done.stdout.split("\0"))
    return {case: f"c{n}/{case[1]}" in ignored for n, case in enumerate(CASES)}


@pytest.mark.parametrize(("pattern", "path"), CASES)
def test_glob_match_agrees_with_git_check_ignore(git_says: dict[tuple[str, str], bool], pattern: str, path: str) -> None:
    assert glob_match(path, pattern) is git_says[(pattern, path)], (pattern, path)


@pytest.mark.parametrize(("pattern", "path"), CASES)
def test_probe_include_and_exclude_agree_with_git_check_ignore(git_says: dict[tuple[str, str], bool],
                                                               pattern: str, path: str) -> None:
    ignored = git_says[(pattern, path)]
    assert PathFilter([pattern], []).select([path]) == ([path] if ignored else [])
    assert PathFilter([], [pattern]).select([path]) == ([] if ignored else [path])


def test_the_table_exercises_both_answers(git_says: dict[tuple[str, str], bool]) -> None:
    # a table git answers all one way would test nothing (a misconfigured check-ignore says "no" to all)
    assert 0.3 < sum(git_says.values()) / len(CASES) < 0.7


def test_an_absolute_path_is_matched_from_its_root() -> None:
    assert glob_match("/abs/p.py", "/abs/*.py") and glob_match("/abs/p.py", "*.py")
    assert glob_match("abs/p.py", "/abs/*.py") and not glob_match("/x/abs/p.py", "/abs/*.py")
    assert glob_match("build/", "build/") and not glob_match("build", "build/")  # a trailing '/' is a directory


@pytest.mark.parametrize(("pattern", "why"), [
    ("", "is empty; it would match nothing"),
    ("!x", "starts with '!': negation is not supported"),
    ("#x", "starts with '#', which makes a .gitignore line a comment"),
    ("x ", "ends with a space, which .gitignore drops"),
    ("/", "names no path (only '/')"),
    ("a//b", "has an empty component ('//')"),
    ("a[b", "has a '[' without its closing ']'"),
    ("a[z-a]", "has the empty range 'z-a'"),
    ("[+-0]", "has a [...] range over '/'"),
    ("a\\", "ends with a lone backslash"),
    ("[[:letter:]]", "names the unknown class '[:letter:]'"),
])
def test_invalid_patterns_are_refused_with_a_reason(pattern: str, why: str) -> None:
    with pytest.raises(GlobError, match="^" + re2.escape(why)):
        gitignore_source(pattern)
    with pytest.raises(FunctionError) as fn_err:
        glob_match("a", pattern)
    assert str(fn_err.value).startswith(f"glob_match: pattern '{pattern}' {why}")
    with pytest.raises(ProbeError) as probe_err:
        PathFilter([pattern], [])
    assert probe_err.value.code == "params.invalid"
    assert str(probe_err.value).startswith(f"glob {pattern!r} is not valid: pattern '{pattern}' {why}")


def test_the_anchored_form_covers_neither_depths_nor_contents() -> None:
    regex = re2.compile(anchored_source("*.json"))
    assert regex.fullmatch("a.json") and not regex.fullmatch("x/a.json") and not regex.fullmatch("a.json/x")
    assert re2.compile(anchored_source("**/config.json")).fullmatch("sub/deep/config.json")


def test_a_file_name_may_hold_a_newline() -> None:
    assert glob_match("dir/a\nb.py", "*.py") and glob_match("dir/a\nb.py", "dir/a?b.py")
    assert PathFilter(["dir/"], []).select(["dir/x\ny/z", "other"]) == ["dir/x\ny/z"]
    assert PathFilter(["**"], ["*\n*"]).select(["a\nb", "ab"]) == ["ab"]
