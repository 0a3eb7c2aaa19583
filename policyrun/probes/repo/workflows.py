"""`ci.workflows`: GitHub Actions workflows as facts — jobs, steps, the actions they use and how
those are pinned, and the shell blocks they run with their line ranges.

Files are read like every tree probe (policyrun/probes/_kit/revfiles.py): the working tree, or a
revision's git objects with `rev:`; nothing is checked out or run. Workflows are YAML 1.2 data
(`on:` is a key named "on"), parsed with the same bounds as every document policyrun reads.

A `uses:` reference is classified by its form alone, without the network (a tag and a branch of
the same name cannot be told apart offline): 40 (or 64) hex digits is `sha`, an immutable commit;
`v1`, `4`, `v4.1.2` (`v?N(.N)*`) is `tag`, a version tag by convention, which its owner can still
move; anything else (`main`, `releases/v1`, `feature-x`) is `ref`, a branch or another movable
name. Local actions (`./path`) and container images (`docker://`, pinned when given by digest)
are kinds of their own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policyrun.errors import PolicyrunError
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.revfiles import SKIPPED_SCHEMA, TREE_PARAMS, read_tree

DEFAULT_INCLUDE = ["/.github/workflows/*.yml", "/.github/workflows/*.yaml"]
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_TAG = re.compile(r"^v?\d+(?:\.\d+)*$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

_S = {"type": "string"}
_NS = {"type": ["string", "null"]}
_NI = {"type": ["integer", "null"]}
_USES = {"type": "object", "description": "A `uses:` reference.", "properties": {
    "file": _S, "job": _S, "step": _NI, "line": {"type": "integer"},
    "raw": {"type": "string", "description": "As written."},
    "kind": {"enum": ["action", "reusable_workflow", "local", "docker"]},
    "owner": _NS, "repo": _NS, "path": {"type": ["string", "null"], "description": "Inside the repository (an "
                                                                                   "action in a subfolder, a "
                                                                                   "reusable workflow's file)."},
    "ref": {"type": ["string", "null"], "description": "After `@` (a docker image: its tag or digest)."},
    "ref_kind": {"type": ["string", "null"], "enum": ["sha", "tag", "ref", None],
                 "description": "sha: full commit sha or image digest; tag: `v?N(.N)*` or an image tag; ref: "
                                "anything else (a branch); null: local, or no ref at all."},
    "pinned": {"type": "boolean", "description": "ref_kind is sha (local actions count as pinned: they are "
                                                 "part of the same commit)."}}}
_RUN = {"type": "object", "description": "A `run:` block.", "properties": {
    "file": _S, "job": _S, "step": {"type": "integer"}, "name": _NS, "shell": _NS,
    "text": {"type": "string", "description": "The script, as the runner receives it."},
    "line_start": {"type": "integer", "description": "First line of the script in the file (1-based)."},
    "line_end": {"type": "integer", "description": "Last line of the script in the file."}}}
_STEP = {"type": "object", "properties": {
    "index": {"type": "integer"}, "id": _NS, "name": _NS, "line": {"type": "integer"},
    "uses": {"type": ["object", "null"], "properties": _USES["properties"]},
    "run": {"type": ["object", "null"], "properties": _RUN["properties"]},
    "with": {"type": "object", "description": "The step's `with:` inputs, as written."},
    "if": {"description": "The step's condition, as written (string, boolean or null)."}}}
_JOB = {"type": "object", "properties": {
    "name": _NS, "line": {"type": "integer"},
    "runs_on": {"description": "`runs-on:` as written (a label, a list, a mapping or null)."},
    "permissions": {"description": "`permissions:` as written, or null."},
    "uses": {"type": ["object", "null"], "properties": _USES["properties"],
             "description": "A job that calls a reusable workflow."},
    "steps": {"type": "array", "items": _STEP}}}
_WORKFLOW = {"type": "object", "properties": {
    "name": _NS, "on": {"type": "array", "items": _S, "description": "Event names, sorted."},
    "permissions": {"description": "Top-level `permissions:` as written, or null."},
    "jobs": {"type": "object", "additionalProperties": _JOB}}}


def _event_names(on: Any) -> list[str]:
    if isinstance(on, str):
        return [on]
    if isinstance(on, list):
        return sorted(str(e) for e in on)
    if isinstance(on, dict):
        return sorted(on)
    return []


def classify(raw: str) -> dict[str, Any]:
    """The parts of a `uses:` value and how it is pinned (module docstring)."""
    out: dict[str, Any] = {"raw": raw, "owner": None, "repo": None, "path": None, "ref": None,
                           "ref_kind": None, "pinned": False}
    if raw.startswith("./") or raw.startswith("../"):
        return {**out, "kind": "local", "path": raw, "pinned": True}
    if raw.startswith("docker://"):
        image = raw[len("docker://"):]
        digest = _DIGEST.search(image)
        if digest:
            return {**out, "kind": "docker", "path": image[:digest.start()], "ref": digest.group()[1:],
                    "ref_kind": "sha", "pinned": True}
        name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        return {**out, "kind": "docker", "path": name, "ref": tag or None, "ref_kind": "tag" if tag else None}
    target, _, ref = raw.partition("@")
    parts = target.split("/")
    kind = "reusable_workflow" if re.search(r"\.github/workflows/[^/]+\.ya?ml$", target) else "action"
    ref_kind = None if not ref else "sha" if _SHA.match(ref) else "tag" if _TAG.match(ref) else "ref"
    return {**out, "kind": kind, "owner": parts[0] or None, "repo": parts[1] if len(parts) > 1 else None,
            "path": "/".join(parts[2:]) or None, "ref": ref or None, "ref_kind": ref_kind,
            "pinned": ref_kind == "sha"}


def _script_lines(text: str, smap: Any, path: tuple[str | int, ...]) -> tuple[int, int]:
    start, _ = smap.values[path]
    end = smap.ends.get(path, start)
    if smap.styles.get(path) in ("|", ">"):  # a block scalar starts on the line after its indicator
        start += 1
        lines = text.splitlines()
        while end > start and end <= len(lines) and not lines[end - 1].strip():
            end -= 1  # the end mark is after the block's trailing blank lines
    return start, max(start, end)


class _Workflow:
    def __init__(self, rel: str, text: str, doc: Any, smap: Any) -> None:
        self.rel, self.text, self.doc, self.smap = rel, text, doc, smap
        self.uses: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []

    def line(self, path: tuple[str | int, ...]) -> int:
        return int(self.smap.values.get(path, (0, 0))[0])

    def value(self) -> dict[str, Any]:
        doc = self.doc if isinstance(self.doc, dict) else {}
        jobs: dict[str, Any] = doc["jobs"] if isinstance(doc.get("jobs"), dict) else {}
        return {"name": doc.get("name") if isinstance(doc.get("name"), str) else None,
                "on": _event_names(doc.get("on")), "permissions": doc.get("permissions"),
                "jobs": {jid: self.job(jid, job) for jid, job in jobs.items() if isinstance(job, dict)}}

    def job(self, jid: str, job: Mapping[str, Any]) -> dict[str, Any]:
        uses = None
        if isinstance(job.get("uses"), str):
            uses = {"file": self.rel, "job": jid, "step": None, "line": self.line(("jobs", jid, "uses")),
                    **classify(job["uses"])}
            self.uses.append(uses)
        steps: list[Any] = job["steps"] if isinstance(job.get("steps"), list) else []
        return {"name": job.get("name") if isinstance(job.get("name"), str) else None,
                "line": self.line(("jobs", jid)), "runs_on": job.get("runs-on"),
                "permissions": job.get("permissions"), "uses": uses,
                "steps": [self.step(jid, i, s) for i, s in enumerate(steps) if isinstance(s, dict)]}

    def step(self, jid: str, index: int, step: Mapping[str, Any]) -> dict[str, Any]:
        at = ("jobs", jid, "steps", index)
        name = step.get("name") if isinstance(step.get("name"), str) else None
        uses = run = None
        if isinstance(step.get("uses"), str):
            uses = {"file": self.rel, "job": jid, "step": index, "line": self.line((*at, "uses")),
                    **classify(step["uses"])}
            self.uses.append(uses)
        if isinstance(step.get("run"), str):
            start, end = _script_lines(self.text, self.smap, (*at, "run"))
            run = {"file": self.rel, "job": jid, "step": index, "name": name,
                   "shell": step.get("shell") if isinstance(step.get("shell"), str) else None,
                   "text": step["run"], "line_start": start, "line_end": end}
            self.runs.append(run)
        return {"index": index, "id": step.get("id") if isinstance(step.get("id"), str) else None, "name": name,
                "line": self.line(at), "uses": uses, "run": run,
                "with": step.get("with") if isinstance(step.get("with"), dict) else {}, "if": step.get("if")}


class WorkflowsProbe:
    kind = "ci.workflows"
    summary = ("GitHub Actions workflows (.github/workflows/*.yml|yaml, working tree or `rev:`): jobs, steps, `uses` "
               "with owner/repo/path and the ref classified as sha, tag or ref, `run` blocks with line ranges.")
    params_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {**TREE_PARAMS, "include": {**TREE_PARAMS["include"],
                                                  "description": "Globs of workflow files (git-style); default: "
                                                                 + ", ".join(DEFAULT_INCLUDE) + "."}},
        "additionalProperties": False,
    }
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "root": _S, "rev": _NS, "rev_sha": _NS,
            "files": {"type": "array", "items": _S, "description": "Workflow files read, relative to root."},
            "workflows": {"type": "object", "additionalProperties": _WORKFLOW,
                          "description": "By file: name, events, permissions, jobs."},
            "uses": {"type": "array", "items": _USES, "description": "Every `uses:` (steps and jobs), in file order."},
            "unpinned": {"type": "array", "items": _USES,
                         "description": "The `uses` entries that are not pinned to a full sha (or image digest)."},
            "runs": {"type": "array", "items": _RUN, "description": "Every `run:` block, in file order."},
            "skipped": SKIPPED_SCHEMA,
        },
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        from policyrun.yamlsource import load_yaml_text

        tree = read_tree(params, ctx, DEFAULT_INCLUDE)
        workflows: dict[str, Any] = {}
        uses: list[dict[str, Any]] = []
        runs: list[dict[str, Any]] = []
        for rel, text in tree.files:
            shown = f"{rel}@{tree.rev}" if tree.rev else rel
            try:
                doc, smap = load_yaml_text(text, shown, data=True)
            except PolicyrunError as exc:  # a workflow policyrun cannot read is never reported clean
                raise ProbeError("file.parse_error", exc.render(), commands=tree.commands) from None
            wf = _Workflow(rel, text, doc, smap)
            workflows[rel] = wf.value()
            uses.extend(wf.uses)
            runs.extend(wf.runs)
        value = {"root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "files": [r for r, _ in tree.files],
                 "workflows": workflows, "uses": uses, "unpinned": [u for u in uses if not u["pinned"]],
                 "runs": runs, "skipped": tree.skipped}
        return ProbeResult(value=value, commands=tree.commands, repo_path=tree.repo_path, repo_head=tree.repo_head,
                           sources=[str(tree.root / r) for r, _ in tree.files])


PROBES: list[Any] = [WorkflowsProbe()]
