"""A 100,000-step run in headless Chromium (issue 21): the step chart shows the whole run in buckets, zooms down
to single steps (re-bucketed in the page from the embedded per-step detail), a slow step injected at 73,421 heads
the slowest-steps table and its link zooms the chart onto it, hover gives values in ms, the report is <= 1 MB.

The run directory is written with the real phase store writer (haiprof/phasestore.py) from noisy numpy columns
(benchmarks/report_size.py: 10-20% noise on each phase; real runs are not periodic, and periodic data would
compress to nothing), then `haiprof report DIR` analyses it as any run."""
import sys

import pytest

from conftest import REPO, artifact, load_summary, run_haiprof
from test_report_browser import MAX_REPORT_BYTES, browser, open_report  # noqa: F401  (browser: a fixture)

sys.path.insert(0, str(REPO))
from benchmarks.report_size import write_run  # noqa: E402  (the phase store writer on noisy numpy columns)

N, SLOW = 100_000, 73_421


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("long") / "run"
    write_run(out, N, SLOW)
    r = run_haiprof("report", "--quiet", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def _drawn(page, fig="steps") -> dict:
    """What the step chart shows now: the x axis range and each bar trace's x values inside it."""
    return page.evaluate("""fig => {
        const el = document.getElementById('fig-' + fig), r = el._fullLayout.xaxis.range;
        const bars = el._fullData.filter(t => t.type === 'bar');
        return {range: r, xs: bars.map(t => Array.from(t.x).filter(x => x >= r[0] && x <= r[1])),
                width: bars.map(t => t.width), names: bars.map(t => t.name),
                y: bars.map(t => Array.from(t.y)), ytitle: el._fullLayout.yaxis.title.text};
    }""", fig)


def _zoom(page, lo, hi):
    page.evaluate("([lo, hi]) => Plotly.relayout('fig-steps', {'xaxis.range': [lo, hi]})", [lo, hi])
    page.wait_for_function("([lo, hi]) => document.getElementById('fig-steps').dataset.range === lo + ',' + hi",
                           arg=[lo, hi], timeout=10_000)


def test_long_run_step_chart_zooms_to_single_steps(long_run, browser):  # noqa: F811
    report = long_run / "report.html"
    assert report.stat().st_size <= MAX_REPORT_BYTES
    s = load_summary(long_run)
    assert s["steps"] == N
    page, problems, requests = open_report(browser, report)
    assert problems == [] and requests == [report.as_uri()]
    page.wait_for_function("document.getElementById('fig-steps').dataset.ready === '1'")
    whole = _drawn(page)
    assert 0 < len(whole["xs"][0]) <= 2000 and "forward" in whole["names"]   # buckets over the whole run
    assert page.locator("#fig-steps .rangeslider-container").count() == 1
    page.locator("#fig-steps").screenshot(path=artifact("long-run-whole.png"))
    # the one warm-up step stays visible over 100,000 steps: at least 1/250 of the view, labelled
    warm = page.evaluate("document.getElementById('fig-steps')._fullLayout.shapes.map(s => [s.x0, s.x1])")
    assert len(warm) == 1 and warm[0][1] - warm[0][0] >= N / 250 * 0.99, warm
    assert "warm-up" in page.locator("#fig-steps .annotation").all_text_contents()

    _zoom(page, 49_999.5, 50_009.5)        # steps 50,000-50,009: ten bars, one per step, with their phases
    z = _drawn(page)
    assert all(xs == list(range(50_000, 50_010)) for xs in z["xs"]), z["xs"]
    assert len(z["names"]) >= 4 and "every step" in z["ytitle"]
    fwd = z["y"][z["names"].index("forward")]
    assert all(0.5 < v < 2 for v in fwd), fwd                     # ~1 ms forward, the embedded per-step detail
    assert page.locator("#fig-steps .bars .point path").count() >= 10 * 4

    # hover a bar: its value with its unit
    page.locator("#fig-steps").scroll_into_view_if_needed()
    bar = page.locator("#fig-steps .bars").nth(z["names"].index("backward")).locator(".point path").nth(3)
    box = bar.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#fig-steps .hoverlayer .hovertext", timeout=5_000)
    hover = page.locator("#fig-steps .hoverlayer").text_content()
    assert " ms" in hover and "step 500" in hover, hover
    page.screenshot(path=artifact("long-run-zoom.png"))

    # the slowest steps: the injected one first; its link zooms the chart onto it
    first = page.locator("#slowest tr[data-step]").first
    assert first.get_attribute("data-step") == str(SLOW) and page.locator("#slowest tr[data-step]").count() == 20
    assert "host and GPU around it" in page.locator("#slowest-table tr").first.inner_text()
    assert s["slowest_steps"][0]["step"] == SLOW and s["slowest_steps"][0]["time_ms"] > 300
    first.locator("a.zoom-step").click()
    page.wait_for_function(f"document.getElementById('fig-steps').dataset.range === '{SLOW - 10.5},{SLOW + 10.5}'")
    z = _drawn(page)
    assert SLOW in z["xs"][0] and len(z["xs"][0]) == 21
    total = sum(y[z["xs"][0].index(SLOW)] for y in z["y"])
    assert total > 300                                              # the slow step's bar, in ms, whole
    page.screenshot(path=artifact("long-run-slowest.png"))

    page.evaluate("Plotly.relayout('fig-steps', {'xaxis.autorange': true})")   # back to the whole run
    page.wait_for_function(f"document.getElementById('fig-steps').dataset.range === '{-0.5},{N - 0.5}'")
    assert problems == []
    page.close()
