"""`Run.phases` and `haiprof export`'s phase slices are built from the phase columns (no Python list per record
read): the same table (dtypes, order, values) and the same trace events as the per-record builds they replaced, on
real runs (a CPU run's phases.bin, H100 runs' phases.jsonl with CUDA-event timings) and on records the columns hold
beside them (odd records, a run dir without a start time)."""
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

import haiprof
from haiprof.phasestore import encode_chunk
from haiprof.rundir import PHASES, RunDir, iter_records

from conftest import REPO

GPU_RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs"))
H100 = GPU_RUNS / "h100-2026-11-22"


def _rows_table(path) -> pd.DataFrame:
    """Run.phases as it was built before the columns: a row per record, then a stable sort on start_s."""
    run_dir = RunDir(path)
    meta = run_dir.read_meta()
    records = run_dir.read_phase_records()
    t0 = meta.get("start_monotonic_ns")
    if not isinstance(t0, int):
        t0 = min([s for _, s, _ in iter_records(records)] or [0])
    rows = []
    for name, s, e in iter_records(records):
        timing, phase = ("gpu", name[4:]) if name.startswith("gpu:") else ("host", name)
        if phase not in PHASES or e < s:
            continue
        rows.append((phase, timing, (s - t0) / 1e9, (e - t0) / 1e9, (e - s) / 1e6))
    df = pd.DataFrame(rows, columns=["phase", "timing", "start_s", "end_s", "duration_ms"])
    return df.sort_values("start_s", kind="stable").reset_index(drop=True)


def _same(path) -> pd.DataFrame:
    new = haiprof.load(path).phases
    pd.testing.assert_frame_equal(new, _rows_table(path), check_exact=True)
    return new


@pytest.fixture(scope="module")
def cpu_run(seeded):
    return seeded[1]   # seeded_train.py under `haiprof run --quiet` (conftest.seeded), only read or copied here


def test_a_cpu_run(cpu_run):
    assert (cpu_run / "phases.bin").is_file()
    df = _same(cpu_run)
    assert len(df) > 50 and set(df["timing"]) == {"host"}


@pytest.mark.parametrize("name", ["nanogpt", "h2d_base", "io_base"])
def test_h100_runs_with_cuda_event_timings(tmp_path, name):
    if not (H100 / name).is_dir():
        pytest.skip(f"no recorded H100 run at {H100 / name}")
    shutil.copytree(H100 / name, tmp_path / name)
    df = _same(tmp_path / name)
    assert len(df) > 50


def test_odd_records_and_no_start_time(cpu_run, tmp_path):
    """Records the columns cannot hold travel beside them and keep their place among equal start times; a run dir
    without start_monotonic_ns counts from its earliest record, odd ones included."""
    d = tmp_path / "run"
    shutil.copytree(cpu_run, d)
    records = RunDir(d).read_phase_records()
    first = min(r[1] for r in records)
    intervals = [i for i, r in enumerate(records) if r[0] in PHASES]
    records[intervals[2]] = [*records[intervals[2]][:3], {"timers": 1}]       # a dict: an odd record
    twin = list(records[intervals[5]])
    records.insert(intervals[5], [twin[0], twin[1], twin[2] + 7, "x"])        # an odd one at the same start
    records.append(["gpu:forward", first - 10, first + 5, 1.5])               # the earliest, a CUDA timing
    records.append(["forward", first, first - 1, 2.5])                        # ends before it starts: left out
    (d / "phases.bin").write_bytes(encode_chunk(records))
    meta = json.loads((d / "meta.json").read_text())
    del meta["start_monotonic_ns"]
    (d / "meta.json").write_text(json.dumps(meta))
    assert len(RunDir(d).read_phase_columns().odd) == len(RunDir(cpu_run).read_phase_columns().odd) + 4
    df = _same(d)
    assert df["start_s"].iloc[0] == 0.0 and df["timing"].iloc[0] == "gpu"


