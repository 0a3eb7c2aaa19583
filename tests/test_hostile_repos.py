"""The repositories under audit, and the interpreters they run in, are hostile.

Nothing of theirs runs (every program a repository's configuration names writes a marker file,
and the marker never appears; each test first shows that plain git would have run it), nothing
blinds a search or the clean check, no probe outlives its timeout, nothing outside the root is
read, and nothing under `.git` changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.python.stack import PythonStackProbe
from policyrun.probes.registry import get
from policyrun.probes.host.toolchain import ToolchainProbe
from tests.fakes import stack_site
from tests.gitfixtures import BASE_ENV, GitRepo, git_dir_files, init_repo

ROOT = Path(__file__).resolve().parent.parent


# --- helpers --------------------------------------------------------------------------------------

def _program(tmp_path: Path, name: str, then: str = "") -> tuple[Path, Path]:
    """A program that appends to a marker file (outside the repository), then runs `then`."""
    marker = tmp_path / "markers" / name
    marker.parent.mkdir(exist_ok=True)
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\necho ran >> '{marker}'\n{then}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, marker


def _plain_git(repo: Path, *args: str, stdin: str | None = None) -> None:
    """git as a user would run it, with none of policyrun's overrides: shows a fixture is hostile."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV}
    subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, input=stdin, text=True, timeout=60)


def _make_stale(repo: GitRepo, rel: str) -> None:
    """Same content, newer mtime: git status must look at the content again (through filters)."""
    path = repo.path / rel
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def _value(kind: str, params: dict[str, Any], base: Path, env: dict[str, str] | None = None,
           timeout_s: float = 30) -> Any:
    return _run(kind, params, base, env, timeout_s).value


def _run(kind: str, params: dict[str, Any], base: Path, env: dict[str, str] | None = None,
         timeout_s: float = 30) -> ProbeResult:
    probe = get(kind)
    assert probe is not None, kind
    return probe.run(params, ProbeContext(base_dir=base, timeout_s=timeout_s, env=env or {}))


def _error(kind: str, params: dict[str, Any], base: Path, env: dict[str, str] | None = None,
           timeout_s: float = 30) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        _run(kind, params, base, env, timeout_s)
    return info.value


