"""Render a trace to the HTML report and screenshot it in headless Chromium.

    .venv/bin/python bench/html_screenshot.py [TRACE] [-o docs/img/report-html.png] [--height 2000]

Without TRACE it renders the sample trace the renderer tests use (tests/tracefactory.py: every
phase status and check result). Prints the render time, the page size and where the HTML and the
screenshot went. When no Chromium is installed it says so and exits 0, so it can run anywhere;
install one with `apt-get install -y chromium` (Debian) or point POLICYRUN_CHROMIUM at a binary.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policyrun.trace.model import Trace, load_trace  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Headless, and nothing that reaches the network: the page must render from the file alone.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_browser() -> str | None:
    explicit = os.environ.get("POLICYRUN_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def sample_trace() -> Trace:
    sys.path.insert(0, str(ROOT / "tests"))
    import tracefactory

    return tracefactory.flagship()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", type=Path, help="trace.json (default: the tests' sample trace)")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "img" / "report-html.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args()

    from policyrun.render.html import render_html

    trace = load_trace(args.trace) if args.trace else sample_trace()
    start = time.perf_counter()
    html = render_html(trace)
    elapsed = time.perf_counter() - start
    print(f"rendered {len(trace.phases)} phases to {len(html):,} bytes of HTML in {elapsed * 1000:.1f} ms")

    browser = find_browser()
    if browser is None:
        print("no Chromium found (tried " + ", ".join(BROWSERS) + " and $POLICYRUN_CHROMIUM); "
              "skipping the screenshot")
        return 0
    with tempfile.TemporaryDirectory(prefix="policyrun-shot-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html, encoding="utf-8")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        cmd = [browser, *FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
               f"--screenshot={args.output.resolve()}", f"--window-size={args.width},{args.height}", page.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if not args.output.exists():
            print(f"{browser} wrote no screenshot (exit {proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
            return 1
    print(f"screenshot: {args.output} ({args.output.stat().st_size:,} bytes) via {browser}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
