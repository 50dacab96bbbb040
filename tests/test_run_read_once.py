"""A report reads each raw file of its run once (analysis/run_model.Run): the phase records and the tracing
window's trace were each read twice per report (the trace by the launch analysis and again, whole, by the GPU
section; the phases by the summary and again by the fixes' before/after and a rank's digest). The trace is parsed
once for its two forms: its columns (launch statistics, GPU section) and its events as dicts (the FLOP count
needs each op's input shapes, which the columns leave out)."""
from __future__ import annotations

import builtins
import json
import shutil
from collections import Counter

import pytest

from conftest import GPU_RUNS

from haiprof.analysis import report
from haiprof.analysis.run_model import Run
from haiprof.rundir import RunDir

TRACES = ("trace.json.gz", "trace.json")


@pytest.fixture
def reads(monkeypatch):
    """`reads()` starts counting: the reads of the phase records (RunDir's two readers) and every open of the
    tracing window's trace (gzip.open opens the file through open() too)."""
    seen: Counter = Counter()
    real_open = builtins.open
    real_cols, real_recs = RunDir.read_phase_columns, RunDir.read_phase_records

    def note(path):
        name = str(getattr(path, "name", path)).rsplit("/", 1)[-1]
        if name in TRACES:
            seen[name] += 1

    def counting_open(file, *a, **k):
        note(file)
        return real_open(file, *a, **k)

    def counting(real):
        def read(self, *a, **k):
            seen["phases"] += 1
            return real(self, *a, **k)
        return read

    def start():
        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(RunDir, "read_phase_columns", counting(real_cols))
        monkeypatch.setattr(RunDir, "read_phase_records", counting(real_recs))
        return seen
    return start


def _copy(name, tmp_path):
    src = GPU_RUNS / "h100-2026-11-22" / name
    if not src.is_dir():
        pytest.skip(f"no recorded run {src}")
    d = tmp_path / name
    shutil.copytree(src, d)
    return d


def test_a_cuda_report_reads_its_trace_and_phases_once(tmp_path, reads):
    d = _copy("launch_base", tmp_path)
    seen = reads()
    summary = report.finish(RunDir(d), quiet=True)
    assert summary and summary["gpu"]["top_kernels"] and summary["launch"]["trace"] == "trace.json.gz"
    assert seen == {"trace.json.gz": 1, "phases": 1}, dict(seen)


def test_a_cpu_report_reads_its_phases_and_trace_once(seeded, tmp_path, reads):
    d = tmp_path / "run"
    shutil.copytree(seeded[1], d)
    seen = reads()
    summary = report.finish(RunDir(d), quiet=True)
    assert summary and summary["steps"] > 0 and summary["launch"]["trace"] == "trace.json.gz"
    assert seen == {"trace.json.gz": 1, "phases": 1}, dict(seen)


def test_the_trace_is_parsed_once_and_released(tmp_path):
    run = Run.read(RunDir(_copy("launch_base", tmp_path)))
    first = run.trace()
    assert first is run.trace() and len(first.columns)
    events = run.trace_events(run.trace_path())
    assert events and run.trace_events(run.trace_path()) is events
    run.release_trace()
    assert run.trace() is None   # released after its last reader: never parsed a second time


def test_one_parse_gives_the_reader_s_columns(tmp_path):
    """The columns made from the one JSON parse are the streaming reader's, column for column; a trace cut short
    (a run killed while writing it) still goes through the streaming reader, which reads what is whole."""
    import numpy as np

    from haiprof.analyzers.kineto_reader import read_trace

    d = _copy("launch_base", tmp_path)
    run = Run.read(RunDir(d))
    ours, theirs = run.trace(), read_trace(run.trace_path())
    assert ours.columns.categories == theirs.columns.categories
    for name, a in theirs.columns.arrays.items():
        assert np.array_equal(ours.columns.arrays[name], a, equal_nan=a.dtype.kind == "f"), name
    assert {k: v for k, v in ours.metadata.items()} == theirs.metadata
    import gzip
    raw = gzip.decompress((d / "trace.json.gz").read_bytes())
    (d / "trace.json.gz").unlink()
    (d / "trace.json").write_bytes(raw[: len(raw) * 2 // 3])   # killed mid-write
    cut = Run.read(RunDir(d)).trace()
    assert cut.truncated and 0 < len(cut.columns) < len(theirs.columns)


# -- every other reader of a run directory: the Python API, the export's step range, a job's reference rank ----
@pytest.fixture
def phase_reads(monkeypatch):
    """rank/run directory name -> how often its phase records were read (either RunDir reader)."""
    seen: Counter = Counter()
    for name in ("read_phase_columns", "read_phase_records"):
        real = getattr(RunDir, name)

        def read(self, *a, _real=real, **k):
            seen[self.path.name] += 1
            return _real(self, *a, **k)
        monkeypatch.setattr(RunDir, name, read)
    return seen


def test_the_api_reads_the_phases_once_for_every_table(seeded, tmp_path, phase_reads):
    """haiprof.load's tables and its analysis (no summary.json: recomputed) share one read of phases.bin; the
    samples and the collectors' status are the analysis' own once it has them."""
    import haiprof

    d = tmp_path / "run"
    shutil.copytree(seeded[1], d)
    (d / "summary.json").unlink()
    run = haiprof.load(d)
    assert len(run.phases) and len(run.steps) and run.summary["steps"] == len(run.steps)
    assert set(run.samples) and len(run.status)
    assert phase_reads == {"run": 1}, dict(phase_reads)
    assert "columns" not in run._cache   # let go once both readers have them
    steps = haiprof.load(d).steps        # the other order: the analysis first, then the table of intervals
    assert len(steps) == len(run.steps) and phase_reads == {"run": 2}


def test_an_export_of_a_step_range_reads_the_phases_once(seeded, tmp_path, phase_reads):
    from haiprof.commands.export import cmd_export

    out = tmp_path / "t.json"
    assert cmd_export([str(seeded[1]), "--steps", "2:4", "--out", str(out)]) == 0
    steps = {e["args"]["step"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "step"}
    assert steps == {2, 3, 4}
    assert phase_reads == {seeded[1].name: 1}, dict(phase_reads)


def test_a_job_report_reads_each_rank_s_phases_once(tmp_path, phase_reads, monkeypatch):
    """A stale reference rank is analysed once: its fresh digest and the page's charts come from that one
    analysis (it was analysed for its digest, then again, whole, for the charts)."""
    import os
    import sys
    import time

    from conftest import REPO
    from haiprof.analysis import rank_digest, ranks

    sys.path.insert(0, str(REPO))
    from benchmarks import job_scale

    monkeypatch.setattr(ranks.os, "cpu_count", lambda: 1)   # the stale ranks analysed in this process: counted
    job = job_scale.build_job(tmp_path / "job", 2)
    past = time.time() - 60
    for d in job.glob("rank-*"):   # digests older than the raw data: both ranks are analysed again
        for name in ("summary.json", rank_digest.STEPS_FILE):
            os.utime(d / name, (past, past))
    phase_reads.clear()
    data = ranks.analyze_job(RunDir(job))
    assert data.summary["distributed"]["world_size"] == 2 and len(data.steps) > 100
    assert phase_reads == {"rank-0": 1, "rank-1": 1}, dict(phase_reads)
    assert all(rank_digest.is_fresh(d) for d in job.glob("rank-*"))