def _in_child(code: str, *, timeout: float = 60, prefix: list[str] | None = None) -> dict[str, Any]:
    """Run a probe in a separate interpreter (memory capped at 2 GiB, wall clock capped) and return
    what it printed as JSON: a failure there is a failed assertion here, not a hung or killed suite."""
    script = (
        "import json, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from policyrun.probes.base import ProbeContext, ProbeError\n"
        "from policyrun.probes.registry import get\n"
        "def probe(kind, params, base, timeout_s=30):\n"
        "    try:\n"
        "        out = {'value': get(kind).run(params, ProbeContext(base_dir=base, timeout_s=timeout_s)).value}\n"
        "    except ProbeError as exc:\n"
        "        out = {'code': exc.code, 'message': exc.message}\n"
        # VmHWM: this process's peak resident memory (ru_maxrss would include the forking parent's)
        "    out['max_rss_kib'] = int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))\n"
        "    print(json.dumps(out))\n"
        + code
    )
    try:
        proc = subprocess.run([*(prefix or []), sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the probe was still running after {timeout}s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _dead(pid: int) -> bool:
    """Gone or a zombie within a second (SIGKILL is delivered asynchronously)."""
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(line.startswith("State:") and "Z" in line.split()[1] for line in f):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "repo")
    repo.write("a.txt", "vllm==0.6.3\n")
    repo.write("src/mod.py", "TARGET = 'vllm==0.6.3'\n")
    repo.commit("one")
    repo.git("tag", "v1")
    repo.write("src/mod.py", "TARGET = 'vllm==0.7.0'\n")
    repo.commit("two")
    return repo


# --- python.stack: nothing from the audited directory runs --------------------------------------

@pytest.fixture
def fake_venv(tmp_path: Path) -> Path:
    site = stack_site.write_site(tmp_path / "site")
    return stack_site.make_venv(tmp_path / "venv", site)


@pytest.mark.parametrize("module", ["hashlib", "json", "platform"])
def test_stack_never_imports_modules_from_the_audited_directory(tmp_path: Path, fake_venv: Path,
                                                                module: str) -> None:
    audited = tmp_path / "audited"
    audited.mkdir()
    marker = tmp_path / "imported"
    (audited / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write('ran')\nraise SystemExit(0)\n")
    v = PythonStackProbe().run({"python": str(fake_venv), "pip_check": False},
                               ProbeContext(base_dir=audited, timeout_s=60)).value
    assert not marker.exists()
    assert v["torch"]["version"] == "2.7.1+cu128"  # the real script ran to the end
    assert v["python"]["version"] == ".".join(map(str, sys.version_info[:3]))


def test_stack_pip_check_is_the_interpreters_own(tmp_path: Path, fake_venv: Path) -> None:
    audited = tmp_path / "audited"
    (audited / "pip").mkdir(parents=True)
    marker = tmp_path / "fake-pip-ran"
    (audited / "pip" / "__init__.py").write_text("")
    (audited / "pip" / "__main__.py").write_text(
        f"open({str(marker)!r}, 'a').write('ran')\nprint('No broken requirements found.')\n")
    v = PythonStackProbe().run({"python": str(fake_venv)}, ProbeContext(base_dir=audited, timeout_s=120)).value
    assert not marker.exists()
    assert v["pip_check"]["ok"] is False  # the fake site's vllm lacks a dependency: the real pip says so
    assert any(stack_site.MISSING_DEP in line for line in v["pip_check"]["lines"])


def test_stack_children_get_an_allow_listed_environment(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    exe = tmp_path / "python-recorder"
    exe.write_text(f"#!/bin/sh\necho \"$1 $2 $3\" >> '{seen}.args'\npwd >> '{seen}.cwd'\nenv >> '{seen}.env'\n"
                   "echo '{}'\n")
    exe.chmod(0o755)
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    env = {"PYTHONPATH": str(hostile), "PYTHONSTARTUP": str(hostile / "x.py"), "PYTHONHOME": "/nowhere",
           "LD_PRELOAD": "/tmp/evil.so", "HF_TOKEN": "hf_secret", "CUDA_HOME": "/usr/local/cuda",
           "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "NCCL_DEBUG": "INFO", "PATH": os.environ["PATH"]}
    v = PythonStackProbe().run({"python": str(exe)}, ProbeContext(base_dir=hostile, timeout_s=30, env=env)).value
    names = {line.split("=", 1)[0] for line in (tmp_path / "seen.env").read_text().splitlines() if "=" in line}
    # sh itself adds PWD (and may add SHLVL / _); everything else comes from policyrun.
    assert names - {"PWD", "SHLVL", "_", "OLDPWD"} <= {
        "PATH", "HOME", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "PIP_NO_INPUT",
        "PIP_DISABLE_PIP_VERSION_CHECK", "USER", "LOGNAME", "TMPDIR", "TZ", "LANGUAGE"}
    assert not names & {"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "LD_PRELOAD", "HF_TOKEN", "NCCL_DEBUG"}
    assert {"CUDA_HOME", "LD_LIBRARY_PATH"} <= names
    # isolated mode (PYTHON* ignored, no user site, no working directory on sys.path), no bytecode written
    assert sorted((tmp_path / "seen.args").read_text().splitlines()) == ["-I -B -c", "-I -B -m"]
    for cwd in (tmp_path / "seen.cwd").read_text().split():
        assert Path(cwd) != hostile and not Path(cwd).exists()  # a fresh empty directory, removed after
    assert v["env"]["NCCL_DEBUG"] == "INFO"  # what the workload sees is still reported


def _lingering(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A program that starts a grandchild holding its stdout, then sleeps; the grandchild's pid is written."""
    pid_file = tmp_path / f"{name}.pid"
    exe = tmp_path / name
    exe.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > '{pid_file}'\nsleep 30\n")
    exe.chmod(0o755)
    return exe, pid_file


def test_stack_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    exe, pid_file = _lingering(tmp_path, "python-hang")
    start = time.monotonic()
    err = _error("python.stack", {"python": str(exe), "pip_check": False}, tmp_path, timeout_s=1)
    assert err.code == "python.timeout" and time.monotonic() - start < 25  # the script sleeps 30 s
    assert _dead(int(pid_file.read_text()))


def test_toolchain_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    exe, pid_file = _lingering(tmp_path, "nvcc")
    start = time.monotonic()
    with pytest.raises(ProbeError) as info:
        ToolchainProbe().run({"nvcc": str(exe), "required": ["nvcc"]}, ProbeContext(base_dir=tmp_path, timeout_s=1))
    assert info.value.code == "toolchain.timeout" and time.monotonic() - start < 25  # the script sleeps 30 s
    assert _dead(int(pid_file.read_text()))


def test_stack_returns_when_a_daemon_it_left_holds_the_pipe(tmp_path: Path) -> None:
    exe = tmp_path / "python-daemon"
    exe.write_text("#!/bin/sh\nsetsid sleep 120 &\necho '{}'\n")  # the daemon leaves the process group
    exe.chmod(0o755)
    start = time.monotonic()
    v = _value("python.stack", {"python": str(exe), "pip_check": False}, tmp_path, timeout_s=20)
    assert v["interpreter"] == str(exe) and time.monotonic() - start < 60  # not the daemon's 120 s


# --- git: no program named by a repository's configuration runs ---------------------------------

def test_filter_clean_never_runs(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "clean", "cat")
    repo.write(".gitattributes", "* filter=evil\n")
    repo.commit("attributes")
    repo.git("config", "filter.evil.clean", str(prog))
    repo.git("config", "filter.evil.required", "true")
    _make_stale(repo, "a.txt")
    v = _value("git.repo", {"path": str(repo.path)}, repo.path)
    _value("search.regex", {"root": str(repo.path), "pattern": "vllm"}, repo.path)
    assert not marker.exists()
    assert v["clean"] is True  # compared without the filter: the bytes are the committed ones
    _plain_git(repo.path, "status")
    assert marker.exists()


def test_filter_process_never_runs(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "process")
    repo.write(".gitattributes", "*.txt filter=lfs-like\n")
    repo.commit("attributes")
    repo.git("config", "filter.lfs-like.process", str(prog))
    _make_stale(repo, "a.txt")
    _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert not marker.exists()
    _plain_git(repo.path, "status")
    assert marker.exists()


def test_filter_declared_in_an_included_file_with_an_odd_name_never_runs(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "included", "cat")
    included = tmp_path / "evil.gitconfig"
    included.write_text(f'[filter "a=b.c"]\n\tclean = {prog}\n\tsmudge = {prog}\n')
    repo.write(".gitattributes", "* filter=a=b.c\n")
    repo.commit("attributes")
    repo.git("config", "include.path", str(included))
    _make_stale(repo, "a.txt")
    _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert not marker.exists()
    _plain_git(repo.path, "status")
    assert marker.exists()


def test_filter_of_a_submodule_never_runs(tmp_path: Path) -> None:
    sub_src = init_repo(tmp_path / "sub-src")
    sub_src.write("s.txt", "x\n")
    sub_src.write(".gitattributes", "* filter=subevil\n")
    sub_src.commit("s")
    top = init_repo(tmp_path / "top")
    top.write("top.txt", "y\n")
    top.commit("t")
    top.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_src.path), "sub")
    top.commit("add sub")
    prog, marker = _program(tmp_path, "subfilter", "cat")
    subprocess.run(["git", "config", "filter.subevil.clean", str(prog)], cwd=top.path / "sub", check=True)
    st = (top.path / "sub" / "s.txt").stat()
    os.utime(top.path / "sub" / "s.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    v = _value("git.repo", {"path": str(top.path)}, top.path)
    assert not marker.exists()
    assert v["clean"] is True and v["submodules"] == ["sub"]
    (top.path / "sub" / "s.txt").write_text("edited inside the submodule\n")
    assert _value("git.repo", {"path": str(top.path)}, top.path)["dirty"] == ["sub"]  # still seen, by policyrun
    assert not marker.exists()
    (top.path / "sub" / "s.txt").write_text("x\n")
    _make_stale(GitRepo(top.path / "sub"), "s.txt")
    _plain_git(top.path, "status")
    assert marker.exists()


def _signed_commit(repo: GitRepo) -> str:
    tree, parent = repo.sha("HEAD^{tree}"), repo.sha("HEAD")
    body = (f"tree {tree}\nparent {parent}\nauthor A <a@b> 1700000000 +0000\ncommitter A <a@b> 1700000000 +0000\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n")
    sha = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=repo.path, input=body,
                         text=True, capture_output=True, check=True).stdout.strip()
    repo.git("update-ref", "refs/heads/main", sha)
    return sha


def test_log_show_signature_gpg_program_never_runs(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "gpg", "exit 1")
    signed = _signed_commit(repo)
    repo.git("config", "log.showSignature", "true")
    for key in ("gpg.program", "gpg.openpgp.program"):
        repo.git("config", key, str(prog))
    v = _value("git.log", {"path": str(repo.path), "head": "main", "max_count": 2}, repo.path)
    assert v["commits"][0]["sha"] == signed and not marker.exists()
    _plain_git(repo.path, "log", "-1", "main")
    assert marker.exists()


def _partial_clone(repo: GitRepo, dest: Path) -> GitRepo:
    repo.git("config", "uploadpack.allowFilter", "true")
    repo.git("clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{repo.path}", str(dest))
    return GitRepo(dest, repo.clock)


@pytest.mark.parametrize("remote", ["ext", "ssh"])
def test_partial_clone_never_fetches_through_the_repositorys_remote(repo: GitRepo, tmp_path: Path,
                                                                   remote: str) -> None:
    clone = _partial_clone(repo, tmp_path / "partial")
    prog, marker = _program(tmp_path, f"remote-{remote}")
    if remote == "ext":
        clone.git("config", "remote.origin.url", f"ext::{prog}")
        clone.git("config", "protocol.allow", "always")
    else:
        clone.git("config", "remote.origin.url", "ssh://example.invalid/repo.git")
        clone.git("config", "core.sshCommand", str(prog))
    err = _error("git.show", {"path": str(clone.path), "rev": "v1", "file": "src/mod.py"}, clone.path)
    assert err.code == "git.object_missing" and "never fetches" in err.message
    assert err.message.startswith("src/mod.py at v1 (")
    # A diff's line counts make git itself ask for the absent blobs (and try the remote): refused.
    err = _error("git.diff", {"path": str(clone.path), "base": "v1", "head": "main"}, clone.path)
    assert err.code == "git.object_missing" and " at v1 (" in err.message
    assert not marker.exists()
    _plain_git(clone.path, "cat-file", "--batch", stdin="v1:src/mod.py\n")
    assert marker.exists()


def test_fsmonitor_hook_never_runs(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "fsmonitor")
    repo.git("config", "core.fsmonitor", str(prog))
    _value("git.repo", {"path": str(repo.path)}, repo.path)
    _value("search.regex", {"root": str(repo.path), "pattern": "vllm", "untracked": True}, repo.path)
    assert not marker.exists()
    _plain_git(repo.path, "status")
    assert marker.exists()


def test_diff_drivers_external_diff_and_pager_never_run(repo: GitRepo, tmp_path: Path) -> None:
    prog, marker = _program(tmp_path, "diff", "cat")
    repo.write(".gitattributes", "*.py diff=evil\n")
    repo.write("src/mod.py", "TARGET = 'vllm==0.8.0'\n")
    repo.commit("three")
    for key in ("diff.evil.textconv", "diff.evil.command", "diff.external", "core.pager", "pager.log",
                "pager.diff", "core.editor", "sequence.editor"):
        repo.git("config", key, str(prog))
    v = _value("git.diff", {"path": str(repo.path), "base": "v1", "head": "HEAD"}, repo.path)
    _value("git.log", {"path": str(repo.path), "head": "HEAD"}, repo.path)
    _value("git.show", {"path": str(repo.path), "file": "src/mod.py"}, repo.path)
    assert not marker.exists()
    assert {f["path"]: f["added"] for f in v["files"]}["src/mod.py"] == 1  # line counts of the real content
    _plain_git(repo.path, "diff", "v1", "HEAD")
    assert marker.exists()


def test_include_of_dev_zero_is_an_error_not_exhausted_memory(repo: GitRepo) -> None:
    repo.git("config", "include.path", "/dev/zero")
    out = _in_child(f"probe('git.repo', {{'path': {str(repo.path)!r}}}, {str(repo.path)!r})\n")
    assert out.get("code") == "git.failed" and "bad config" in out["message"]
    assert out["max_rss_kib"] < 512 * 1024  # nothing in policyrun's process read the include


def test_include_of_a_fifo_cannot_outlive_the_timeout(repo: GitRepo, tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    repo.git("config", "include.path", str(fifo))
    start = time.monotonic()
    out = _in_child(f"probe('git.resolve', {{'path': {str(repo.path)!r}, 'ref': 'v1'}}, {str(repo.path)!r}, "
                    "timeout_s=2)\n", timeout=60)
    assert out.get("code") == "probe.timeout" and time.monotonic() - start < 30


# --- search and the clean check cannot be blinded ------------------------------------------------

def test_gitattributes_binary_does_not_hide_text(repo: GitRepo) -> None:
    repo.write(".gitattributes", "hidden.txt binary\nquiet.txt -diff\n")
    repo.write("hidden.txt", "vllm==0.6.3\n")
    repo.write("quiet.txt", "vllm==0.6.3\n")
    repo.commit("attributes")
    for rev in (None, "HEAD"):
        v = _value("search.regex", {"root": str(repo.path), "pattern": r"vllm==0\.6\.3",
                                    **({"rev": rev} if rev else {})}, repo.path)
        assert set(v["counts"]) == {"a.txt", "hidden.txt", "quiet.txt"}, rev


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_index_flags_hide_no_edit(repo: GitRepo, flag: str) -> None:
    repo.git("update-index", flag, "a.txt")
    repo.write("a.txt", "vllm==9.9.9\n")  # same size, so even the stat data looks alike
    v = _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert v["dirty"] == ["a.txt"] and v["clean"] is False
    assert v["assume_unchanged" if flag == "--assume-unchanged" else "skip_worktree"] == ["a.txt"]
    s = _value("search.regex", {"root": str(repo.path), "pattern": r"vllm==([0-9.]+)"}, repo.path)
    assert s["distinct"] == ["0.7.0", "9.9.9"]  # what is on disk, not the index's idea of it
    repo.write("a.txt", "vllm==0.6.3\n")  # back to the committed bytes: clean again
    assert _value("git.repo", {"path": str(repo.path)}, repo.path)["clean"] is True


def _plain_status(repo: GitRepo) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV}
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo.path, env=env, capture_output=True,
                          text=True, timeout=60).stdout


@pytest.mark.parametrize("config", [
    {"core.bare": "true"},  # git then sees no work tree at all
    {"core.worktree": "{clean_copy}"},  # git compares a clean copy elsewhere
    {"core.checkStat": "minimal", "core.trustctime": "false"},  # same size, same mtime: "unchanged"
])
def test_configuration_cannot_hide_changes_from_the_clean_check(repo: GitRepo, tmp_path: Path,
                                                                  config: dict[str, str]) -> None:
    clean_copy = tmp_path / "clean-copy"
    shutil.copytree(repo.path, clean_copy, ignore=shutil.ignore_patterns(".git"))
    mtime = 1_600_000_000 * 10**9  # long before the index was written: not "racily clean"
    os.utime(repo.path / "a.txt", ns=(mtime, mtime))
    repo.git("update-index", "--refresh")
    # Same size as the committed "vllm==0.6.3", a new inode (written beside and renamed over), mtime
    # put back: only the inode and ctime git compares by default tell the edit.
    repo.write("a.txt.new", "vllm==9.9.9\n")
    os.replace(repo.path / "a.txt.new", repo.path / "a.txt")
    os.utime(repo.path / "a.txt", ns=(mtime, mtime))
    repo.write("new.txt", "untracked\n")
    for key, value in config.items():
        repo.git("config", key, value.format(clean_copy=clean_copy))
    if "status.showUntrackedFiles" not in config:
        assert "a.txt" not in _plain_status(repo)  # the control: plain git is blinded
    v = _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert (v["clean"], v["bare"], v["path"]) == (False, False, str(repo.path.resolve()))
    assert v["dirty"] == ["a.txt"] and v["untracked"] == ["new.txt"]
    s = _value("search.regex", {"root": str(repo.path), "pattern": r"vllm==([0-9.]+)", "untracked": True},
               repo.path)
    assert s["distinct"] == ["0.7.0", "9.9.9"] and "new.txt" not in s["counts"]
    repo.write("a.txt", "vllm==0.6.3\n")
    (repo.path / "new.txt").unlink()
    assert _value("git.repo", {"path": str(repo.path / "src")}, repo.path)["clean"] is True


def test_file_mode_false_cannot_hide_a_chmod(repo: GitRepo) -> None:
    repo.git("config", "core.fileMode", "false")
    (repo.path / "a.txt").chmod(0o755)
    assert _plain_status(repo) == ""  # the control
    v = _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert v["dirty"] == ["a.txt"] and v["clean"] is False


def test_a_bare_repository_is_still_bare(tmp_path: Path, repo: GitRepo) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(bare)], check=True, capture_output=True,
                   env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV})
    v = _value("git.repo", {"path": str(bare)}, tmp_path)
    assert (v["bare"], v["path"], v["head"]) == (True, str(bare.resolve()), repo.sha("HEAD"))