def test_no_phases(cpu_run, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(cpu_run, d)
    (d / "phases.bin").write_bytes(encode_chunk([["@step", 1, 1], ["forward", 5, 4]]))
    assert _same(d).empty


def _rows_events(rank, run_dir, meta, base_wall_ns) -> list:
    """export.phase_events as it was built before the columns: a dict per record read as a list, sorted."""
    from haiprof.commands.export import (RANK_PID_BASE, TID_GPU, TID_HOST, TID_STEPS, _meta_event, _wall_ns)
    to_wall = _wall_ns(meta)
    pid = RANK_PID_BASE + rank
    events = [_meta_event("process_name", pid, 0, f"haiprof rank {rank}"),
              _meta_event("process_sort_index", pid, 0, rank),
              _meta_event("thread_name", pid, TID_STEPS, "steps"),
              _meta_event("thread_name", pid, TID_HOST, "phases (host)")]
    slices, step_marks = [], []

    def us(t_ns):
        return (to_wall(t_ns) - base_wall_ns) / 1e3

    for name, s, e in iter_records(run_dir.read_phase_records()):
        if name == "@step":
            step_marks.append(s)
            continue
        tid, phase = (TID_GPU, name[4:]) if name.startswith("gpu:") else (TID_HOST, name)
        if phase not in PHASES or e < s:
            continue
        slices.append({"ph": "X", "name": phase, "cat": "phase", "pid": pid, "tid": tid, "ts": us(s),
                       "dur": (e - s) / 1e3})
    slices.sort(key=lambda ev: (ev["tid"], ev["ts"], -ev["dur"]))
    if any(ev["tid"] == TID_GPU for ev in slices):
        events.append(_meta_event("thread_name", pid, TID_GPU, "phases (CUDA events)"))
    events += slices
    step_marks.sort()
    first = min([ev["ts"] for ev in slices if ev["tid"] == TID_HOST] or [None]) if step_marks else None
    edges = ([first] if first is not None and first < us(step_marks[0]) else []) + [us(t) for t in step_marks]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        events.append({"ph": "X", "name": f"step {i}", "cat": "step", "pid": pid, "tid": TID_STEPS, "ts": a,
                       "dur": b - a, "args": {"step": i}})
    return events


def _same_events(path, base_wall_ns) -> list:
    from haiprof.commands.export import phase_events
    run_dir = RunDir(path)
    meta = run_dir.read_meta()
    new = phase_events(3, run_dir, meta, base_wall_ns)
    old = _rows_events(3, run_dir, meta, base_wall_ns)
    assert len(new) == len(old)
    assert new == old
    assert [type(v) for e in new for v in e.values()] == [type(v) for e in old for v in e.values()]
    return new


def test_export_slices(cpu_run, tmp_path):
    """The Chrome trace's slices, on the run's own axis and on one starting before it (a job's earliest rank)."""
    meta = json.loads((cpu_run / "meta.json").read_text())
    wall0 = int(meta["start_time"] * 1e9)
    events = _same_events(cpu_run, wall0)
    assert sum(e.get("cat") == "phase" for e in events) > 50 and any(e.get("cat") == "step" for e in events)
    _same_events(cpu_run, wall0 - 3_000_000_123)


@pytest.mark.parametrize("name", ["nanogpt", "h2d_base"])
def test_export_slices_h100(tmp_path, name):
    if not (H100 / name).is_dir():
        pytest.skip(f"no recorded H100 run at {H100 / name}")
    meta = json.loads((H100 / name / "meta.json").read_text())
    events = _same_events(H100 / name, int(meta["start_time"] * 1e9))
    assert any(e.get("tid") == 3 and e.get("cat") == "phase" for e in events)   # CUDA-event timings


def test_export_slices_with_odd_records(cpu_run, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(cpu_run, d)
    records = RunDir(d).read_phase_records()
    intervals = [i for i, r in enumerate(records) if r[0] in PHASES]
    records[intervals[2]] = [*records[intervals[2]][:3], {"timers": 1}]
    twin = list(records[intervals[5]])
    other = "optimizer" if twin[0] != "optimizer" else "forward"
    records.insert(intervals[5], [other, twin[1], twin[2], "x"])               # a tie in every sort key
    records.append(["@step", records[-1][2] + 5, records[-1][2] + 5, 0.5])     # an odd step mark
    (d / "phases.bin").write_bytes(encode_chunk(records))
    meta = json.loads((d / "meta.json").read_text())
    _same_events(d, int(meta["start_time"] * 1e9))
