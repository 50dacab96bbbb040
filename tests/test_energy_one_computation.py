"""Issue 28: the energy panel's text and its chart are one computation quoted twice. launch_base's page said
"1063.6 J over 295 steps" (the steady steps) above a chart of 301 bars adding up to 1,817.7 J (every step, the
compilation and profiler warm-up steps included)."""
import re

import pytest

from conftest import load_summary
from test_gpu_runs import NAMES, _figures

RUNS = [n for n in ("launch_base", "compute_base") if n in NAMES]   # NVML energy counters, slow first steps


@pytest.mark.skipif(not RUNS, reason="launch_base / compute_base not recorded")
def test_the_energy_text_and_its_chart_cover_the_same_steps(gpu_reports):
    for name, (d, r) in gpu_reports(RUNS).items():
        assert r.returncode == 0, r.stderr
        html, s = (d / "report.html").read_text(), load_summary(d)
        text = re.search(r"([\d.]+) J over (\d+) steady steps", html)
        assert text, name
        bars = _figures(html)["hw-energy"]
        xs, ys = bars["data"][0]["x"], bars["data"][0]["y"]
        assert len(xs) == int(text.group(2)) == s["energy"]["steps"], (name, len(xs), text.group(0))
        assert abs(sum(ys) - float(text.group(1))) <= 0.05 + 1e-9, (name, sum(ys), text.group(0))
        assert f"({len(xs)} steps)" in bars["layout"]["title"]["text"]
        # the bars are steady steps: none of the warm-up, none of the tracing window
        traced = {p["index"] for p in s["device"]["per_step"] if p["traced"]}
        assert not traced & set(xs) and min(xs) >= s["warmup_steps_excluded"], (name, sorted(traced), xs[:5])
        # the per-source joules are over the same steps
        assert abs(sum(v["joules"] for v in s["energy"]["sources"].values()) - s["energy"]["joules_total"]) < 1e-6


def test_the_per_step_series_is_the_totals_steps():
    """summarize's per-step series (the chart) holds the steps its totals (the text) count, and adds up to them."""
    from haiprof.analyzers import energy
    from test_hw_analyzers import MS, _steps
    recs, steps = _steps(6)
    segs = [(0, 500 * MS, 200.0)]            # no power sample covers the last step
    e = energy.summarize(steps, steps[2:], energy.phase_intervals(recs), {"gpu": segs})
    idx = [p["index"] for p in e["per_step"]]
    assert idx == steps[2:5].index.tolist() and e["steps"] == 3
    assert sum(p["joules"] for p in e["per_step"]) == pytest.approx(e["joules_total"])
    assert e["sources"]["gpu"]["joules"] == pytest.approx(e["joules_total"])