def test_sparse_checkout_files_absent_on_purpose_are_not_dirty(repo: GitRepo) -> None:
    repo.git("update-index", "--skip-worktree", "a.txt")
    (repo.path / "a.txt").unlink()
    v = _value("git.repo", {"path": str(repo.path)}, repo.path)
    assert v["clean"] is True and v["skip_worktree"] == ["a.txt"]


def test_unreadable_file_fails_the_search(repo: GitRepo, tmp_path: Path) -> None:
    repo.write("locked.txt", "vllm==0.6.3\n")
    repo.commit("locked")
    (repo.path / "locked.txt").chmod(0)
    # root reads anything: drop the capabilities that let it, so mode 000 means what it says
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable")
    for where in (repo.path, tmp_path / "plain"):
        if where != repo.path:
            shutil.copytree(repo.path, where, ignore=shutil.ignore_patterns(".git"))
            (where / "locked.txt").chmod(0)
        out = _in_child(f"probe('search.regex', {{'root': {str(where)!r}, 'pattern': 'vllm'}}, {str(where)!r})\n",
                        prefix=prefix)
        assert out.get("code") == "file.unreadable", out
        assert "locked.txt" in out["message"] and "incomplete" in out["message"]


def test_symlinks_out_of_the_root_are_never_followed(repo: GitRepo, tmp_path: Path) -> None:
    os.symlink("/etc/passwd", repo.path / "passwd")
    os.symlink("/etc", repo.path / "etc-dir")
    repo.commit("links")
    plain = tmp_path / "plain"
    shutil.copytree(repo.path, plain, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    for root, extra in ((repo.path, {}), (repo.path, {"rev": "HEAD"}), (plain, {})):
        v = _value("search.regex", {"root": str(root), "pattern": "^root:", **extra}, root)
        assert v["total"] == 0
        assert {"path": "passwd", "reason": "symlink", "size": None} in v["skipped"]
        assert {"path": "etc-dir", "reason": "symlink", "size": None} in v["skipped"]


def test_tracked_path_below_a_symlinked_directory_is_not_followed(repo: GitRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "src").mkdir(parents=True)
    (outside / "src" / "mod.py").write_text("vllm==6.6.6 read from outside the root\n")
    shutil.rmtree(repo.path / "src")
    os.symlink(outside / "src", repo.path / "src")  # the index still lists src/mod.py
    v = _value("search.regex", {"root": str(repo.path), "pattern": r"vllm==([0-9.]+)"}, repo.path)
    assert v["distinct"] == ["0.6.3"]
    assert v["skipped"] == [{"path": "src/mod.py", "reason": "symlink", "size": None}]


def test_devices_and_fifos_are_never_read(repo: GitRepo, tmp_path: Path) -> None:
    os.symlink("/dev/zero", repo.path / "zero")
    os.mkfifo(repo.path / "pipe")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("vllm==0.6.3\n")
    os.symlink("/dev/zero", plain / "zero")
    os.mkfifo(plain / "pipe")
    # git lists no FIFO (it tracks files and links only); the plain walk sees both and reads neither.
    for root, extra, expected in ((repo.path, ", 'untracked': True", {"zero": "symlink"}),
                                  (plain, "", {"zero": "symlink", "pipe": "special"})):
        out = _in_child(f"probe('search.regex', {{'root': {str(root)!r}, 'pattern': 'vllm'{extra}}}, "
                        f"{str(root)!r})\n", timeout=60)
        assert "value" in out, out
        skipped = {s["path"]: s["reason"] for s in out["value"]["skipped"]}
        assert skipped == expected and out["value"]["files_searched"] >= 1, out


def test_files_over_the_byte_cap_are_reported_never_silently_dropped(repo: GitRepo) -> None:
    big = b"x" * (9 * 1024 * 1024) + b"\nvllm==0.6.3\n"
    repo.write("big.txt", big)
    repo.commit("big")
    for extra in ({}, {"rev": "HEAD"}):
        v = _value("search.regex", {"root": str(repo.path), "pattern": "vllm", **extra}, repo.path)
        assert {"path": "big.txt", "reason": "too_large", "size": len(big)} in v["skipped"]
        assert "big.txt" not in v["counts"]
        v = _value("search.regex", {"root": str(repo.path), "pattern": "vllm", "max_file_bytes": 16 << 20,
                                    **extra}, repo.path)
        assert v["counts"]["big.txt"] == 1 and v["skipped"] == []


def test_binary_files_are_listed_as_skipped(repo: GitRepo) -> None:
    repo.write("blob.bin", b"\0vllm==0.6.3\n")
    repo.commit("blob")
    v = _value("search.regex", {"root": str(repo.path), "pattern": "vllm"}, repo.path)
    assert v["skipped"] == [{"path": "blob.bin", "reason": "binary", "size": 13}]


def test_catastrophic_pattern_finishes_within_the_timeout(repo: GitRepo, tmp_path: Path) -> None:
    repo.write("evil.txt", "a" * 32 + "!\n")
    repo.commit("evil")
    plain = tmp_path / "plain"
    shutil.copytree(repo.path, plain, ignore=shutil.ignore_patterns(".git"))
    probes = {f"p{i}": {"uses": "search.regex", "timeout_s": 3, "with": {"root": str(root), "pattern": "^(a+)+$"}}
              for i, root in enumerate((repo.path, plain))}
    rulebook = Rulebook.model_validate({"policyrun": 1, "name": "re2", "modes": {"m": {"phases": ["P"]}},
                                        "phases": [{"id": "P"}], "probes": probes})
    start = time.monotonic()
    facts = collect(rulebook, "m", {}, base_dir=tmp_path).facts
    assert time.monotonic() - start < 60  # a backtracking engine would never end
    for fact in facts.values():
        assert fact.ok and fact.value["total"] == 0, fact


def test_patterns_re2_cannot_run_are_parameter_errors_saying_so(repo: GitRepo) -> None:
    for pattern in (r"(?<![0-9.])0\.6\.3", r"(a)\1", r"0\.6(?=\.3)"):
        err = _error("search.regex", {"root": str(repo.path), "pattern": pattern}, repo.path)
        assert err.code == "search.invalid_pattern" and "RE2" in err.message and "`pattern`" in err.message
    err = _error("system.processes", {"pattern": r"(?<!x)vllm"}, repo.path)
    assert err.code == "system.bad_pattern" and "RE2" in err.message


# --- git edge cases -----------------------------------------------------------------------------

def test_dubious_ownership_is_its_own_error_never_bypassed(repo: GitRepo) -> None:
    env = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}
    p = str(repo.path)
    for kind, params in (("git.resolve", {"ref": "v1"}), ("git.repo", {}), ("git.log", {"head": "HEAD"}),
                         ("git.diff", {"base": "v1", "head": "HEAD"}), ("git.show", {"file": "a.txt"}),
                         ("git.ancestry", {"ancestor": "v1", "descendant": "HEAD"}), ("git.worktrees", {})):
        err = _error(kind, {"path": p, **params}, repo.path, env=env)
        assert err.code == "git.dubious_ownership", (kind, err.code, err.message)
        assert "owned by another user" in err.message and f"safe.directory {repo.path.resolve()}" in err.message
    err = _error("search.regex", {"root": p, "pattern": "vllm"}, repo.path, env=env)
    assert err.code == "git.dubious_ownership"  # not a silent fallback to reading the tree as a plain folder


