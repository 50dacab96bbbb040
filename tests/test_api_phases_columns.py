"""`Run.phases` is built from the phase columns (no Python row per interval): the same table, dtypes, order and
values as the per-record build it replaced, on real runs (a CPU run's phases.bin, H100 runs' phases.jsonl with
CUDA-event timings) and on records the columns hold beside them (odd records, a run dir without a start time)."""
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

import haiprof
from haiprof.phasestore import encode_chunk
from haiprof.rundir import PHASES, RunDir, iter_records

from conftest import REPO, SCRIPTS, run_haiprof

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
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("phases") / "run"
    r = run_haiprof("run", "--quiet", "--out", out, SCRIPTS / "seeded_train.py")
    assert r.returncode == 0, r.stderr
    return out


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
