"""A 100,000-step run in headless Chromium (issue 21): the step chart shows the whole run in buckets, zooms down
to single steps (re-bucketed in the page from the embedded per-step detail), a slow step injected at 73,421 heads
the slowest-steps table and its link zooms the chart onto it, hover gives values in ms, the report is <= 1 MB.

The run directory is written with the real phase store writer (haiprof/phasestore.py) from noisy numpy columns
(10% noise on each phase: real runs are not periodic, and periodic data would compress to nothing), then
`haiprof report DIR` analyses it as any run."""
import json

import numpy as np
import pytest

from conftest import artifact, load_summary, run_haiprof
from test_report_browser import MAX_REPORT_BYTES, browser, open_report  # noqa: F401  (browser: a fixture)

from haiprof.phasestore import encode_chunk

N, SLOW, MS, GAP = 100_000, 73_421, 1_000_000, 20_000
T0 = 10**12


def write_run(out, n=N, slow_at=SLOW, seed=0):
    """A finished CPU run of n steps: DataLoader, forward, backward, optimizer; an epoch every 10,000 steps."""
    rng = np.random.default_rng(seed)
    load = (0.3 * MS * (1 + 0.2 * rng.random(n))).astype(np.int64)
    fwd, bwd, opt = ((ms * MS * (1 + 0.1 * rng.standard_normal(n)).clip(0.5)).astype(np.int64) for ms in (1, 2, 0.5))
    fwd[slow_at] += 300 * MS
    step = load + fwd + bwd + opt + 4 * GAP
    end = T0 + 10**9 + np.cumsum(step)
    a = end - step
    b = a + load
    c, d = b + GAP, b + GAP + fwd
    e, f = d + GAP, d + GAP + bwd
    g, h = f + GAP, f + GAP + opt
    cols = [x.tolist() for x in (a, b, c, d, e, f, g, h, end)]
    out.mkdir(parents=True)
    (out / "samples").mkdir()
    (out / "status.jsonl").write_text(json.dumps({"collector": "phases", "available": True, "reason": ""}) + "\n")
    (out / "meta.json").write_text(json.dumps({
        "command": "haiprof run train.py", "target_name": "train", "script": "train.py", "argv": [], "exit_code": 0,
        "how": "exit", "start_monotonic_ns": T0, "end_monotonic_ns": int(end[-1]) + 10**8, "start_time": 1.8e9,
        "end_time": 1.8e9 + (int(end[-1]) - T0) / 1e9, "host": "test", "cpu_count": 2, "gpus": []}))
    with open(out / "phases.bin", "wb") as fh:
        recs = [("@step", cols[0][0], cols[0][0])]
        for i in range(n):
            recs += [("dataloader", cols[0][i], cols[1][i]), ("forward", cols[2][i], cols[3][i]),
                     ("backward", cols[4][i], cols[5][i]), ("optimizer", cols[6][i], cols[7][i]),
                     ("@step", cols[8][i], cols[8][i])]
            if i % 10_000 == 5_000:
                recs.append(("@loader", cols[0][i] + 1, cols[0][i] + 1))
            if len(recs) >= 6000:
                fh.write(encode_chunk(recs))
                recs = []
        fh.write(encode_chunk(recs))


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("long") / "run"
    write_run(out)
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
    assert first.get_attribute("data-step") == str(SLOW)
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
