"""The afd-plugin's claim conventions, read from the flagship rulebook's vars: `docs.claims` ships
no product's vocabulary, so the tests that read vLLM docs pass the same parameters the flagship does."""

from __future__ import annotations

from pathlib import Path
from typing import Any


FLAGSHIP = Path(__file__).resolve().parents[1] / "rulebooks" / "upgrade-gpu-version.yaml"


def flagship_vars() -> dict[str, Any]:
    """Every var of the flagship: its overlay's merged onto upgrade-vllm-plugin's."""
    from policyrun.language.rulebook import load_rulebook

    return dict(load_rulebook(FLAGSHIP).model.vars)


def vllm_claims() -> dict[str, Any]:
    v = flagship_vars()
    return {"subject": v["claim_subject"], "other_products": v["claim_other_products"],
            "version": v["claim_version"], "bare_versions": v["claim_bare_versions"],
            "classes": v["claim_classes"], "scopes": v["claim_scopes"]}