def _every_git_probe(p: str) -> dict[str, Any]:
    probes = {
        "state": ("git.repo", {"path": p, "untracked": "all"}),
        "tag": ("git.resolve", {"path": p, "ref": "v1"}),
        "anc": ("git.ancestry", {"path": p, "ancestor": "v1", "descendant": "HEAD"}),
        "diff": ("git.diff", {"path": p, "base": "v1", "head": "HEAD"}),
        "wtdiff": ("git.worktree_diff", {"path": p}),
        "log": ("git.log", {"path": p, "head": "HEAD"}),
        "show": ("git.show", {"path": p, "file": "a.txt"}),
        "wts": ("git.worktrees", {"path": p}),
        "grep": ("search.regex", {"root": p, "pattern": "vllm", "untracked": True}),
        "grep_rev": ("search.literal", {"root": p, "pattern": "vllm", "rev": "v1"}),
        "imports": ("python.imports", {"root": p}),
        "imports_rev": ("python.imports", {"root": p, "rev": "v1"}),
        "symbols": ("python.symbols", {"path": p, "files": ["src/*.py"], "compare_rev": "v1"}),
        "bindings": ("python.bindings", {"root": p, "resolve": {"path": p, "rev": "v1", "compare_rev": "HEAD"}}),
        "constants": ("python.constants", {"root": p, "names": ["TARGET"]}),
        "claims": ("docs.claims", {"root": p, "subject": "(?i)\\bvllm\\b"}),
        "markers": ("markers", {"root": p}),
        "doc_rev": ("file.read", {"path": f"{p}/a.txt", "format": "yaml", "rev": "v1"}),
        "pins_rev": ("pins.package", {"root": p, "package": "vllm", "files": ["requirements*.txt"], "rev": "v1"}),
        "const_rev": ("pins.constant", {"file": f"{p}/src/mod.py", "name": "TARGET", "rev": "v1"}),
    }
    return {pid: {"uses": kind, "with": params} for pid, (kind, params) in probes.items()}


