"""Docs build: profile the bundled input-bound example and screenshot its report with headless Chromium.

    python docs/build.py [--png docs/report.png]      (what `make docs` runs)

The PNG in the README is this script's output, so the picture always shows the current report. Chromium is the
system's (Debian's `chromium`), driven by playwright; playwright's own browser download is not needed.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def profile_example(run_dir: Path) -> Path:
    # The same command as `make demo`, run from the repo root so the report shows a relative script path.
    cmd = [sys.executable, "-m", "haiprof", "run", "--out", str(run_dir), "examples/input_bound.py", "--batches", "40"]
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run_dir / "report.html"


def screenshot(report: Path, png: Path, width: int = 1280, height: int = 1400) -> Path:
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("docs/build.py: no chromium found (apt-get install chromium, or `make browser`)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
            page.goto(report.resolve().as_uri(), wait_until="load")
            # plotly draws after load: wait until every chart has its SVG.
            page.wait_for_function("""() => [...document.querySelectorAll('.chart')]
                                         .every(c => c.querySelector('svg.main-svg'))""", timeout=30_000)
            png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(png), full_page=False)
        finally:
            browser.close()
    return png


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--png", default=str(REPO / "docs" / "report.png"))
    ns = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="haiprof-docs-") as tmp:
        report = profile_example(Path(tmp) / "input_bound")
        png = screenshot(report, Path(ns.png))
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
