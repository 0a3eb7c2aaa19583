"""docs/ci-github-actions.md's way to upload the default output folder works: the upload step it
shows includes hidden files exactly when the folder is hidden, names the default `--out` of
`policyrun evaluate`, and uses the action the workflow pins."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from policyrun.cli import _build

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ci-github-actions.md"
WORKFLOW = ROOT / ".github" / "workflows" / "policyrun.yml"


def _upload_step() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    at = text.index("<!-- The block below is checked by tests/test_docs_ci.py")
    block = re.search(r"```yaml\n(.*?)```", text[at:], re.S)
    assert block is not None
    [step] = yaml.safe_load(block.group(1))
    assert isinstance(step, dict)
    return step


def _default_out() -> str:
    """`policyrun evaluate`'s default --out, from its parser."""
    args = _build(["evaluate"]).parse_args(["evaluate", "--mode", "m"])
    return str(args.out)


def test_the_upload_step_shown_uploads_the_default_out() -> None:
    step = _upload_step()
    out = _default_out()
    assert step["with"]["path"].rstrip("/") == out
    hidden = any(part.startswith(".") for part in Path(out).parts)
    # upload-artifact v4.4+ leaves hidden files out: a hidden default needs the setting.
    assert step["with"].get("include-hidden-files") is (True if hidden else None)
    assert step["with"]["if-no-files-found"] == "error"


def test_the_upload_step_shown_uses_the_workflow_pin() -> None:
    pins = re.findall(r"uses: (actions/upload-artifact@[0-9a-f]{40}\s+#\s+v[\d.]+)", WORKFLOW.read_text())
    assert pins and len(set(pins)) == 1
    shown = re.search(r"uses: (actions/upload-artifact@[0-9a-f]{40}\s+#\s+v[\d.]+)", DOC.read_text().split(
        "<!-- The block below is checked by tests/test_docs_ci.py")[1])
    assert shown and shown.group(1) == pins[0]