@pytest.mark.parametrize("setup", ["split-index", "untracked-cache"])
def test_every_git_based_probe_leaves_every_file_under_git_as_it_was(repo: GitRepo, tmp_path: Path,
                                                                     setup: str) -> None:
    if setup == "split-index":
        repo.git("update-index", "--split-index")
        assert list((repo.path / ".git").glob("sharedindex.*"))
    else:
        repo.git("config", "core.untrackedCache", "true")
        repo.git("update-index", "--untracked-cache")
        repo.write("new/untracked.txt", "vllm==1.0\n")
        repo.git("status", "--porcelain")  # fills the cache (this is the fixture writing, not a probe)
    repo.write("new/more.txt", "vllm==1.1\n")  # untracked (and the cache, if any, is out of date)
    _make_stale(repo, "a.txt")
    time.sleep(0.01)
    before = git_dir_files(repo.path / ".git")
    rulebook = Rulebook.model_validate({"policyrun": 1, "name": "ro", "modes": {"m": {"phases": ["P"]}},
                                        "phases": [{"id": "P"}], "probes": _every_git_probe(str(repo.path))})
    facts = collect(rulebook, "m", {}, base_dir=tmp_path).facts
    assert all(f.ok for f in facts.values()), {k: f.error for k, f in facts.items() if not f.ok}
    assert facts["state"].value["clean"] is False
    assert git_dir_files(repo.path / ".git") == before
    _plain_git(repo.path, "status")  # control: plain git does change something here
    assert git_dir_files(repo.path / ".git") != before


