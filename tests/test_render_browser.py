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


# Appended to the page: what the browser laid out, written where --dump-dom shows it.
_LAYOUT_PROBE = """<script>
(function () {
  function box(sel) {
    var e = document.querySelector(sel), r = e.getBoundingClientRect();
    return {display: getComputedStyle(e.parentNode).display, width: Math.round(r.width)};
  }
  var width = document.documentElement.clientWidth, over = [];
  document.querySelectorAll("#pipeline *").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.width && r.right > width + 1 && !e.closest(".pipeline-scroll")) { over.push(e.tagName); }
  });
  document.body.setAttribute("data-layout", JSON.stringify({viewport: width, page: document.documentElement.scrollWidth,
    wide: box("svg.pipeline.wide"), narrow: box("svg.pipeline.narrow"), overflowing: over}));
})();
</script></body>"""


def _layout(tmp_path: Path, width: int) -> dict[str, object]:
    import json
    import re

    page = tmp_path / f"layout-{width}.html"
    page.write_text(render_html(tf.flagship()).replace("</body>", _LAYOUT_PROBE), encoding="utf-8")
    proc = _chromium(tmp_path, "--dump-dom", "--virtual-time-budget=2000", f"--window-size={width},1200",
                     page.as_uri())
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))  # type: ignore[no-any-return]


def test_the_pipeline_is_legible_on_a_narrow_screen(tmp_path: Path) -> None:
    """On a phone the one-column drawing replaces the wide one, at its own size (labels are not
    scaled down), and nothing is wider than the screen. (Headless Chromium's smallest window is
    about 485 px wide: still below the 720 px breakpoint.)"""
    narrow = _layout(tmp_path, 390)
    assert narrow["narrow"] == {"display": "block", "width": 292}, narrow
    assert narrow["wide"] == {"display": "none", "width": 0}, narrow
    assert narrow["overflowing"] == [], narrow
    assert narrow["page"] == narrow["viewport"], narrow  # wide tables scroll inside themselves
    wide = _layout(tmp_path, 1280)
    assert wide["narrow"] == {"display": "none", "width": 0}, wide
    assert wide["wide"]["display"] == "block" and wide["wide"]["width"] >= 1204 * 3 // 4, wide  # type: ignore[index]
    assert wide["page"] == wide["viewport"], wide  # no sideways scrolling of the page
