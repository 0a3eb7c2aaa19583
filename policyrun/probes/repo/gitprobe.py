"""What the `git.*` probe kinds share: the base class (no side effects, open the repository, time-box
the commands) and the schema pieces their parameters and facts are built from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyrun.probes._kit.gitclient import GitRepo, open_repo
from policyrun.probes.base import ProbeContext, ProbeResult


def prop(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


PATH_PARAM = prop("string", "Directory inside the repository (relative to the working directory).",
                   default=".", minLength=1)


def repo_params(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"path": PATH_PARAM, **props}, "required": required,
            "additionalProperties": False}


def fact_object(description: str, **props: Any) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": props}


SHA = prop("string", "Full 40-hex commit sha.")
NULLABLE_SHA = prop(["string", "null"], "Full sha, or null.")
PATHS = prop("array", "Repository-relative paths.", items={"type": "string"})


class GitProbe:
    """Shared behaviour: no side effects, open the repository, time-box the commands."""

    kind = ""
    summary = ""
    params_schema: Mapping[str, Any] = {}
    fact_schema: Mapping[str, Any] = {}

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()  # read-only by construction: every command goes through _kit/gitclient.py

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        repo = open_repo(params.get("path", "."), ctx)
        return repo.result(self.collect(repo, params))

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        raise NotImplementedError