def _odd_names(where: Path) -> None:
    with open(os.path.join(os.fsencode(where), b"caf\xe9.txt"), "wb") as f:
        f.write(b"vllm==1.0\n")
    os.mkdir(os.path.join(os.fsencode(where), b"d\xff"))
    with open(os.path.join(os.fsencode(where), b"d\xff", b"x.txt"), "wb") as f:
        f.write(b"vllm==2.0\n")


def test_file_names_that_are_not_utf8_are_shown_escaped(repo: GitRepo, tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(repo.path), b"tracked\xfe.txt"), "wb") as f:
        f.write(b"vllm==3.0\n")
    repo.commit("odd tracked name")
    _odd_names(repo.path)
    state = _value("git.repo", {"path": str(repo.path), "untracked": "all"}, repo.path)
    assert state["untracked"] == ["caf\\xe9.txt", "d\\xff/x.txt"]
    diff = _value("git.diff", {"path": str(repo.path), "base": "v1", "head": "HEAD"}, repo.path)
    assert "tracked\\xfe.txt" in diff["added_paths"]
    plain = tmp_path / "plain"
    plain.mkdir()
    _odd_names(plain)
    for root, extra in ((repo.path, {"untracked": True}), (plain, {})):
        v = _value("search.regex", {"root": str(root), "pattern": r"vllm==([0-9.]+)", **extra}, root)
        assert {"caf\\xe9.txt": 1, "d\\xff/x.txt": 1}.items() <= v["counts"].items()
        json.dumps(v, ensure_ascii=False).encode("utf-8")  # every path is valid text
    for value in (state, diff):
        json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_show_never_returns_a_blob_hashed_to_something_else(repo: GitRepo) -> None:
    """A replace ref can make git show other content for a blob: policyrun reads the real object."""
    fake = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo.path, input="vllm==6.6.6\n",
                          text=True, capture_output=True, check=True).stdout.strip()
    real = repo.sha("HEAD:a.txt")
    repo.git("replace", real, fake)
    v = _value("git.show", {"path": str(repo.path), "file": "a.txt"}, repo.path)
    assert v["content"] == "vllm==0.6.3\n" and v["blob"] == real
    assert v["sha256"] == hashlib.sha256(b"vllm==0.6.3\n").hexdigest()
