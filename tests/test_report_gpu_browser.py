"""The report of real H100 runs (shared/gpu-runs, re-analysed with `haiprof report`) in headless Chromium: the
action first ("do this next" above the fold, pinned memory on the pageable-copy run), kernels listed on the
matmul-bound run, the step chart's axis set by the steady steps, no console errors, no network, ≤ 1.5 MB.
Screenshots are kept in test-artifacts/ (conftest.artifact)."""
import json
import os
from pathlib import Path

import pytest

from conftest import REPO, artifact, load_summary
from test_report_browser import MAX_REPORT_BYTES, assert_lined_up, browser, legend, open_report  # noqa: F401

GPU_RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs"))
RUNS = GPU_RUNS / "h100-2026-11-22"

pytestmark = pytest.mark.skipif(not (RUNS / "h2d_base").is_dir() or not (RUNS / "compute_base").is_dir(),
                                reason=f"no recorded GPU runs at {GPU_RUNS}")


def _report(gpu_reports, name):
    d, r = gpu_reports([name])[name]   # conftest.gpu_reports: one `haiprof report` per recording, shared
    assert r.returncode == 0 and "could not write" not in r.stderr, r.stderr
    return d


def _check_page(browser, d, tmp_path, name):
    report = d / "report.html"
    assert report.stat().st_size <= MAX_REPORT_BYTES
    page, problems, requests = open_report(browser, report)
    assert problems == []
    assert requests == [report.as_uri()]
    box = page.locator("#next").bounding_box()
    assert box and box["y"] + box["height"] <= page.viewport_size["height"], box
    page.screenshot(path=artifact(f"{name}-top.png"))
    page.screenshot(path=artifact(f"{name}-full.png"), full_page=True)
    return page


def test_pageable_copies_say_pin_memory(browser, gpu_reports, tmp_path):  # noqa: F811
    d = _report(gpu_reports, "h2d_base")
    s = load_summary(d)
    # prefetch is not offered: handing 77 MB batches over from workers is predicted to cost more than loading them
    # on the training thread (the recorded h2d_p / h2d_auto runs: 39.6 / 34.4 ms against 30.2)
    assert "prefetch" not in [a.get("fix") for a in s["next_steps"]] and "prefetch" in s["advice_left_out"]
    assert s["gpu"]["copies"][0]["kind"] == "HtoD pageable"
    page = _check_page(browser, d, tmp_path, "h2d_base")
    text = page.locator("#next").inner_text()
    assert "prefetch" in text and "slower" in text and "haiprof run --fix prefetch" not in text
    # what it is told instead: the bytes each batch carries are the wait
    assert s["next_steps"][0]["title"].startswith("Send fewer bytes per batch") and "77 MB" in text
    assert "pageable" in page.locator("#findings").inner_text()
    # the GPU section: busy/idle per step drawn, idle split by host cause, copies with bandwidth
    assert page.locator("#fig-gpu-steps .bars path").count() >= 20
    assert "waiting for the DataLoader" in page.locator("#gpu-idle").inner_text()
    assert "HtoD pageable" in page.locator("#gpu-copies").inner_text()
    page.close()


def test_matmul_bound_run_lists_kernels_and_steady_axis(browser, gpu_reports, tmp_path):  # noqa: F811
    d = _report(gpu_reports, "compute_base")
    s = load_summary(d)
    page = _check_page(browser, d, tmp_path, "compute_base")
    rows = page.locator("#top-kernels tr")
    assert rows.count() >= 4
    assert "gemm" in page.locator("#top-kernels").inner_text()
    # the step chart's y-axis is set by the steady steps: the start-up step is clipped and labelled
    figs = json.loads(page.locator("#haiprof-figures").text_content())
    steps = figs["steps"]
    totals = [sum(t["y"][i] for t in steps["data"]) for i in range(len(steps["data"][0]["y"]))]
    top = steps["layout"]["yaxis"]["range"][1]
    assert max(totals) > top >= s["step_time_s"]["steady"] * 1e3
    assert steps["layout"]["annotations"], "clipped steps are labelled with their own time"
    # busy/idle per step and the utilization charts line up with the step chart, step for step
    for other in ("gpu-steps", "hw-gpu-util", "cpu"):
        assert_lined_up(page, "steps", other)
    for fig in figs.values():    # no axis with negative ticks: every bar chart starts at zero
        rng = fig["layout"].get("yaxis", {}).get("range")
        assert rng is None or rng[0] >= 0
    page.close()


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})"


@pytest.mark.parametrize("name", ["compute_base", "launch_base", "h2d_p"])
def test_one_busy_figure_and_phase_colours_on_the_page(browser, gpu_reports, tmp_path, name):  # noqa: F811
    import re

    from haiprof.render.charts import PHASE_COLORS

    if not (RUNS / name).is_dir():
        pytest.skip(f"{name} not recorded")
    d = _report(gpu_reports, name)
    page = _check_page(browser, d, tmp_path, name)
    head = re.search(r"GPU busy (\d+)%", page.locator("#findings").inner_text())
    section = re.search(r"busy (\d+)% \(kernels and copies\)", page.locator("#gpu").inner_text())
    facts = re.search(r"kernels and copies, device clock\)\s+(\d+)%", page.locator("#ops").inner_text())
    assert head and section and facts, (head, section, facts)
    figures = [int(m.group(1)) for m in (head, section, facts)]
    assert max(figures) - min(figures) <= 1, figures
    swatches = legend(page, "steps")
    phases = [p for p in swatches if p in PHASE_COLORS]
    assert phases and all(swatches[p] == _rgb(PHASE_COLORS[p]) for p in phases), swatches
    page.close()
