"""Repository history probes: refs, commits, ancestry, diffs, first-parent logs, files at a revision,
worktrees (`git.repo`, the state of a working tree, is repo/gitstate.py).

Every git command goes through the read-only client (policyrun.probes._kit.gitclient): no locks,
no fetches, nothing from the repository runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from policyrun.probes._kit.gitclient import (FULL_SHA, HEX, GitRepo, ambiguous_ref_error, check_rev, history_cut,
                                             resolve_commits, rev_param, shallow_error, unresolved_error)
from policyrun.probes._kit.gitobjects import ObjectMissing, list_tree, locate_missing, object_missing, read_blobs
from policyrun.probes.base import ProbeError
from policyrun.probes.repo.gitprobe import NULLABLE_SHA, PATHS, SHA, GitProbe, fact_object, prop, repo_params


_REF_KINDS = (("refs/heads/", "branch"), ("refs/tags/", "tag"), ("refs/remotes/", "remote_branch"))


def _ref_kind(ref: str, full_name: str | None, obj: str) -> str:
    if full_name and full_name in (ref, f"refs/{ref}", f"refs/tags/{ref}", f"refs/heads/{ref}",
                                   f"refs/remotes/{ref}", f"refs/remotes/{ref}/HEAD"):
        return next((kind for prefix, kind in _REF_KINDS if full_name.startswith(prefix)), "other")
    lowered = ref.lower()
    if FULL_SHA.fullmatch(lowered):
        return "sha"
    if HEX.fullmatch(ref) and obj.startswith(lowered):
        return "abbrev_sha"
    return "other"


class ResolveProbe(GitProbe):
    kind = "git.resolve"
    summary = "A ref (branch, tag, sha, abbreviated sha, HEAD~n...) resolved to a full sha; tags peeled."
    params_schema = repo_params(["ref"], ref=rev_param("Any revision git understands."))
    fact_schema = fact_object(
        "The resolved ref.",
        ref=prop("string", "The ref as given."),
        sha=prop("string", "Full sha of the object the ref names, annotated tags peeled (usually a commit)."),
        object=prop("string", "Full sha before peeling (the tag object for an annotated tag)."),
        kind=prop("string", "How the ref was written.",
                   enum=["branch", "tag", "sha", "abbrev_sha", "remote_branch", "other"]),
        annotated=prop("boolean", "The ref is an annotated tag."),
        full_name=prop(["string", "null"], "Full ref name (refs/tags/v1), null for a sha."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        ref = params["ref"]
        check_rev(ref)
        proc = repo.run(["rev-parse", ref, f"{ref}^{{}}", "--symbolic-full-name", ref, "--"], ok=(0, 128))
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise unresolved_error(repo, ref, stderr)
        ambiguous = ambiguous_ref_error(repo, stderr)
        if ambiguous:
            raise ambiguous
        lines = [ln for ln in proc.stdout.decode("utf-8", "backslashreplace").splitlines() if ln != "--"]
        obj, peeled = lines[0], lines[1]
        full_name = lines[2] if len(lines) > 2 and lines[2].startswith("refs/") else None
        return {"ref": ref, "sha": peeled, "object": obj, "kind": _ref_kind(ref, full_name, obj),
                "annotated": obj != peeled, "full_name": full_name}


class CommitsProbe(GitProbe):
    kind = "git.commits"
    summary = ("Several commit ids (full or abbreviated hex, as annotations and messages quote them) looked up "
               "at once; one the repository does not hold is reported, never an error.")
    params_schema = repo_params(["shas"], shas=prop("array", "Commit ids to look up (hex, 4 to 64 digits); "
                                                          "anything else is reported as not a commit id.",
                                                  items={"type": "string"}, maxItems=10000))
    fact_schema = fact_object(
        "Each id, found or not.",
        commits=prop("array", "One row per distinct id, in the order given: `{ref, found, sha, reason}`; "
                      "`reason` is `missing`, `ambiguous` or `not_hex` when not found.",
                      items={"type": "object", "properties": {
                          "ref": {"type": "string"}, "found": {"type": "boolean"},
                          "sha": {"type": ["string", "null"]}, "reason": {"type": ["string", "null"]}}}),
        by_ref=prop("object", "id → full commit sha, or null when the repository does not hold it.",
                     additionalProperties={"type": ["string", "null"]}),
        unresolved=prop("array", "The ids the repository does not hold (or not unambiguously).",
                         items={"type": "string"}),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        refs = list(dict.fromkeys(params["shas"]))
        hexes = [r for r in refs if HEX.fullmatch(r)]
        answers: dict[str, tuple[str | None, str | None]] = {r: (None, "not_hex") for r in refs if r not in hexes}
        if hexes:
            # One batch for every id; `^{commit}` peels a tag and refuses a tree or blob.
            proc = repo.run(["cat-file", "--batch-check"],
                            stdin="".join(f"{r.lower()}^{{commit}}\n" for r in hexes).encode())
            lines = proc.stdout.decode("utf-8", "replace").splitlines()
            for ref, line in zip(hexes, lines, strict=False):
                parts = line.split()
                if len(parts) == 3 and parts[1] == "commit":
                    answers[ref] = (parts[0], None)
                else:
                    answers[ref] = (None, "ambiguous" if parts[-1:] == ["ambiguous"] else "missing")
            for ref in hexes[len(lines):]:
                answers[ref] = (None, "missing")
        rows = [{"ref": r, "found": answers[r][0] is not None, "sha": answers[r][0], "reason": answers[r][1]}
                for r in refs]
        return {"commits": rows, "by_ref": {r["ref"]: r["sha"] for r in rows},
                "unresolved": [r["ref"] for r in rows if not r["found"]]}


class AncestryProbe(GitProbe):
    kind = "git.ancestry"
    summary = "Whether one commit is an ancestor of another, and their merge base."
    params_schema = repo_params(["ancestor", "descendant"], ancestor=rev_param("The presumed ancestor."),
                            descendant=rev_param("The presumed descendant."))
    fact_schema = fact_object(
        "Ancestry between two commits.",
        ancestor=prop("string", "As given."), descendant=prop("string", "As given."),
        ancestor_sha=SHA, descendant_sha=SHA,
        is_ancestor=prop("boolean", "`ancestor` is reachable from `descendant` (a commit is its own ancestor)."),
        merge_base=NULLABLE_SHA, merge_bases=PATHS | {"description": "Every best common ancestor (criss-cross)."},
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        anc, desc = resolve_commits(repo, [params["ancestor"], params["descendant"]])
        bases = repo.run(["merge-base", "--all", anc, desc], ok=(0, 1)).stdout.decode("utf-8", "backslashreplace").split()
        # A is an ancestor of D exactly when the merge base of the two is A itself.
        is_ancestor = anc in bases
        if not is_ancestor and history_cut(repo, [anc, desc]):
            raise shallow_error(repo, f"cannot tell whether {params['ancestor']} is an ancestor of "
                                       f"{params['descendant']}")
        return {"ancestor": params["ancestor"], "descendant": params["descendant"], "ancestor_sha": anc,
                "descendant_sha": desc, "is_ancestor": is_ancestor, "merge_base": bases[0] if bases else None,
                "merge_bases": bases}


DIFF_FILE = {"type": "object", "properties": {
    "status": {"enum": ["A", "M", "D", "R", "C", "T", "U", "X"]}, "path": {"type": "string"},
    "old_path": {"type": ["string", "null"]}, "similarity": {"type": ["integer", "null"]},
    "added": {"type": ["integer", "null"], "description": "Lines added; null for a binary file."},
    "deleted": {"type": ["integer", "null"]}, "binary": {"type": "boolean"}}}


class DiffProbe(GitProbe):
    kind = "git.diff"
    summary = "Rename-aware changes between two revisions, with per-file line counts."
    params_schema = repo_params(
        ["base", "head"], base=rev_param("Old side."), head=rev_param("New side."),
        from_merge_base=prop("boolean", "Diff from the merge base of base and head (`base...head`).",
                              default=False),
        paths=prop("array", "Limit to these pathspecs (repository-relative).", items={"type": "string"}),
        find_copies=prop("boolean", "Also detect copies (-C).", default=False),
        rename_limit=prop("integer", "git's diff.renameLimit for this diff (0: no limit).", minimum=0),
    )
    fact_schema = fact_object(
        "Changes from base to head.",
        base=prop("string", "As given."), head=prop("string", "As given."), base_sha=SHA, head_sha=SHA,
        files=prop("array", "One entry per changed file, in git's order.", items=DIFF_FILE),
        totals=prop("object", "files, added, deleted (lines), added_files, deleted_files, modified_files, "
                               "renamed, copied, type_changed, binary_files."),
        changed_paths=PATHS | {"description": "Every path touched, on either side of a rename, sorted."},
        added_paths=PATHS, deleted_paths=PATHS, modified_paths=PATHS,
        renamed=prop("object", "Old path → new path.", additionalProperties={"type": "string"}),
        renames_complete=prop("boolean", "False when git skipped inexact rename detection (too many files)."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        base, head = resolve_commits(repo, [params["base"], params["head"]])
        args = ["diff", "--raw", "--numstat", "-z", "-M", "--no-ext-diff", "--no-textconv", "--no-relative",
                "--no-color"]
        if params.get("find_copies"):
            args.append("-C")
        if "rename_limit" in params:
            args.append(f"-l{params['rename_limit']}")
        if params.get("from_merge_base"):
            bases = repo.run(["merge-base", base, head], ok=(0, 1)).stdout.decode("utf-8", "backslashreplace").split()
            if not bases:
                if history_cut(repo, [base, head]):
                    raise shallow_error(repo, "no merge base found")
                raise ProbeError("git.no_merge_base", f"{params['base']} and {params['head']} have no common "
                                                      "ancestor", commands=repo.commands)
            base = bases[0]
        try:
            proc = repo.run([*args, base, head, "--", *params.get("paths", [])])
        except ObjectMissing as exc:  # line counts read both sides' blobs
            raise locate_missing(repo, exc, {base: params["base"], head: params["head"]}) from None
        files = parse_raw_numstat(proc.stdout)
        value = summarise_diff(files)
        value.update(base=params["base"], head=params["head"], base_sha=base, head_sha=head,
                     renames_complete="rename detection was skipped" not in proc.stderr.decode(errors="replace"))
        return value


def parse_raw_numstat(out: bytes) -> list[dict[str, Any]]:
    """Parse `git diff --raw --numstat -z`: the raw records, then numstat records in the same order."""
    tokens = out.decode("utf-8", "backslashreplace").split("\0")
    files: list[dict[str, Any]] = []
    stats: list[tuple[int | None, int | None]] = []
    i = 0
    while i < len(tokens) and tokens[i]:
        tok = tokens[i]
        if tok.startswith(":"):
            status = tok.split(" ")[4]
            letter = status[0]
            if letter in "RC":
                entry = {"status": letter, "old_path": tokens[i + 1], "path": tokens[i + 2],
                         "similarity": int(status[1:]) if status[1:] else None}
                i += 3
            else:
                entry = {"status": letter, "old_path": None, "path": tokens[i + 1], "similarity": None}
                i += 2
            files.append(entry)
        else:
            plus, minus, path = tok.split("\t", 2)
            stats.append((None if plus == "-" else int(plus), None if minus == "-" else int(minus)))
            i += 1 if path else 3  # a rename's numstat has an empty path followed by old and new paths
    for entry, (added, deleted) in zip(files, stats, strict=True):
        entry.update(added=added, deleted=deleted, binary=added is None)
    return files


def summarise_diff(files: list[dict[str, Any]]) -> dict[str, Any]:
    by_status: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        by_status.setdefault(f["status"], []).append(f)
    changed = {f["path"] for f in files} | {f["old_path"] for f in by_status.get("R", [])}
    totals = {
        "files": len(files),
        "added": sum(f["added"] or 0 for f in files),
        "deleted": sum(f["deleted"] or 0 for f in files),
        "added_files": len(by_status.get("A", [])),
        "deleted_files": len(by_status.get("D", [])),
        "modified_files": len(by_status.get("M", [])),
        "renamed": len(by_status.get("R", [])),
        "copied": len(by_status.get("C", [])),
        "type_changed": len(by_status.get("T", [])),
        "binary_files": sum(1 for f in files if f["binary"]),
    }
    return {
        "files": files, "totals": totals, "changed_paths": sorted(changed),
        "added_paths": sorted(f["path"] for f in by_status.get("A", []) + by_status.get("C", [])),
        "deleted_paths": sorted(f["path"] for f in by_status.get("D", [])),
        "modified_paths": sorted(f["path"] for f in by_status.get("M", []) + by_status.get("T", [])),
        "renamed": {f["old_path"]: f["path"] for f in by_status.get("R", [])},
    }


_LOG_FORMAT = "%H%x1f%s%x1f%an%x1f%ae%x1f%aI"


class LogProbe(GitProbe):
    kind = "git.log"
    summary = "First-parent commits reachable from head and not from base (`git log --first-parent base..head`)."
    params_schema = repo_params(["head"], base=rev_param("Exclude commits reachable from this revision."),
                            head=rev_param("Newest revision."),
                            max_count=prop("integer", "At most this many commits.", minimum=1))
    fact_schema = fact_object(
        "First-parent history, newest first.",
        base=prop(["string", "null"], "As given."), head=prop("string", "As given."),
        base_sha=NULLABLE_SHA, head_sha=SHA,
        commits=prop("array", "Commits, newest first.", items={"type": "object", "properties": {
            "sha": {"type": "string"}, "subject": {"type": "string"}, "author": {"type": "string"},
            "email": {"type": "string"}, "date": {"type": "string", "description": "Author date, ISO 8601."}}}),
        count=prop("integer", "Number of commits."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        base_rev = params.get("base")
        shas = resolve_commits(repo, [params["head"], *([base_rev] if base_rev else [])])
        args = ["log", "--first-parent", "-z", f"--format={_LOG_FORMAT}", "--no-color"]
        if "max_count" in params:
            args.append(f"--max-count={params['max_count']}")
        proc = repo.run([*args, shas[0], *([f"^{shas[1]}"] if base_rev else []), "--"])
        commits = []
        for record in proc.stdout.decode(errors="replace").split("\0"):
            if record.strip():
                sha, subject, author, email, date = record.strip("\n").split("\x1f")
                commits.append({"sha": sha, "subject": subject, "author": author, "email": email, "date": date})
        # --first-parent stops at a shallow commit (it looks parentless); unless max_count was reached
        # there, the walk would have gone on, so the list is incomplete.
        limit = params.get("max_count")
        if commits and commits[-1]["sha"] in repo.shallow_commits() and (limit is None or len(commits) < limit):
            raise shallow_error(repo, f"the log of {params['head']} stops at a shallow boundary")
        return {"base": base_rev, "head": params["head"], "base_sha": shas[1] if base_rev else None,
                "head_sha": shas[0], "commits": commits, "count": len(commits)}


class ShowProbe(GitProbe):
    kind = "git.show"
    summary = "A file's content at a revision (`git cat-file`), without checking anything out."
    params_schema = repo_params(["file"], rev=rev_param("Revision to read from.") | {"default": "HEAD"},
                            file=prop("string", "Path from the repository root.", minLength=1,
                                       pattern=r"^[^\n]+$"),
                            max_bytes=prop("integer", "Refuse larger files.", minimum=1, default=1048576))
    fact_schema = fact_object(
        "The file at the revision.",
        rev=prop("string", "As given."), commit=SHA, file=prop("string", "As given."),
        blob=prop("string", "Blob sha."), size=prop("integer", "Bytes."),
        binary=prop("boolean", "Not UTF-8 text; content is null."),
        content=prop(["string", "null"], "UTF-8 text."), sha256=prop("string", "Of the bytes."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        rev, file = params.get("rev", "HEAD"), params["file"].lstrip("/")
        (commit,) = resolve_commits(repo, [rev])
        limit = params.get("max_bytes", 1048576)
        # The tree entry first (`ls-tree` reads no blob): a blob over max_bytes (a 5 GB one) is
        # refused without being read, and one the object store lacks is told from no such file.
        entries = list_tree(repo, commit, path_filter=file)
        entry = next((e for e in entries if e.path == file), None)
        if entry is None:
            is_dir = any(e.path.startswith(file.rstrip("/") + "/") for e in entries)
            raise ProbeError("file.not_found", f"{file} {'is a directory' if is_dir else 'does not exist'} at "
                                               f"{rev} ({commit[:12]}) in {repo.root}", commands=repo.commands)
        if entry.kind != "blob":  # a submodule's commit (a symbolic link's blob is read: its target)
            raise ProbeError("file.not_found", f"{file} at {rev} is a submodule, not a file", commands=repo.commands)
        if entry.size is None:
            raise object_missing(repo, file, rev, commit, entry.oid)
        blob, size = entry.oid, entry.size
        if size > limit:
            raise ProbeError("file.too_large", f"{file} at {rev} is {size} bytes, over max_bytes={limit}",
                             commands=repo.commands)
        if blob not in (got := read_blobs(repo, [entry])):
            raise object_missing(repo, file, rev, commit, blob)
        data = got[blob]
        try:
            content: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            content = None
        if content is not None and "\0" in content:
            content = None
        return {"rev": rev, "commit": commit, "file": file, "blob": blob, "size": size,
                "binary": content is None, "content": content, "sha256": hashlib.sha256(data).hexdigest()}


class WorktreesProbe(GitProbe):
    kind = "git.worktrees"
    summary = "Every worktree of the repository (main first): path, HEAD, branch."
    params_schema = repo_params([])
    fact_schema = {"type": "array", "description": "One entry per worktree, the main one first.",
                   "items": {"type": "object", "properties": {
                       "path": {"type": "string"}, "head": {"type": ["string", "null"]},
                       "branch": {"type": ["string", "null"], "description": "Short name; null when detached."},
                       "detached": {"type": "boolean"}, "bare": {"type": "boolean"}, "main": {"type": "boolean"},
                       "locked": {"type": "boolean"}, "prunable": {"type": "boolean"}}}}

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        proc = repo.run(["worktree", "list", "--porcelain"])
        out: list[dict[str, Any]] = []
        for block in proc.stdout.decode("utf-8", "backslashreplace").split("\n\n"):
            lines = [ln for ln in block.splitlines() if ln]
            if not lines:
                continue
            attrs = dict((ln.split(" ", 1) + [""])[:2] for ln in lines)
            branch = attrs.get("branch")
            out.append({"path": attrs.get("worktree", ""), "head": attrs.get("HEAD"),
                        "branch": branch.removeprefix("refs/heads/") if branch else None,
                        "detached": "detached" in attrs, "bare": "bare" in attrs, "main": not out,
                        "locked": "locked" in attrs, "prunable": "prunable" in attrs})
        return out


PROBES: list[Any] = [ResolveProbe(), CommitsProbe(), AncestryProbe(), DiffProbe(), LogProbe(), ShowProbe(), WorktreesProbe()]
