"""The io split reads the DataLoader waits as arrays straight from the phase columns: the same numbers as the
per-record loop it replaced, on real recorded runs (a CPU run's phases.bin, an H100 run's phases.jsonl) and on
records the columns cannot hold (odd records, integers past int64)."""
import os
from pathlib import Path

import pytest

from haiprof.analysis import hardware as hw
from haiprof.analysis.summary import BULK_RECORDS, PER_STEP_EXTRAS, analyze
from haiprof.analyzers import input_split
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T
from haiprof.phasestore import PhaseColumns
from haiprof.rundir import RunDir

from conftest import EXAMPLES, REPO, run_haiprof

GPU_RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs"))
IO_BASE = GPU_RUNS / "h100-2026-11-22" / "io_base"


def _loop_busy(records, start_ns=None) -> dict:
    """The split's sums as they were computed before the arrays: a loop over the records as lists."""
    wall = cpu = runq = n = 0
    for r in records:
        if isinstance(r, list) and len(r) >= 4 and r[0] == "dataloader":
            if start_ns is not None and r[1] < start_ns:
                continue
            wall += int(r[2]) - int(r[1])
            cpu += int(r[3])
            runq += int(r[4]) if len(r) >= 5 else 0
            n += 1
    usable = wall - runq
    return {"waits": n, "wall_s": wall / 1e9, "cpu_s": cpu / 1e9, "runqueue_wait_s": runq / 1e9,
            "cpu_share": min(1.0, cpu / usable) if usable > 0 else None}


def _arrays(cols: PhaseColumns) -> input_split.Loader:
    """What the analysis hands the split: the dataloader rows with extras as columns, the other records as lists
    (summary.py's selection)."""
    records = cols.records((~cols.rows(BULK_RECORDS) | (cols.nx > 0)) & ~cols.rows(PER_STEP_EXTRAS))
    return hw.loader_evidence(cols.take(cols.rows({"dataloader"}) & (cols.nx > 0)), records)


def _cuts(records) -> list:
    """No cut, every wait's own start (the cut is inclusive), one past the last."""
    starts = sorted(r[1] for r in records if r[0] == "dataloader" and len(r) >= 4)
    return [None, *starts[:: max(1, len(starts) // 7)], starts[-1], starts[-1] + 1]


def _same_as_the_loop(run: RunDir) -> dict:
    """The arrays' split equals the loop's at every cut, the declared workers too; and the report's io finding
    holds the loop's numbers for the steady steps."""
    records = run.read_phase_records()
    loader = _arrays(run.read_phase_columns())
    assert len(loader.wall) == sum(1 for r in records if r[0] == "dataloader" and len(r) >= 4) > 10
    for cut in _cuts(records):
        assert input_split.loader_thread_busy(loader, cut) == _loop_busy(records, cut), cut
    assert loader.declared == input_split.declared_workers(records)
    data = analyze(run)
    io = [f for f in data.summary["findings"] if f["kind"] == "io"]
    assert io, data.summary["headline"]
    steady = step_analysis.steady_steps(data.steps, T.WARMUP_STEPS)
    thread = io[0]["evidence"]["input_split"]["loader_thread"]
    assert thread == _loop_busy(records, int(steady.start_ns[0]))
    return thread


@pytest.mark.slow
def test_a_cpu_runs_columns_give_the_loops_numbers(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, EXAMPLES / "input_bound.py",
                    "--batches", "40", "--batch-size", "8", "--latency-ms", "2")
    assert r.returncode == 0, r.stderr
    assert (out / "phases.bin").is_file() and not (out / "phases.jsonl").exists()
    thread = _same_as_the_loop(RunDir(out))
    assert thread["waits"] >= 30 and thread["runqueue_wait_s"] >= 0


@pytest.mark.skipif(not IO_BASE.is_dir(), reason=f"no recorded H100 run at {IO_BASE}")
def test_an_h100_runs_jsonl_gives_the_loops_numbers(tmp_path):
    """An older run directory (phases.jsonl, read as lists and turned into columns)."""
    import shutil
    shutil.copytree(IO_BASE, tmp_path / "io_base")
    thread = _same_as_the_loop(RunDir(tmp_path / "io_base"))
    assert thread["cpu_s"] > 0


@pytest.mark.skipif(not IO_BASE.is_dir(), reason=f"no recorded H100 run at {IO_BASE}")
def test_records_the_columns_cannot_hold_are_counted_exactly():
    """Waits whose CPU is a float or an integer past int64 travel as odd records beside the columns: the split
    counts them where the loop did, with exact integer sums."""
    records = RunDir(IO_BASE).read_phase_records()
    waits = [i for i, r in enumerate(records) if r[0] == "dataloader" and len(r) >= 4]
    odd = [list(r) for r in records]
    odd[waits[3]][3] = float(odd[waits[3]][3])          # not an int: an odd record
    odd[waits[7]][3] = 2 ** 70                          # past int64: an odd record, object sums
    odd[waits[9]] = odd[waits[9]][:4]                   # no runqueue field: a column row with one extra
    cols = PhaseColumns.from_records(odd)
    assert len(cols.odd) == 2
    loader = _arrays(cols)
    for cut in _cuts(odd):
        assert input_split.loader_thread_busy(loader, cut) == _loop_busy(odd, cut), cut
    assert input_split.loader_thread_busy(loader)["cpu_s"] > 2 ** 70 / 1e9 * 0.99


def test_loader_waits_keep_rows_without_extras_out():
    """Rows without the thread's CPU are no evidence (the loop needed four fields); the others keep their own
    extras, one or two each."""
    loader = input_split.loader_waits([0, 10, 20], [5, 18, 29], [2, 0, 1], [3, 1, 7])
    assert loader.start.tolist() == [0, 20] and loader.wall.tolist() == [5, 9]
    assert loader.cpu.tolist() == [3, 7] and loader.runq.tolist() == [1, 0]
    assert loader.declared is None
