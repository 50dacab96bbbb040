"""Issue 28, the step charts in headless Chromium: the labels of clipped bars never drawn over each other (the
start-up steps 1, 2, 3 of a 301-step run read "▲▲1258ms"); a long run's title says what the chart shows at any
zoom (it said "2000 buckets of 50 steps" over 15 single steps), the bucket size is in the y title the page
rewrites; the y range follows the bars, a bucket's min-max whisker clips instead of flattening them."""
import os
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_haiprof
from test_report_browser import browser, open_report  # noqa: F401  (browser: a fixture)

sys.path.insert(0, str(REPO))
from benchmarks.report_size import write_run  # noqa: E402

RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs")) / "h100-2026-11-22"
N, SLOW = 100_000, 73_421


def _overlaps(page, fig: str) -> list:
    boxes = [b for b in (a.bounding_box() for a in page.locator(f"#fig-{fig} .annotation").all()) if b]

    def cross(a, b, pos, size):
        return a[pos] < b[pos] + b[size] and b[pos] < a[pos] + a[size]
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if cross(boxes[i], boxes[j], "x", "width") and cross(boxes[i], boxes[j], "y", "height")]


@pytest.mark.skipif(not (RUNS / "launch_g").is_dir(), reason="launch_g not recorded")
def test_clipped_bar_labels_never_overlap(browser, gpu_reports):  # noqa: F811
    d, r = gpu_reports(["launch_g"])["launch_g"]   # steps 0-3 and 6 compile and warm up: 5 clipped bars
    assert r.returncode == 0, r.stderr
    page, problems, _ = open_report(browser, d / "report.html")
    assert problems == []
    for fig in ("steps", "host-steps", "gpu-steps"):
        texts = page.locator(f"#fig-{fig} .annotation").all_text_contents()
        assert any("▲" in t for t in texts), (fig, texts)
        assert _overlaps(page, fig) == [], (fig, texts)
    page.close()


@pytest.fixture(scope="module")
def long_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("long") / "run"
    write_run(out, N, SLOW)
    r = run_haiprof("report", "--quiet", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out / "report.html"


def _shown(page) -> dict:
    return page.evaluate("""() => {
        const el = document.getElementById('fig-steps'), L = el._fullLayout, r = L.xaxis.range, sum = {};
        let whisker = 0;
        for (const t of el._fullData) {
            for (let i = 0; i < t.x.length; i++) {
                if (t.x[i] < r[0] || t.x[i] > r[1]) continue;
                if (t.type === 'bar') sum[t.x[i]] = (sum[t.x[i]] || 0) + (t.y[i] || 0);
                else if (t.error_y && t.error_y.array) whisker = Math.max(whisker, t.y[i] + t.error_y.array[i]);
            }
        }
        return {title: L.title.text, ytitle: L.yaxis.title.text, yrange: L.yaxis.range,
                top: Math.max(...Object.values(sum)), bars: Object.keys(sum).length, whisker: whisker};
    }""")


def _zoom(page, lo, hi):
    page.evaluate("([lo, hi]) => Plotly.relayout('fig-steps', {'xaxis.range': [lo, hi]})", [lo, hi])
    page.wait_for_function("([lo, hi]) => document.getElementById('fig-steps').dataset.range === lo + ',' + hi",
                           arg=[lo, hi], timeout=60_000)


def test_a_long_runs_title_and_axis_say_what_is_drawn(browser, long_report):  # noqa: F811
    page = browser.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(long_report.as_uri())
    # inflating plotly and 100,000 steps of detail: slow on a loaded machine, so more than open_report's 30 s
    page.wait_for_function("document.getElementById('fig-steps').dataset.ready === '1'", timeout=120_000)
    assert problems == []
    whole = _shown(page)
    assert "100,000 steps" in whole["title"] and "buckets" not in whole["title"], whole["title"]
    assert "50 steps a bar" in whole["ytitle"], whole["ytitle"]
    _zoom(page, 49_999.5, 50_014.5)                         # 15 single steps
    z = _shown(page)
    assert z["bars"] == 15 and "every step" in z["ytitle"] and "50 steps" not in z["title"] + z["ytitle"], z
    _zoom(page, 60_000, 80_000)                             # buckets of 10, one of them holding the slow step
    z = _shown(page)
    assert z["whisker"] > z["yrange"][1] >= z["top"] * 0.999, z   # the bars set the axis, the whisker clips
    assert z["yrange"][1] <= 1.1 * z["top"], z
    page.close()
