"""Utilization charts on the step axis (render/charts.py StepAxis) and GPU means over the steady steps
(analyzers/devices.py): a sample lines up with the step it was taken in, start-up is named instead of squeezing
the steps, and SM utilization is not averaged over CUDA initialisation."""
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, load_summary, run_haiprof
from haiprof.analyzers import devices
from step_rows import step_columns
from haiprof.render import charts

MS = 10**6
GPU_RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs")) / "h100-2026-11-22"


def _steps():
    # origin 0; start-up until 2 s; steps 0..3 of 100 ms, an evaluation gap of 300 ms between steps 1 and 2
    spans = [(0, 2000, 2100), (1, 2100, 2200), (2, 2500, 2600), (3, 2600, 2700)]
    return step_columns([(i, a * MS, b * MS) for i, a, b in spans])


def test_samples_sit_inside_their_step_and_gaps_on_the_boundary():
    axis = charts.StepAxis.of(_steps(), 0, warmup=1)
    assert axis.x(1.0) is None                     # start-up: before the first step
    assert axis.x(2.0) == pytest.approx(-0.5)      # the first step's start is the left edge of bar 0
    assert axis.x(2.05) == pytest.approx(0.0)      # the middle of step 0 is bar 0's centre
    assert axis.x(2.175) == pytest.approx(1.25)
    assert axis.x(2.3) == pytest.approx(1.5)       # between steps 1 and 2 (evaluation): on their boundary
    assert axis.x(2.65) == pytest.approx(3.0)
    assert axis.x(2.8) is None                     # after the last step
    lay = axis.layout()
    assert lay["xaxis"]["range"] == [-0.5, 3.5] and lay["xaxis"]["title"]["text"] == "step"
    assert lay["shapes"][0]["x0"] == -0.5 and lay["shapes"][0]["x1"] == 0.5   # the warm-up step shaded


def test_timeline_chart_names_what_it_leaves_out():
    axis = charts.StepAxis.of(_steps(), 0)
    fig = charts.timeline_chart("CPU", "%", [("main", [0.5, 1.5, 2.05, 2.65, 3.0], [1, 2, 3, 4, 5])], axis)
    assert fig["data"][0]["x"] == pytest.approx([0.0, 3.0]) and fig["data"][0]["y"] == [3, 4]
    assert "1.5 s of start-up" in fig["layout"]["title"]["text"]
    assert "0.3 s after the last step" in fig["layout"]["title"]["text"]
    # too few steps, or no sample inside a step: the seconds axis stays, nothing is dropped
    assert charts.StepAxis.of(_steps()[:2], 0) is None
    fig = charts.timeline_chart("CPU", "%", [("main", [0.5, 1.5], [1, 2])], axis)
    assert fig["data"][0]["x"] == [0.5, 1.5] and fig["layout"]["xaxis"]["title"]["text"] == "seconds since start"


def _nvml(t_s, util, power_w):
    return {"t_ns": int(t_s * 1e9), "devices": [{"index": 0, "sm_util_pct": util, "power_mw": power_w * 1000}]}


def test_gpu_means_over_the_steady_steps_leave_start_up_out():
    # 8 s of initialisation at 0% (the GPU idles by necessity), then 4 s of steps at 90%
    recs = [_nvml(t, 0, 70) for t in range(8)] + [_nvml(8 + t, 90, 400) for t in range(1, 5)]
    summary, tl = devices.gpus(recs, t0_ns=0, steady_ns=(8 * 10**9, 12 * 10**9))
    g = summary["devices"]["0"]
    assert g["sm_util_pct_steady_mean"] == 90 and g["power_w_steady_mean"] == 400 and g["steady_samples"] == 4
    assert g["sm_util_pct_mean"] == pytest.approx(30)       # the whole-run figure stays, under its own name
    assert tl["util"][0][1][0] == 0.0                       # seconds from the run's origin, not the first sample
    summary, _ = devices.gpus(recs, t0_ns=0, steady_ns=None)
    assert summary["devices"]["0"]["sm_util_pct_steady_mean"] is None


@pytest.mark.skipif(not (GPU_RUNS / "compute_base").is_dir(), reason="no recorded GPU runs")
def test_recorded_h100_run_utilization_on_the_step_axis(tmp_path):
    d = tmp_path / "compute_base"
    shutil.copytree(GPU_RUNS / "compute_base", d)
    assert run_haiprof("report", "--quiet", d, timeout=300).returncode == 0
    s = load_summary(d)
    g = s["hardware"]["gpu"]["devices"]["0"]
    # the matmul-bound run keeps its SMs busy in steady state; start-up (CUDA init, the 4.9 s first step) is idle
    assert g["sm_util_pct_steady_mean"] > 2 * g["sm_util_pct_mean"]
    html = (d / "report.html").read_text()
    figs = json.loads(html.split('id="haiprof-figures">', 1)[1].split("</script>", 1)[0])
    n = s["steps"]
    for key in ("cpu", "mem", "hw-gpu-util", "hw-gpu-power", "hw-gpu-mem"):
        lay = figs[key]["layout"]
        assert lay["xaxis"]["title"]["text"] == "step" and lay["xaxis"]["range"] == [-0.5, n - 0.5], key
        xs = [x for t in figs[key]["data"] for x in t["x"]]
        assert xs and all(-0.5 <= x <= n - 0.5 for x in xs), key
    assert figs["steps"]["data"][0]["x"][0] == 0 and len(figs["steps"]["data"][0]["x"]) == n


def test_device_memory_per_step_spans_the_step_charts_steps():
    from haiprof.render import gpu
    per = [{"index": i, "peak_allocated": 2**30 * i, "peak_reserved": 2**31} for i in range(3, 10)]
    fig = gpu._memory_chart({"per_step": per, "capacity_bytes": 80 * 2**30}, list(range(12)))
    assert fig["layout"]["xaxis"]["range"] == [-0.5, 11.5] and fig["data"][0]["x"] == list(range(3, 10))
    assert fig["layout"]["yaxis"]["range"] == [0, 80]
