"""What the analysis decides, the page shows as decided (issue 28, a run model read once): one steady rule for
every chart (the device chart's y-axis is set by the analysis' steady device steps, not a rule of the page's
own), one FLOP formatter for the findings and the page, one reading of NVML's device-wide memory peak."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import GPU_RUNS, REPO

from haiprof.analysis import efficiency
from haiprof.analysis import gpu as gpu_analysis
from haiprof.analysis.summary import RunData
from haiprof.analyzers import thresholds as T
from haiprof.analyzers.step_columns import steady_rows
from haiprof.render import gpu as gpu_page
from haiprof.render import windows as windows_page
from haiprof.rundir.units import format_flops

SOURCES = [p for folder in ("haiprof", "analyzers", "collectors", "fixes")
           for p in sorted((REPO / folder).rglob("*.py"))]


def _string_constants(path: Path, value: str) -> int:
    """How often the module's code has the string `value` (a unit's label, a key), docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == value)


# -- one steady rule --------------------------------------------------------------------------------------------
def _device_run(durations_ms: list, warmup: int) -> RunData:
    """A RunData as the analysis leaves it for a CUDA run: summary.json's device per_step and the step numbers
    of the steady device steps (device_timeline.steady: step_columns.steady_rows on the device clock)."""
    idx = np.arange(len(durations_ms))
    per = [{"index": int(i), "start_ns": int(i) * 10**9, "duration_s": d / 1e3, "busy_s": 0.8 * d / 1e3,
            "traced": False} for i, d in zip(idx, durations_ms)]
    summary = {"device": {"per_step": per, "steady_step_s": 0.01, "busy_share": 0.8, "idle_share": 0.2,
                          "idle_by_host": {}}, "warmup_steps_excluded": warmup}
    dur = np.array(durations_ms) * 1e6
    rows = steady_rows(dur, np.zeros(len(dur), dtype=bool), T.WARMUP_STEPS)
    return RunData(None, {}, summary, device_steady=idx[rows])


def test_the_device_chart_s_axis_follows_the_analysis_steady_steps():
    """Steps 1-4 are a compile's slow start after the warm-up step: the analysis leaves them out of the steady
    steps (leading_slow), so the chart's axis is the 10 ms steps' (clipping the slow ones, each labelled); the
    page's own rule (after warm-up, untraced) kept them and set the axis at 1.5 x 100 ms."""
    data = _device_run([500] + [100] * 4 + [10] * 15, warmup=1)
    assert data.device_steady.tolist() == list(range(5, 20))
    fig = gpu_page._busy_chart(data, data.summary["device"], 1, list(range(20)))
    assert fig["layout"]["yaxis"]["range"] == [0, pytest.approx(15.0)]
    assert fig["layout"]["annotations"]   # the clipped bars say their own value


def test_a_recorded_run_hands_the_page_its_steady_device_steps(tmp_path):
    """The analysis' device steady steps are those of the one rule (step_columns.steady_rows) over the steps
    summary.json lists for the device."""
    from haiprof.analysis.summary import analyze
    from haiprof.rundir import RunDir

    src = GPU_RUNS / "h100-2026-11-22" / "h2d_base"
    if not src.is_dir():
        pytest.skip(f"no recorded run {src}")
    shutil.copytree(src, tmp_path / "run")
    data = analyze(RunDir(tmp_path / "run"))
    per = data.summary["device"]["per_step"]
    rows = steady_rows(np.array([p["duration_s"] for p in per]), np.array([p["traced"] for p in per]),
                       T.WARMUP_STEPS)
    assert data.device_steady.tolist() == [per[r]["index"] for r in rows] and len(rows) == data.summary["device"]["steps"]


# -- one FLOP formatter ---------------------------------------------------------------------------------------
def test_one_flop_formatter_for_the_findings_and_the_page():
    """The compute finding's MFU and the page's efficiency table write a rate the same way (the finding's had no
    kFLOP: '5e+03 FLOP/s' where the page said '5 kFLOP/s')."""
    assert [p.relative_to(REPO).as_posix() for p in SOURCES if _string_constants(p, "TFLOP")] == \
        ["haiprof/rundir/units.py"]
    eff = {"windows": [], "flops_per_step": 50.0, "dtype": "float32", "achieved_flops": 5e3, "peak_flops": 2e12,
           "peak_source": "test", "note": None,
           "mfu": 2.5e-9}
    findings = [{"kind": "compute", "severity": "high", "share": 0.9, "message": "compute-bound", "evidence": {},
                 "fixes": []}]
    efficiency.quote_mfu(findings, eff)
    assert "(5 kFLOP/s of 2 TFLOP/s, test)" in findings[0]["message"]
    page = windows_page._efficiency(RunData(None, {}, {"efficiency": eff, "step_time_s": {"steady": 0.01}}))
    assert f"{format_flops(5e3)}/s" in page and f"{format_flops(2e12)}/s" in page
    assert [format_flops(x) for x in (12.0, 1.5e3, 2.5e6, 3e9, 4.56e12)] == \
        ["12 FLOP", "1.5 kFLOP", "2.5 MFLOP", "3 GFLOP", "4.56 TFLOP"]


# -- one reading of NVML's device-wide peak ---------------------------------------------------------------------
def test_nvml_s_device_wide_peak_is_read_in_one_place():
    """Without allocator counters the memory finding and the efficiency's headroom quote the same device: the
    first with both a peak and a capacity (the headroom took the first device listed, here one without a
    peak, and said nothing)."""
    analysis = REPO / "haiprof" / "analysis"
    assert [p.name for p in sorted(analysis.glob("*.py")) if _string_constants(p, "mem_used_bytes_max")] == ["gpu.py"]
    gib = 2 ** 30
    hardware = {"gpu": {"devices": {"0": {"mem_total_bytes": 80 * gib},
                                    "1": {"mem_used_bytes_max": 78 * gib, "mem_total_bytes": 80 * gib}}}}
    out = gpu_analysis.analyze(None, [], [], hardware, None)
    memory = next(f for f in out["findings"] if f["kind"] == "memory")
    eff: dict = {}
    efficiency.add_device_use(eff, None, None, hardware)
    head = eff["memory_headroom"]
    assert (head["peak_bytes"], head["capacity_bytes"], head["source"]) == \
        (memory["evidence"]["peak_bytes"], memory["evidence"]["capacity_bytes"], memory["evidence"]["source"])


# -- steps are columns, never objects ---------------------------------------------------------------------------
def test_steps_are_columns_only():
    """No step object anywhere (the analyzers, the live status line and the page take StepColumns): a step is
    a row of the columns, asked for by slice or mask."""
    from haiprof.analyzers import step_columns, steps
    from haiprof.analyzers.step_columns import StepColumns

    assert not hasattr(step_columns, "Step") and not hasattr(steps, "Step")
    cols = StepColumns.build([0, 1, 2], [0, 10, 20], [10, 20, 35], {"forward": [4, 5, 6]}, [False, True, False])
    assert cols[1:].index.tolist() == [1, 2] and cols.phase("forward").tolist() == [4, 5, 6]
    assert cols.phase("other").tolist() == [0, 0, 0] and cols.duration_ns.tolist() == [10, 10, 15]
    with pytest.raises(TypeError):
        cols[0]
    with pytest.raises(TypeError):
        list(cols)
    assert len(StepColumns.of([])) == 0   # RunData without steps
    progress = ast.parse((REPO / "haiprof" / "runtime" / "progress.py").read_text())
    imported = {a.name for n in ast.walk(progress) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "owned" in imported and "attribute" not in imported   # the status line: the report's columns code
