"""`docs.claims` on the real afd-plugin README.md and docs/. The expected table below was written by
hand, line by line, from reading those files (not from policyrun's output):

- support: the version the plugin targets, pins, requires or was validated on now, including what
  is or is not supported on it ("not supported on v0.26", "no v0.26 hardware support claim");
- history: former/earlier versions and past verification records;
- other: version words that claim nothing (an upgrade narrative, a container tag not claimed,
  package metadata, a front-matter reference).
vLLM-Ascend's own versions ("vLLM-Ascend 0.26 removes PCP", "vLLM-Ascend v0.26 container") are
another product and are not mentions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext
from policyrun.probes.repo.claims import ClaimsProbe
from tests.claimconventions import vllm_claims
from tests.real.conftest import copy_repo, git

R, CP, EP, IX = ("README.md", "docs/design/module/compatibility_and_patches.md",
                 "docs/design/module/execution_platforms.md", "docs/design/module/index.md")
NCCL, ASYNC, P2P = ("docs/gpu/NCCL_P2P_CONNECTOR_USER_GUIDE.md", "docs/npu/CAM_ASYNC_CONNECTOR_USER_GUIDE.md",
                    "docs/npu/CAM_P2P_CONNECTOR_USER_GUIDE.md")

# (file, line, version) -> (class, scope), in file and line order
EXPECTED = [
    (R, 19, "0.26.0", "support", "general"),      # The target runtime is **vLLM `v0.26.0`**.
    (R, 55, "0.26", "support", "npu"),            # | CAMAsyncAFDConnector | Ascend NPU | ... Validated on v0.26
    (R, 55, "0.19.1rc1", "history", "npu"),       # ... records the earlier v0.19.1rc1 experiment
    (R, 55, "0.19.1rc1", "history", "npu"),       # ... the `release/v0.19.1rc1` branch (of that experiment)
    (R, 63, "0.26.0", "support", "general"),      # vLLM versions other than `0.26.0` are not claimed as supported.
    (R, 69, "0.19.1rc1", "history", "npu"),       # PCP-based NPU ... deployments from v0.19.1rc1
    (R, 70, "0.26", "support", "npu"),            # ... are not supported on v0.26.
    (R, 94, "0.26.0", "support", "gpu"),          # (### GPU installation) The optional extra pins `vllm==0.26.0`.
    (R, 105, "0.26.0", "support", "npu"),         # (### Ascend NPU installation) | vLLM | `0.26.0` |
    (R, 111, "0.26", "other", "npu"),             # The v0.26 integration was refreshed against vLLM-Ascend commit
    (R, 112, "0.26", "other", "npu"),             # does not currently claim a released v0.26 container tag
    (R, 115, "0.19.1rc1", "history", "npu"),      # Do not reuse the former v0.19.1rc1 image
    (R, 115, "0.26", "other", "npu"),             # ... as a v0.26 runtime.
    (CP, 59, "0.26.0", "support", "general"),     # The package extra pins vLLM `0.26.0`
    (CP, 65, "0.26", "support", "npu"),           # (## Supported upstream boundary) The NPU v0.26 refresh is based on
    (EP, 292, "0.26", "support", "npu"),          # Ascend row: the former PCP8 recipe is incompatible with v0.26
    (EP, 292, "0.26", "support", "npu"),          # Ascend row: no v0.26 hardware support claim
    (EP, 294, "0.26.0", "support", "gpu"),        # The validated CUDA and synchronous Ascend paths use vLLM 0.26.0
    (IX, 20, "0.26.0", "other", "general"),       # front matter: upstream_refs: - "vLLM 0.26.0"
    (NCCL, 9, "0.26", "support", "gpu"),          # On vLLM 0.26, DeepSeek MoE layers keep ... (CUDA/NCCL paragraph)
    (ASYNC, 14, "0.26", "other", "npu"),          # > The vLLM 0.26 upgrade did not revalidate CAM async.
    (ASYNC, 15, "0.19.1", "history", "npu"),      # > ... produced with the former vLLM/vLLM-Ascend 0.19.1
    (ASYNC, 18, "0.26", "support", "npu"),        # > ... not as a supported v0.26 deployment recipe.
    (ASYNC, 18, "0.26", "support", "npu"),        # > Current v0.26 support claims cover the synchronous ...
    (ASYNC, 24, "0.26", "support", "npu"),        # These are code-level constraints, not a v0.26 hardware support claim:
    (ASYNC, 212, "0.26", "history", "npu"),       # The CAM async v0.26 path was verified with:
    (ASYNC, 218, "0.26.0", "history", "npu"),     # - vLLM v0.26.0 at commit `568afb3a1`; (in that list)
    (ASYNC, 225, "0.19.1rc2.dev1327", "other", "npu"),  # image metadata still reports a `0.19.1rc2.dev1327` version
    (ASYNC, 226, "0.26", "support", "npu"),       # the authoritative compatibility baseline for this v0.26 upgrade
    (P2P, 19, "0.26.0", "support", "npu"),        # (## Prerequisites) - vLLM `0.26.0` and an Ascend ... environment
]


def _run(root: Path, **params: Any) -> dict[str, Any]:
    return ClaimsProbe().run({"root": str(root), **vllm_claims(), **params}, ProbeContext(base_dir=root, timeout_s=60)).value


def test_every_mention_classified_as_read_by_hand(afd_repo: Path) -> None:
    v = _run(afd_repo)
    got = [(m["file"], m["line"], m["version"], m["class"], m["scope"]) for m in v["mentions"]]
    assert got == EXPECTED
    for m in v["mentions"]:
        line = (afd_repo / m["file"]).read_text().split("\n")[m["line"] - 1]
        assert m["text"] == line.strip() and line[m["column"] - 1:].startswith(m["version"])
    claims = v["claims"]
    assert [(c["file"], c["line"]) for c in claims] == [(f, n) for f, n, _, c, _ in EXPECTED if c == "support"]
    assert v["by_scope"] == {"gpu": ["0.26", "0.26.0"], "npu": ["0.26", "0.26.0"], "general": ["0.26.0"]}
    assert v["files_scanned"] == 12
    row = next(m for m in v["mentions"] if m["line"] == 105 and m["file"] == R)
    assert (row["context"], row["row"], row["column_header"]) == ("table", "| vLLM | `0.26.0` |", "Version")
    assert row["heading"] == "afd-plugin > Install > Ascend NPU installation"
    listed = next(m for m in v["mentions"] if m["line"] == 218)
    assert listed["context"] == "list" and listed["heading"] == "CAM Async Connector User Guide > Requirements"


def test_versions_in_scope_agree_with_a_plain_scan(afd_repo: Path) -> None:
    """Every `v0.x`/`0.x.y` token in the scanned files is either a mention or a version of another
    product named right before it (vLLM-Ascend) or inside a link destination."""
    v = _run(afd_repo)
    sites = {(m["file"], m["line"]) for m in v["mentions"]}
    files = git(afd_repo, "ls-files", "README*.md", "docs/*.md", "docs/**/*.md").split()
    for f in files:
        for n, line in enumerate((afd_repo / f).read_text().split("\n"), 1):
            visible = re.sub(r"\]\([^)]*\)", "]", line)
            for m in re.finditer(r"(?<![\w.])v?0\.[1-9]\d*(?:\.\d+)?(?:rc\d+)?(?![\w])", visible):
                if (f, n) not in sites:
                    assert re.search(r"(?i)vllm[-_ ]ascend\W+(?:\w+\W+){0,2}$", visible[:m.start()]) or \
                        "releases/v0.26.0rc" in visible or "DeepSeekV3" in visible, (f, n, line)


def test_an_edited_support_line_is_a_claim_of_the_new_version(afd_repo: Path, tmp_path: Path) -> None:
    repo = copy_repo(afd_repo, tmp_path / "afd")
    readme = repo / "README.md"
    lines = readme.read_text().split("\n")
    assert lines[18] == "The target runtime is **vLLM `v0.26.0`**. The plugin does not modify the vLLM"
    lines[18] = lines[18].replace("v0.26.0", "v0.25.0")
    readme.write_text("\n".join(lines))
    v = _run(repo)
    edited = [m for m in v["claims"] if m["site"] == "README.md:19"]
    assert [(m["version"], m["release"], m["class"], m["scope"]) for m in edited] == [
        ("0.25.0", "0.25.0", "support", "general")]
    assert v["by_scope"]["general"] == ["0.25.0", "0.26.0"]  # now they disagree
    at_head = _run(repo, rev="HEAD")  # the committed README is read from git objects
    assert [m["version"] for m in at_head["claims"] if m["site"] == "README.md:19"] == ["0.26.0"]
    assert git(repo, "status", "--porcelain").strip() == "M README.md"
