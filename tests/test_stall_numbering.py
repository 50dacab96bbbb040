"""Issue 28: one step numbering on the whole page. A periodic stall's evidence names its steps and period in the
run's own step index (the step chart's x, the slowest-steps table's "step"), not as positions in the steady steps
(warm-up and traced steps left out), and its seconds threshold reads as a time, not a percent."""
import json
import re

import numpy as np
import pytest

from haiprof.analyzers import long_run as L
from haiprof.render import evidence as E
from test_gpu_runs import NAMES, _figures


def test_stall_steps_and_period_are_the_runs_own():
    # steps 0-199; steady: from step 6 on (warm-up and the tracing window out), and 50-52 traced
    index = np.array([i for i in range(6, 200) if not 50 <= i <= 52])
    d = np.full(len(index), 10e6)
    d[index % 8 == 0] = 60e6                       # a stall on every 8th step of the run
    t = np.concatenate([[0.0], np.cumsum(d)[:-1]])
    f = L.periodic_stalls(d, t, {"dataloader": d - 10e6}, index=index)
    assert f["evidence"]["first_steps"] == [8, 16, 24, 32, 40]
    assert f["evidence"]["period_steps"] == 8 and "every 8 steps" in f["message"]


def test_seconds_and_bytes_thresholds_keep_their_unit():
    rows = dict(E.rows({"thresholds": {"factor": 2.0, "min_excess_s": 0.001, "bytes": 64 << 20, "change": 0.1},
                        "excess_by_phase_s": {"dataloader": 0.0987}}))
    assert rows["thresholds · min excess s"] == "1 ms"
    assert rows["thresholds · bytes"] == "64 MiB" and rows["thresholds · change"] == "10%"
    assert rows["excess by phase s · dataloader"] == "98.7 ms"


STALLED = [n for n in ("h2d_p", "h2d_auto") if n in NAMES]   # recordings whose DataLoader stalls every few steps


@pytest.mark.skipif(not STALLED, reason="no recorded run with periodic stalls")
def test_the_evidence_names_the_steps_the_chart_and_table_show(gpu_reports):
    checked = 0
    for name, (d, r) in gpu_reports(STALLED).items():
        assert r.returncode == 0, r.stderr
        s = json.loads((d / "summary.json").read_text())
        f = next((f for f in s["findings"] if f["kind"] == "periodic-stall"), None)
        if f is None:
            continue
        checked += 1
        html = (d / "report.html").read_text()
        fig = _figures(html)["steps"]
        ms = {}
        for trace in fig["data"]:
            if trace["type"] == "bar":
                for x, y in zip(trace["x"], trace["y"]):
                    ms[x] = ms.get(x, 0) + (y or 0)
        median = float(np.median(list(ms.values())))
        slowest = {row["step"] for row in s["slowest_steps"]}
        for step in f["evidence"]["first_steps"]:
            assert ms[step] > 2 * median, (name, step, ms[step], median)   # the chart's bar at that x is a stall
            assert step in slowest, (name, step, sorted(slowest))
        row = re.search(r"first steps</td><td>([^<]*)<", html)
        assert row and row.group(1) == ", ".join(map(str, f["evidence"]["first_steps"]))
        assert "min excess s</td><td>1 ms<" in html
    if not checked:
        pytest.skip("no periodic stall found in the recordings")
