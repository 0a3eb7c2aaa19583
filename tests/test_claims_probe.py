"""`docs.claims`: the Markdown block reader, product attribution, classes bound to the nearest
version, scopes, parameters for another product, revisions, errors."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.language import expr
from policyrun.probes import registry
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.repo.claims import ClaimsProbe
from policyrun.probes.repo.markdownblocks import parse_blocks
from tests.claimconventions import vllm_claims
from tests.gitfixtures import init_repo, snapshot

DOC = textwrap.dedent("""\
    ---
    title: Guide
    upstream: "vLLM 0.26.0"
    ---

    Product
    =======

    The target runtime is **vLLM `v0.26.0`** ([notes](https://example.invalid/vllm/v0.1.0/x)).
    <!-- The target runtime was v0.24.0 -->

    ## Install on CUDA

    Install the pinned release:

    ```bash
    pip install vllm==0.26.0
    ```

    ~~~
    docker run image:v0.18.0
    ~~~

    Known gaps:

    - PCP deployments from v0.19.1rc1 are not supported on v0.26.
    - vLLM-Ascend 0.26 removes PCP;
      continuation with vLLM/vLLM-Ascend 0.19.1 named together.

    Ascend section
    --------------

    | Component | Version |
    | --- | --- |
    | vLLM | `0.26.0` |
    | Python | `3.11` |

    > [!NOTE]
    > The former v0.20.0 image is gone.

    ## Changelog

    - 2026-01-02: validated on vLLM 0.25.0.
    - Bumped to v0.25.1 here.
    """)


def _run(root: Path, **params: Any) -> dict[str, Any]:
    value = ClaimsProbe().run({"root": str(root), **vllm_claims(), **params}, ProbeContext(base_dir=root, timeout_s=30)).value
    jsonschema.validate(value, ClaimsProbe.fact_schema)
    return value


def _error(root: Path, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        ClaimsProbe().run({"root": str(root), **vllm_claims(), **params}, ProbeContext(base_dir=root, timeout_s=30))
    return info.value


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "plugin"
    (root / "docs" / "npu").mkdir(parents=True)
    (root / "README.md").write_text(DOC)
    (root / "docs" / "npu" / "guide.md").write_text("# NPU guide\n\nUse vLLM 0.26.0 here.\n")
    (root / "docs" / "other.txt").write_text("vLLM 0.1.0 is not Markdown\n")
    (root / "sub").mkdir()
    (root / "sub" / "README.md").write_text("targets vLLM v0.9.0\n")  # not at the root: not read by default
    return root


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), 1) if needle in line)


def test_block_reader() -> None:
    blocks = parse_blocks(DOC)
    kinds = {b.lines[0][0]: (b.kind, b.headings, b.lead) for b in blocks}
    assert kinds[_line(DOC, "upstream:")] == ("frontmatter", (), None)
    assert kinds[_line(DOC, "Product")] == ("heading", ("Product",), None)  # setext, not a paragraph
    assert kinds[_line(DOC, "pip install")] == ("code", ("Product", "Install on CUDA"), "Install the pinned release:")
    assert kinds[_line(DOC, "docker run")][0] == "code"
    assert kinds[_line(DOC, "PCP deployments")] == ("list", ("Product", "Install on CUDA"), "Known gaps:")
    assert kinds[_line(DOC, "| vLLM |")][:2] == ("table", ("Product", "Ascend section"))
    assert kinds[_line(DOC, "[!NOTE]")] == ("quote", ("Product", "Ascend section"), None)
    item = next(b for b in blocks if b.lines[0][0] == _line(DOC, "vLLM-Ascend 0.26"))
    assert [n for n, _, _ in item.lines] == [_line(DOC, "vLLM-Ascend 0.26"), _line(DOC, "continuation")]
    assert all("v0.24.0" not in b.text for b in blocks)  # HTML comment
    assert all("v0.1.0" not in b.text for b in blocks)  # a link destination is not text


def test_mentions_context_class_scope(docs: Path) -> None:
    v = _run(docs)
    got = [(m["line"], m["version"], m["context"], m["class"], m["scope"]) for m in v["mentions"]
           if m["file"] == "README.md"]
    L = lambda needle: _line(DOC, needle)  # noqa: E731
    assert got == [
        (L("upstream:"), "0.26.0", "frontmatter", "other", "general"),
        (L("target runtime"), "0.26.0", "paragraph", "support", "general"),
        (L("pip install"), "0.26.0", "code", "support", "gpu"),  # lead "Install the pinned release:"
        (L("docker run"), "0.18.0", "code", "other", "gpu"),
        (L("PCP deployments"), "0.19.1rc1", "list", "history", "gpu"),  # "from" binds here ...
        (L("PCP deployments"), "0.26", "list", "support", "gpu"),  # ... "supported" to v0.26; scope: ## heading
        (L("continuation"), "0.19.1", "list", "other", "npu"),  # vLLM/vLLM-Ascend named together
        (L("| vLLM |"), "0.26.0", "table", "support", "npu"),  # row header is the product
        (L("The former"), "0.20.0", "quote", "history", "npu"),
        (L("2026-01-02"), "0.25.0", "list", "history", "general"),  # a dated record beats "validated"
        (L("Bumped"), "0.25.1", "list", "history", "general"),  # under ## Changelog
    ]
    table = next(m for m in v["mentions"] if m["context"] == "table")
    assert table["row"] == "| vLLM | `0.26.0` |" and table["column_header"] == "Version"
    assert table["heading"] == "Product > Ascend section" and table["site"] == f"README.md:{L('| vLLM |')}"
    assert table["text"] == "| vLLM | `0.26.0` |" and table["column"] == DOC.split("\n")[L("| vLLM |") - 1].index("0.26.0") + 1
    guide = [m for m in v["mentions"] if m["file"] == "docs/npu/guide.md"]
    assert [(m["version"], m["class"], m["scope"]) for m in guide] == [("0.26.0", "other", "npu")]  # from the path
    assert v["by_scope"] == {"gpu": ["0.26", "0.26.0"], "npu": ["0.26.0"], "general": ["0.26.0"]}
    assert v["by_class"]["history"] == ["0.19.1rc1", "0.20.0", "0.25.0", "0.25.1"]
    assert [m["site"] for m in v["claims"]] == [f"README.md:{n}" for n in (L("target runtime"), L("pip install"),
                                                                             L("PCP deployments"), L("| vLLM |"))]
    assert v["files"] == ["README.md", "docs/npu/guide.md"] and v["files_scanned"] == 2


RANGES = [
    ("This plugin requires vLLM 0.24.0 or newer (or a nightly).", ">=0.24.0"),
    ("Requires at least vLLM 0.24.", ">=0.24"),
    ("Install `vllm>=0.24.0` first.", ">=0.24.0"),
    ("Install vllm >= 0.24.0, < 0.28.0 first.", "<0.28.0,>=0.24.0"),
    ("Works with vLLM 0.24+ builds.", ">=0.24"),
    ("Supports vLLM 0.24.0 and later.", ">=0.24.0"),
    ("Minimum supported vLLM version: 0.24.0.", ">=0.24.0"),
    ("The plugin supports vLLM 0.24.0 through 0.27.0.", "<=0.27.0,>=0.24.0"),
    ("Supported: vLLM between v0.24.0 and v0.27.0.", "<=0.27.0,>=0.24.0"),
    ("Supports vLLM up to 0.27.0.", "<=0.27.0"),
    ("Supports vLLM 0.24.0 or earlier.", "<=0.24.0"),
    # A clause whose version the scan does not take (`0.15` is no x.y.z) belongs to the same set
    # (the dllm-plugin README): dropping `<0.15` made the claim admit every later release.
    ("The optional extra pins **`vllm>=0.14.0,<0.15`** (API-churn guard).", "<0.15,>=0.14.0"),
    ("Install `vllm<0.15, !=0.14.1,>=0.14.0` only.", "!=0.14.1,<0.15,>=0.14.0"),
    ("Install `vllm<0.15,>=0.14.0` only.", "<0.15,>=0.14.0"),
    ("Install `vllm>=0.14.0,!=0.15.*` only.", "!=0.15.*,>=0.14.0"),
]
EXACT = ["Targets vLLM 0.26.0.", "Built on vLLM 0.26.0+cu128 wheels.", "Upgrade from vLLM 0.26.0 to 0.27.0.",
         "Pin `vllm==0.26.0`.", "Validated on v0.26.0, 12 tests and 3+ GPUs."]


@pytest.mark.parametrize(("sentence", "specifier"), RANGES, ids=[s for s, _ in RANGES])
def test_a_bound_is_a_range_claim_with_its_specifier(tmp_path: Path, sentence: str, specifier: str) -> None:
    # "requires vLLM 0.24.0 or newer" states the oldest release supported, not the one in use: a
    # rulebook that took it for the current version refused a correct current_ref.
    (tmp_path / "README.md").write_text(f"# P\n\n{sentence}\n")
    v = _run(tmp_path)
    assert {(m["kind"], m["specifier"]) for m in v["mentions"]} == {("range", specifier)}
    assert all(c["kind"] == "range" for c in v["claims"])  # the class (support or not) is decided apart


@pytest.mark.parametrize("sentence", EXACT)
def test_a_version_named_plainly_stays_an_exact_claim(tmp_path: Path, sentence: str) -> None:
    (tmp_path / "README.md").write_text(f"# P\n\n{sentence}\n")
    v = _run(tmp_path)
    assert v["mentions"] and {(m["kind"], m["specifier"]) for m in v["mentions"]} == {("exact", None)}


def test_attribution_and_bare_versions(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(
        "Supports vLLM 0.26.0 and vLLM-Ascend v0.26.0rc1 on torch 2.7.\n\n"
        "Pinned: 0.27.0 everywhere.\n\n--gpu-memory-utilization 0.90 and returns 0.0\n")
    got = [(m["version"], m["class"]) for m in _run(tmp_path)["mentions"]]
    assert got == [("0.26.0", "support"), ("0.27.0", "support")]
    assert [m["version"] for m in _run(tmp_path, bare_versions=False)["mentions"]] == ["0.26.0"]


def test_another_product_through_parameters(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("## Support\n\nWe track SGLang 1.4.2 (was 1.3.0 before), not vLLM 0.26.0.\n")
    v = _run(tmp_path, subject=r"(?i)\bsglang\b", other_products=[r"(?i)\bvllm\b"],
             version=r"(?:^|[^\w.])v?(?P<version>\d+\.\d+\.\d+)\b",
             classes={"legacy": [r"\bbefore\b", r"\bwas\b"], "current": [r"\btrack\b"]},
             scopes={"cpu": [r"(?i)\bcpu\b"]})
    assert [(m["version"], m["class"], m["scope"]) for m in v["mentions"]] == [
        ("1.4.2", "current", "general"), ("1.3.0", "legacy", "general")]
    assert v["claims"] == [] and v["by_scope"] == {"cpu": [], "general": []}  # no class named support
    assert v["by_class"] == {"legacy": ["1.3.0"], "current": ["1.4.2"], "other": []}


def test_revision_and_read_only(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("README.md", "The target runtime is vLLM v0.26.0.\n")
    sha = repo.commit("docs")
    repo.write("README.md", "The target runtime is vLLM v0.27.0.\n")
    before = snapshot(repo)
    assert [m["version"] for m in _run(repo.path)["claims"]] == ["0.27.0"]
    at_head = _run(repo.path, rev="HEAD")
    assert [m["version"] for m in at_head["claims"]] == ["0.26.0"] and at_head["rev_sha"] == sha
    assert snapshot(repo) == before


def test_errors(tmp_path: Path) -> None:
    err = _error(tmp_path, subject="(?<=x)vllm")
    assert err.code == "claims.invalid_pattern" and "`subject`" in err.message
    err = _error(tmp_path, version=r"v0\.\d+")
    assert err.code == "claims.invalid_pattern" and "1 capturing group" in err.message
    assert "classes.support[0]" in _error(tmp_path, classes={"support": ["("]}).message
    assert _error(tmp_path / "nope").code == "file.not_found"


def test_registered_and_read_from_cel(docs: Path) -> None:
    assert isinstance(registry.get("docs.claims"), ClaimsProbe)
    check = expr.compile_expr("facts.d.by_scope.npu.all(v, v == '0.26.0') && "
                              "facts.d.claims.exists(c, c.context == 'code' && c.scope == 'gpu')")
    assert expr.evaluate(check, {"facts": {"d": _run(docs)}}).value is True


def test_the_defaults_know_no_product(tmp_path: Path) -> None:
    # The engine ships no plugin's vocabulary: the subject is required, and nothing in the defaults
    # names vLLM, its other products or its backends (the flagship's vars hold those).
    from policyrun.probes.repo.claims import PARAMS_SCHEMA

    assert "subject" in PARAMS_SCHEMA["required"]
    defaults = repr({k: v.get("default") for k, v in PARAMS_SCHEMA["properties"].items()}).lower()
    for word in ("vllm", "ascend", "cuda", "nccl", "gpu", "npu"):
        assert word not in defaults, word
    (tmp_path / "README.md").write_text(
        "# Acme\n\nThis plugin supports Acme 2.1.0 on CUDA.\nIt was validated on vLLM v0.26.0.\n"
        "Set the ratio to 0.5 or v3.\n")
    v = ClaimsProbe().run({"root": str(tmp_path), "subject": r"(?i)\bacme\b"},
                          ProbeContext(base_dir=tmp_path, timeout_s=30)).value
    got = [(m["line"], m["version"], m["class"], m["scope"]) for m in v["mentions"]]
    assert got == [(3, "2.1.0", "support", "general")]  # vLLM's version is another product's; 0.5 is a number
    with pytest.raises(jsonschema.ValidationError, match="subject"):  # collect reports it as params.invalid
        jsonschema.validate({"root": "."}, PARAMS_SCHEMA)
