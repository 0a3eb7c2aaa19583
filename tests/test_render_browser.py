"""The HTML report in a real browser (headless Chromium); skipped where none is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.render.html import render_html

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install chromium)")


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_screenshot(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(tf.flagship()), encoding="utf-8")
    png = tmp_path / "shot.png"
    proc = _chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000", page.as_uri())
    assert png.exists(), proc.stderr[-2000:]
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000


def test_script_opens_the_phase_named_in_the_url(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(tf.flagship()), encoding="utf-8")
    proc = _chromium(tmp_path, "--dump-dom", "--virtual-time-budget=2000", page.as_uri() + "#phase-FINAL_AUDIT")
    dom = proc.stdout
    assert 'id="phase-FINAL_AUDIT"' in dom, proc.stderr[-2000:]
    tag = dom[dom.rindex("<details", 0, dom.index('id="phase-FINAL_AUDIT"')):dom.index('id="phase-FINAL_AUDIT"') + 40]
    assert " open" in tag  # the inline script ran and opened the SKIPPED phase it was pointed at
    closed = dom[dom.index('id="phase-FREEZE_IDENTITY"') - 60:dom.index('id="phase-FREEZE_IDENTITY"') + 40]
    assert " open" not in closed
