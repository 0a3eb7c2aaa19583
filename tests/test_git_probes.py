"""git.* probes against fixture repositories: values, error codes and messages, and the promise
that collecting never changes the repository (index bytes and mtime included)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeError
from policyrun.probes.registry import get
from tests.gitfixtures import GitRepo, init_repo, run_probe, snapshot


@pytest.fixture
def repo(history: GitRepo) -> GitRepo:
    return history  # history_repo() in tmp_path/repo, copied from the session's (tests/conftest.py)


def value(kind: str, repo: GitRepo, **params: Any) -> Any:
    return run_probe(kind, {"path": str(repo.path), **params}, repo.path).value


def error(kind: str, path: Path, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        run_probe(kind, {"path": str(path), **params}, path)
    return info.value


def clone(repo: GitRepo, dest: Path, *args: str) -> GitRepo:
    out = GitRepo(dest, repo.clock)
    repo.git("clone", "-q", *args, f"file://{repo.path}", str(dest))
    return out


# --- git.repo -----------------------------------------------------------------------------------

def test_repo_clean_state(repo: GitRepo) -> None:
    v = value("git.repo", repo)
    assert v["path"] == str(repo.path.resolve())
    assert (v["branch"], v["head"], v["detached"]) == ("main", repo.sha("HEAD"), False)
    assert v["clean"] and v["dirty"] == [] and v["untracked"] == []
    assert (v["is_worktree"], v["shallow"], v["bare"], v["upstream"]) == (False, False, False, None)


def test_repo_from_a_subdirectory_reports_the_top_level(repo: GitRepo) -> None:
    result = run_probe("git.repo", {"path": "src"}, repo.path)
    assert result.value["path"] == str(repo.path.resolve())
    assert result.repo_head == repo.sha("HEAD")


def test_repo_dirty_staged_and_untracked(repo: GitRepo) -> None:
    repo.write("README.md", "changed\n")
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '9'\n")
    repo.git("add", "src/keep.py")
    repo.write("notes.txt", "untracked\n")
    repo.write("scratch/a.txt", "x")
    repo.write("scratch/b.txt", "y")
    v = value("git.repo", repo)
    assert v["dirty"] == ["README.md", "src/keep.py"]
    assert v["staged"] == ["src/keep.py"]
    assert v["untracked"] == ["notes.txt", "scratch/"]
    assert v["clean"] is False
    assert value("git.repo", repo, untracked="all")["untracked"] == ["notes.txt", "scratch/a.txt", "scratch/b.txt"]
    assert value("git.repo", repo, untracked="no")["untracked"] == []


def test_repo_detached_head(repo: GitRepo) -> None:
    repo.git("checkout", "-q", "--detach", "v1")
    v = value("git.repo", repo)
    assert (v["detached"], v["branch"], v["head"]) == (True, None, repo.sha("v1^{commit}"))


def test_repo_linked_worktree(repo: GitRepo, tmp_path: Path) -> None:
    repo.git("worktree", "add", "-q", "-b", "feature", str(tmp_path / "wt"))
    v = run_probe("git.repo", {"path": str(tmp_path / "wt")}, tmp_path).value
    assert (v["is_worktree"], v["branch"], v["path"]) == (True, "feature", str((tmp_path / "wt").resolve()))
    assert value("git.repo", repo)["is_worktree"] is False


def test_repo_shallow_clone_and_upstream(repo: GitRepo, tmp_path: Path) -> None:
    shallow = clone(repo, tmp_path / "shallow", "--depth", "1")
    assert value("git.repo", shallow)["shallow"] is True
    full = clone(repo, tmp_path / "full")
    v = value("git.repo", full)
    assert (v["shallow"], v["upstream"], v["ahead"], v["behind"]) == (False, "origin/main", 0, 0)
    full.write("new.txt", "x")
    full.commit("local")
    assert value("git.repo", full)["ahead"] == 1


def test_repo_bare(repo: GitRepo, tmp_path: Path) -> None:
    bare = clone(repo, tmp_path / "bare.git", "--bare")
    v = value("git.repo", bare)
    assert (v["bare"], v["branch"], v["head"], v["clean"]) == (True, "main", repo.sha("HEAD"), True)
    assert value("git.resolve", bare, ref="v2")["sha"] == repo.sha("v2^{commit}")


def test_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    err = error("git.repo", tmp_path / "plain")
    assert err.code == "git.not_a_repository" and "not inside a git repository" in err.message
    assert error("git.repo", tmp_path / "missing").code == "git.not_a_repository"


def test_no_git_on_path_is_git_not_installed(repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    err = error("git.repo", repo.path)
    assert err.code == "git.not_installed"
    assert "cannot run git" in err.message and "install git or put it on PATH" in err.message


def test_inherited_git_dir_does_not_redirect_probes(repo: GitRepo, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    other = init_repo(tmp_path / "other")
    other.write("x", "x")
    other.commit("other")
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))  # as inside a git hook
    assert value("git.repo", repo)["head"] == repo.sha("HEAD")


# --- git.resolve --------------------------------------------------------------------------------

def test_resolve_annotated_tag_is_peeled(repo: GitRepo) -> None:
    v = value("git.resolve", repo, ref="v1")
    first = repo.sha("v1^{commit}")
    assert v == {"ref": "v1", "sha": first, "object": repo.sha("v1"), "kind": "tag", "annotated": True,
                 "full_name": "refs/tags/v1"}
    assert v["object"] != first


def test_resolve_lightweight_tag_branch_and_shas(repo: GitRepo) -> None:
    first = repo.sha("v1^{commit}")
    light = value("git.resolve", repo, ref="light-v1")
    assert (light["sha"], light["object"], light["annotated"], light["kind"]) == (first, first, False, "tag")
    assert value("git.resolve", repo, ref="main")["kind"] == "branch"
    head = repo.sha("HEAD")
    assert value("git.resolve", repo, ref=head)["kind"] == "sha"
    short = value("git.resolve", repo, ref=head[:10])
    assert (short["sha"], short["kind"]) == (head, "abbrev_sha")
    back = value("git.resolve", repo, ref="HEAD~2")
    assert (back["sha"], back["kind"]) == (first, "other")


def test_resolve_remote_branch(repo: GitRepo, tmp_path: Path) -> None:
    full = clone(repo, tmp_path / "full")
    v = value("git.resolve", full, ref="origin/main")
    assert (v["kind"], v["sha"], v["full_name"]) == ("remote_branch", repo.sha("main"), "refs/remotes/origin/main")


def test_resolve_unknown_ref(repo: GitRepo) -> None:
    err = error("git.resolve", repo.path, ref="v9")
    assert err.code == "git.unknown_ref"
    assert "unknown revision 'v9'" in err.message and str(repo.path.resolve()) in err.message
    assert err.commands and "rev-parse" in err.commands[0]


def test_resolve_ambiguous_ref_names_both(repo: GitRepo) -> None:
    repo.git("branch", "v1", "main")
    err = error("git.resolve", repo.path, ref="v1")
    assert err.code == "git.ambiguous_ref"
    assert "refs/heads/v1" in err.message and "refs/tags/v1" in err.message
    assert value("git.resolve", repo, ref="refs/tags/v1")["sha"] == repo.sha("refs/tags/v1^{commit}")
    # Every probe that takes a rev refuses the ambiguity instead of silently picking one.
    assert error("git.diff", repo.path, base="v1", head="main").code == "git.ambiguous_ref"


def test_resolve_ambiguous_abbreviated_sha(repo: GitRepo) -> None:
    paths = "\n".join(str(repo.write(f"blobs/{i}.txt", f"blob {i}\n")) for i in range(600))
    subprocess.run(["git", "hash-object", "-w", "--stdin-paths"], cwd=repo.path, input=paths, text=True,
                   check=True, capture_output=True)
    objects = repo.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    seen: set[str] = set()
    for obj in objects:
        if obj[:4] in seen:
            prefix = obj[:4]
            break
        seen.add(obj[:4])
    err = error("git.resolve", repo.path, ref=prefix)
    assert err.code == "git.ambiguous_ref" and prefix in err.message


def test_resolve_rejects_option_like_refs(repo: GitRepo) -> None:
    assert error("git.resolve", repo.path, ref="--output=/tmp/x").code == "git.unknown_ref"


def test_resolve_history_missing_from_shallow_clone(repo: GitRepo, tmp_path: Path) -> None:
    shallow = clone(repo, tmp_path / "shallow", "--depth", "1")
    err = error("git.resolve", shallow.path, ref=repo.sha("v1^{commit}"))
    assert err.code == "git.shallow" and "git fetch --unshallow" in err.message
    assert error("git.resolve", shallow.path, ref="HEAD~1").code == "git.shallow"


# --- git.ancestry -------------------------------------------------------------------------------

def test_ancestry(repo: GitRepo) -> None:
    first = repo.sha("v1^{commit}")
    fwd = value("git.ancestry", repo, ancestor="v1", descendant="v2")
    assert (fwd["is_ancestor"], fwd["merge_base"], fwd["ancestor_sha"]) == (True, first, first)
    back = value("git.ancestry", repo, ancestor="v2", descendant="v1")
    assert (back["is_ancestor"], back["merge_base"]) == (False, first)
    assert value("git.ancestry", repo, ancestor="main", descendant="main")["is_ancestor"] is True


def test_ancestry_diverged_branches(repo: GitRepo) -> None:
    repo.git("checkout", "-q", "-b", "side", "v1")
    repo.write("side.txt", "side\n")
    repo.commit("side work")
    v = value("git.ancestry", repo, ancestor="side", descendant="main")
    assert (v["is_ancestor"], v["merge_base"]) == (False, repo.sha("v1^{commit}"))


def test_ancestry_cut_by_shallow_clone(repo: GitRepo, tmp_path: Path) -> None:
    repo.git("checkout", "-q", "-b", "side", "v1")
    repo.write("side.txt", "side\n")
    repo.commit("side work")
    repo.git("checkout", "-q", "main")
    shallow = clone(repo, tmp_path / "shallow", "--depth", "1", "--no-single-branch")
    err = error("git.ancestry", shallow.path, ancestor="origin/side", descendant="origin/main")
    assert err.code == "git.shallow" and "shallow clone" in err.message


# --- git.diff -----------------------------------------------------------------------------------

def test_diff_is_rename_aware_with_line_stats(repo: GitRepo) -> None:
    v = value("git.diff", repo, base="v1", head="v2")
    files = {f["path"]: f for f in v["files"]}
    assert set(files) == {"README.md", "src/new_name.py", "docs/gone.md", "data/new.txt", "data/blob.bin",
                          "CHANGELOG.md"}
    renamed = files["src/new_name.py"]
    assert (renamed["status"], renamed["old_path"], renamed["added"], renamed["deleted"]) == \
        ("R", "src/old_name.py", 1, 0)
    assert renamed["similarity"] >= 90
    assert files["README.md"] == {"status": "M", "path": "README.md", "old_path": None, "similarity": None,
                                  "added": 2, "deleted": 1, "binary": False}
    assert (files["docs/gone.md"]["status"], files["docs/gone.md"]["deleted"]) == ("D", 2)
    assert (files["data/blob.bin"]["added"], files["data/blob.bin"]["binary"]) == (None, True)
    assert v["totals"] == {"files": 6, "added": 5, "deleted": 3, "added_files": 3, "deleted_files": 1,
                           "modified_files": 1, "renamed": 1, "copied": 0, "type_changed": 0, "binary_files": 1}
    assert v["renamed"] == {"src/old_name.py": "src/new_name.py"}
    assert v["deleted_paths"] == ["docs/gone.md"]
    assert v["added_paths"] == ["CHANGELOG.md", "data/blob.bin", "data/new.txt"]
    assert "src/old_name.py" in v["changed_paths"] and "src/new_name.py" in v["changed_paths"]
    assert (v["base_sha"], v["head_sha"]) == (repo.sha("v1^{commit}"), repo.sha("v2^{commit}"))
    assert v["renames_complete"] is True


def test_diff_uses_two_git_commands_after_opening_the_repository(repo: GitRepo) -> None:
    result = run_probe("git.diff", {"path": str(repo.path), "base": "v1", "head": "v2"}, repo.path)
    # Opening: one rev-parse (discovery, HEAD) and one `config --list` (filter drivers to neutralise).
    assert [c.split(" ")[3] for c in result.commands] == ["rev-parse", "config", "rev-parse", "diff"]
    assert "diff --raw --numstat -z -M" in result.commands[3]


def test_diff_paths_and_odd_file_names(repo: GitRepo) -> None:
    repo.write("a dir/ünï côde.txt", "".join(f"{i}\n" for i in range(30)))
    repo.commit("odd name")
    repo.git("mv", "a dir/ünï côde.txt", "a dir/tab\there.txt")
    repo.commit("rename odd")
    v = value("git.diff", repo, base="HEAD~1", head="HEAD")
    assert v["renamed"] == {"a dir/ünï côde.txt": "a dir/tab\there.txt"}
    only_src = value("git.diff", repo, base="v1", head="v2", paths=["src"])
    assert [f["path"] for f in only_src["files"]] == ["src/new_name.py"]


def test_diff_from_merge_base(repo: GitRepo) -> None:
    repo.git("checkout", "-q", "-b", "side", "v1")
    repo.write("side.txt", "side\n")
    repo.commit("side work")
    plain = value("git.diff", repo, base="main", head="side")
    assert "CHANGELOG.md" in plain["deleted_paths"]
    v = value("git.diff", repo, base="main", head="side", from_merge_base=True)
    assert [f["path"] for f in v["files"]] == ["side.txt"]


def test_diff_unknown_base(repo: GitRepo) -> None:
    err = error("git.diff", repo.path, base="nope", head="v2")
    assert err.code == "git.unknown_ref" and "'nope'" in err.message


# --- git.log ------------------------------------------------------------------------------------

def test_log_first_parent_between_tags(repo: GitRepo) -> None:
    v = value("git.log", repo, base="v1", head="v2")
    assert [c["subject"] for c in v["commits"]] == ["third", "second"]
    assert v["count"] == 2 and v["commits"][0]["sha"] == repo.sha("v2^{commit}")
    assert v["commits"][0]["author"] == "Ada Lovelace" and v["commits"][0]["email"] == "ada@example.com"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", v["commits"][0]["date"])


def test_log_follows_first_parents_only(repo: GitRepo) -> None:
    repo.git("checkout", "-q", "-b", "feature")
    for i in range(2):
        repo.write(f"f{i}.txt", str(i))
        repo.commit(f"feature {i}")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    v = value("git.log", repo, base="v2", head="main")
    assert [c["subject"] for c in v["commits"]] == ["merge feature"]
    assert value("git.log", repo, head="main", max_count=2)["count"] == 2


def test_log_cut_by_shallow_clone(repo: GitRepo, tmp_path: Path) -> None:
    shallow = clone(repo, tmp_path / "shallow", "--depth", "1")
    err = error("git.log", shallow.path, head="HEAD")
    assert err.code == "git.shallow"
    assert value("git.log", shallow, head="HEAD", max_count=1)["count"] == 1  # complete: nothing cut


# --- git.show -----------------------------------------------------------------------------------

def test_show_file_at_revision(repo: GitRepo) -> None:
    v = value("git.show", repo, rev="v1", file="README.md")
    assert "vllm==0.6.3" in v["content"] and v["blob"] == repo.sha("v1:README.md")
    assert v["commit"] == repo.sha("v1^{commit}") and v["binary"] is False
    assert "vllm==0.7.0" in value("git.show", repo, file="README.md")["content"]  # rev defaults to HEAD
    binary = value("git.show", repo, file="data/blob.bin")
    assert (binary["binary"], binary["content"], binary["size"]) == (True, None, 10)


def test_show_a_path_the_revision_does_not_have(repo: GitRepo) -> None:
    err = error("git.show", repo.path, rev="v1", file="data/new.txt")
    assert err.code == "file.not_found" and "data/new.txt does not exist at v1" in err.message
    err = error("git.show", repo.path, rev="v1", file="src")
    assert err.code == "file.not_found" and "src is a directory at v1" in err.message
    assert error("git.show", repo.path, rev="v7", file="README.md").code == "git.unknown_ref"


# --- git.worktrees ------------------------------------------------------------------------------

def test_worktrees(repo: GitRepo, tmp_path: Path) -> None:
    repo.git("worktree", "add", "-q", "-b", "feature", str(tmp_path / "wt1"))
    repo.git("worktree", "add", "-q", "--detach", str(tmp_path / "wt2"), "v1")
    v = value("git.worktrees", repo)
    assert [(w["path"], w["branch"], w["detached"], w["main"]) for w in v] == [
        (str(repo.path.resolve()), "main", False, True),
        (str((tmp_path / "wt1").resolve()), "feature", False, False),
        (str((tmp_path / "wt2").resolve()), None, True, False),
    ]
    assert v[2]["head"] == repo.sha("v1^{commit}")


# --- git.worktree_diff ---------------------------------------------------------------------------

def test_worktree_diff_staged_unstaged_and_untracked(repo: GitRepo) -> None:
    assert value("git.worktree_diff", repo)["clean"] is True
    repo.write("README.md", "# demo\n\nvllm==0.8.0 is the current pin\nnew line\n")  # unstaged
    repo.git("mv", "src/new_name.py", "src/renamed.py")  # staged rename
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '0.8.0'\n")
    repo.git("add", "src/keep.py")  # staged edit ...
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '0.9.0'\n")  # ... edited again, unstaged
    repo.write("notes/todo.txt", "x\n")  # untracked
    repo.write("build/out.o", "x\n")
    repo.write(".gitignore", "build/\n")  # untracked; build/ ignored
    v = value("git.worktree_diff", repo)
    import jsonschema

    jsonschema.Draft202012Validator(get("git.worktree_diff").fact_schema).validate(v)  # type: ignore[union-attr]
    assert v["base"] == "HEAD" and v["base_sha"] == repo.sha("HEAD") and v["clean"] is False
    assert v["changed_paths"] == ["README.md", "src/keep.py", "src/new_name.py", "src/renamed.py"]
    assert v["renamed"] == {"src/new_name.py": "src/renamed.py"}
    by_path = {f["path"]: f for f in v["files"]}
    assert (by_path["README.md"]["added"], by_path["README.md"]["deleted"]) == (1, 1)
    assert v["staged"]["changed_paths"] == ["src/keep.py", "src/new_name.py", "src/renamed.py"]
    assert v["unstaged"]["changed_paths"] == ["README.md", "src/keep.py"]
    assert v["untracked"] == [".gitignore", "notes/todo.txt"]
    # Against an older revision: the committed changes since v1 count too.
    old = value("git.worktree_diff", repo, base="v1", untracked=False)
    assert "docs/gone.md" in old["deleted_paths"] and old["untracked"] == []
    assert old["staged"]["changed_paths"] != v["staged"]["changed_paths"]
    assert value("git.worktree_diff", repo, paths=["src"])["changed_paths"] == [
        "src/keep.py", "src/new_name.py", "src/renamed.py"]


def test_worktree_diff_ignores_a_new_mtime_and_never_hashes_a_link(repo: GitRepo, tmp_path: Path) -> None:
    _make_index_stale(repo)  # README.md: same content, new mtime
    blob = repo.path / "data" / "blob.bin"
    os.utime(blob, ns=(blob.stat().st_atime_ns, blob.stat().st_mtime_ns + 5_000_000_000))  # a binary one too
    assert value("git.worktree_diff", repo)["clean"] is True
    (repo.path / "data" / "blob.bin").unlink()
    (repo.path / "data" / "blob.bin").symlink_to("/dev/zero")  # hashing it would never end
    v = value("git.worktree_diff", repo)
    assert v["changed_paths"] == ["data/blob.bin"] and v["files"][0]["status"] == "T"
    assert not any(c.startswith(f"git -C {repo.path.resolve()} diff ") for c in
                   run_probe("git.worktree_diff", {"path": str(repo.path)}, repo.path).commands)  # plumbing only


def test_worktree_diff_does_not_trust_index_flags(repo: GitRepo) -> None:
    # A repository under audit can flag entries so that git never compares them with the disk.
    repo.git("update-index", "--assume-unchanged", "README.md")
    repo.git("update-index", "--skip-worktree", "src/keep.py")
    repo.write("README.md", "# edited under an assume-unchanged flag\n")
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '9.9.9'\n")
    assert repo.git("diff", "--name-only") == ""  # git itself shows nothing
    v = value("git.worktree_diff", repo)
    assert v["unstaged"]["changed_paths"] == ["README.md", "src/keep.py"] and v["clean"] is False
    assert v["changed_paths"] == ["README.md", "src/keep.py"]
    assert all(f["added"] is None for f in v["unstaged"]["files"])  # hashed, not diffed: counts unknown
    repo.write("README.md", "# demo\n\nvllm==0.7.0 is the current pin\nnew line\n")  # back as committed
    (repo.path / "src" / "keep.py").unlink()  # a skip-worktree file absent from disk: sparse, not a change
    assert value("git.worktree_diff", repo)["clean"] is True


# --- read-only ----------------------------------------------------------------------------------

def _make_index_stale(repo: GitRepo) -> None:
    """A tracked file whose mtime changed but content did not: plain `git status` would rewrite the index."""
    readme = repo.path / "README.md"
    st = readme.stat()
    os.utime(readme, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def _every_probe(repo: GitRepo, worktree: Path) -> dict[str, Any]:
    p = str(repo.path)
    probes = {
        "state": ("git.repo", {"path": p, "untracked": "all"}),
        "wt_state": ("git.repo", {"path": str(worktree)}),
        "tag": ("git.resolve", {"path": p, "ref": "v1"}),
        "bad": ("git.resolve", {"path": p, "ref": "nope"}),
        "anc": ("git.ancestry", {"path": p, "ancestor": "v1", "descendant": "v2"}),
        "diff": ("git.diff", {"path": p, "base": "v1", "head": "v2", "from_merge_base": True}),
        "log": ("git.log", {"path": p, "base": "v1", "head": "main"}),
        "show": ("git.show", {"path": p, "rev": "v1", "file": "README.md"}),
        "wtdiff": ("git.worktree_diff", {"path": p}),
        "wts": ("git.worktrees", {"path": p}),
        "grep": ("search.regex", {"root": p, "pattern": r"vllm==(\S+)", "untracked": True}),
        "grep_rev": ("search.regex", {"root": p, "pattern": r"vllm==(\S+)", "rev": "v1"}),
        "grep_py": ("search.regex", {"root": p, "pattern": r"vllm==(\x{30})\."}),
        "literal": ("search.literal", {"root": p, "pattern": "current pin", "include": ["*.md"]}),
    }
    return {pid: {"uses": kind, "with": params} for pid, (kind, params) in probes.items()}


def test_collecting_every_git_and_search_probe_changes_nothing(repo: GitRepo, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "feature", str(worktree))
    repo.write("untracked.txt", "vllm==1.0\n")
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '0.7.0'\n")
    repo.git("add", "src/keep.py")
    _make_index_stale(repo)
    before = snapshot(repo)
    rulebook = Rulebook.model_validate({"policyrun": 1, "name": "ro", "modes": {"m": {"phases": ["P"]}},
                                        "phases": [{"id": "P"}], "probes": _every_probe(repo, worktree)})
    facts = collect(rulebook, "m", {}, base_dir=tmp_path).facts
    assert {k for k, f in facts.items() if not f.ok} == {"bad"}
    assert facts["grep_py"].value["distinct"] == ["0"]  # `vllm==0.7.0` in README.md
    # README.md is stat-dirty (new mtime, same content): not a change; the staged edit is one.
    assert facts["wtdiff"].value["changed_paths"] == ["src/keep.py"]
    assert facts["wtdiff"].value["untracked"] == ["untracked.txt"]
    assert snapshot(repo) == before


def test_plain_git_status_would_have_rewritten_the_index(repo: GitRepo) -> None:
    """Control for the test above: the stale index really is one git would refresh."""
    _make_index_stale(repo)
    before = snapshot(repo)
    subprocess.run(["git", "status", "--porcelain"], cwd=repo.path, capture_output=True, check=True,
                   env={k: v for k, v in os.environ.items() if k != "GIT_OPTIONAL_LOCKS"})
    assert snapshot(repo).index_mtime_ns != before.index_mtime_ns


def test_commits_looks_up_many_ids_and_reports_the_ones_it_does_not_hold(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("a.txt", "1\n")
    first = repo.commit("one")
    repo.write("a.txt", "2\n")
    second = repo.commit("two")
    repo.git("tag", "-a", "v1", "-m", "release", first)
    tag_object = repo.git("rev-parse", "v1").strip()
    tree = repo.git("rev-parse", f"{second}^{{tree}}").strip()
    absent = "98945f69035af6035660609b04d7b4a34fcc94be"
    v = run_probe("git.commits", {"path": str(repo.path), "shas": [second[:12], first, tag_object, absent, tree,
                                                                     "v1", first]}, repo.path).value
    assert [(c["ref"], c["found"], c["sha"], c["reason"]) for c in v["commits"]] == [
        (second[:12], True, second, None),
        (first, True, first, None),
        (tag_object, True, first, None),  # an annotated tag's object peels to its commit
        (absent, False, None, "missing"),  # upstream history a release-archive source does not hold
        (tree, False, None, "missing"),  # not a commit
        ("v1", False, None, "not_hex"),  # commit ids only: a name is never resolved here
    ]
    assert v["by_ref"][absent] is None and v["by_ref"][second[:12]] == second
    assert v["unresolved"] == [absent, tree, "v1"]
