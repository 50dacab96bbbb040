"""`haiprof export` of long runs: the trace streamed a chunk at a time is the trace built in memory, and
`--steps A:B` keeps the events overlapping those steps (numbered as the report numbers them)."""
import gzip
import json
import sys

import pytest

import haiprof
from conftest import REPO, run_haiprof
from test_export import validate_chrome_trace, write_two_rank_job

SLOW, STEPS = 23, 40
LOOP = f"""\
import time, torch
torch.manual_seed(0)
torch.set_num_threads(1)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 1)
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        if self.calls == {SLOW} + 1:   # the forward of step {SLOW}: 0.25 s
            time.sleep(0.25)
        return self.lin(x)

m = Net()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for i in range({STEPS}):
    opt.zero_grad()
    m(torch.randn(16, 8)).sum().backward()
    opt.step()
    time.sleep(0.002)
"""


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-steps")
    (tmp / "loop.py").write_text(LOOP)
    out = tmp / "run"
    r = run_haiprof("run", "--quiet", "--sample-interval", "0.05", "--out", out, tmp / "loop.py")
    assert r.returncode == 0, r.stderr
    return out


def _export(run, out, *args):
    r = run_haiprof("export", run, "--out", out, *args)
    assert r.returncode == 0, r.stderr
    opener = gzip.open if str(out).endswith(".gz") else open
    with opener(out, "rt") as f:
        return json.load(f), r


def _old_build(run):
    """The trace as export built it before streaming: one list of every event, then the object."""
    from haiprof.commands.export import (SYSTEM_PID, _meta_event, counter_events, kineto_events, kineto_traces,
                                         phase_events)
    from haiprof.rundir import RunDir
    rd = RunDir(run)
    meta = rd.read_meta()
    base = int(meta["start_time"] * 1e9)
    events = phase_events(0, rd, meta, base)
    events += [_meta_event("process_name", SYSTEM_PID, 0, "haiprof system"),
               _meta_event("process_sort_index", SYSTEM_PID, 0, 1_000_000)]
    for name in rd.sample_collectors():
        events += counter_events(rd.read_samples(name), meta, base, SYSTEM_PID, name)
    merge = kineto_traces(rd)
    for path in merge:
        events += kineto_events(path, base)
    return {"traceEvents": events, "displayTimeUnit": "ms", "baseTimeNanoseconds": base,
            "otherData": {"haiprof_run": meta.get("target_name"), "command": meta.get("command"),
                          "merged_traces": [str(p) for p in merge]}}


def test_streamed_file_is_the_trace_built_in_memory(slow_run, tmp_path):
    from haiprof.commands.export import Trace, build_trace, kineto_traces, write_trace
    from haiprof.rundir import RunDir

    streamed, r = _export(slow_run, tmp_path / "t.json.gz", "--merge-trace")
    merge = kineto_traces(RunDir(slow_run))
    assert merge, "the run's tracing window wrote no trace.json.gz"
    whole = build_trace(RunDir(slow_run), merge)
    assert streamed == whole == _old_build(slow_run)
    ours = [e for e in streamed["traceEvents"] if isinstance(e["pid"], int) and e["pid"] >= 10_000_000]
    validate_chrome_trace({"traceEvents": ours})   # (Kineto's own slices may overlap partially)
    # chunk boundaries anywhere (7 events a chunk): the same file
    n = write_trace(Trace(RunDir(slow_run), merge, chunk=7), tmp_path / "small-chunks.json")
    assert json.loads((tmp_path / "small-chunks.json").read_text()) == whole and n == len(whole["traceEvents"])
    # what was written, on one line of stderr; stdout stays the path
    assert r.stdout.strip() == str(tmp_path / "t.json.gz")
    line = r.stderr.strip()
    assert "\n" not in line and f"{len(whole['traceEvents']):,} events" in line, line
    assert f"steps 0-{STEPS - 1} ({STEPS} steps)" in line and "KiB" in line, line
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_steps_range_keeps_the_overlapping_events(slow_run, tmp_path):
    run = haiprof.load(slow_run)
    steps = run.steps
    assert int(steps["duration_ms"].idxmax()) == SLOW and run.summary["slowest_steps"][0]["step"] == SLOW
    a, b = SLOW - 2, SLOW + 2
    trace, r = _export(slow_run, tmp_path / "t.json", "--steps", f"{a}:{b}")
    events = validate_chrome_trace(trace)
    t0, t1 = steps["start_s"][a] * 1e6, steps["end_s"][b] * 1e6   # µs since the run started, as the trace
    eps = 1e-3
    step_slices = [e for e in events if e.get("cat") == "step"]
    assert [e["args"]["step"] for e in step_slices] == list(range(a, b + 1))
    assert [e["ts"] for e in step_slices] == pytest.approx(list(steps["start_s"][a:b + 1] * 1e6), abs=eps)
    phases = [e for e in events if e.get("cat") == "phase"]
    assert phases and all(e["ts"] < t1 - eps and e["ts"] + e["dur"] > t0 + eps for e in phases)
    # exactly the intervals of haiprof.load's phase table that overlap the stretch
    table = run.phases
    inside = table[(table["start_s"] * 1e6 < t1 - eps) & (table["end_s"] * 1e6 > t0 + eps)]
    assert len(phases) == len(inside) < len(table)
    # the slow step's forward is there, and is the longest slice
    slow = max(phases, key=lambda e: e["dur"])
    assert slow["name"] == "forward" and slow["dur"] >= 250e3
    assert steps["start_s"][SLOW] * 1e6 - eps <= slow["ts"] <= steps["end_s"][SLOW] * 1e6
    # counters: the samples inside the stretch and the one before it (its values hold at the start)
    counters = [e for e in events if e["ph"] == "C" and e["name"] == "rss_bytes"]
    assert counters and all(e["ts"] <= t1 for e in counters)
    assert sum(e["ts"] < t0 for e in counters) == 1
    assert f"steps {a}-{b} (5 steps)" in r.stderr

    one, r = _export(slow_run, tmp_path / "one.json", "--steps", str(SLOW))
    assert [e["name"] for e in one["traceEvents"] if e.get("cat") == "step"] == [f"step {SLOW}"]
    assert max(e["dur"] for e in one["traceEvents"] if e.get("cat") == "phase") == slow["dur"]
    assert f"step {SLOW}," in r.stderr


def test_steps_range_filters_merged_kineto_events(slow_run, tmp_path):
    steps = haiprof.load(slow_run).steps
    traced = steps.index[steps["traced"]].tolist()
    assert traced, "no traced steps"
    outside = STEPS - 1 if traced[-1] < STEPS - 3 else 0
    ops = {}
    for name, rng in (("in", f"{traced[0]}:{traced[-1]}"), ("out", str(outside))):
        trace, _ = _export(slow_run, tmp_path / f"{name}.json", "--merge-trace", "--steps", rng)
        ops[name] = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") not in ("phase", "step")]
        first, last = (traced[0], traced[-1]) if name == "in" else (outside, outside)
        t0, t1 = steps["start_s"][first] * 1e6, steps["end_s"][last] * 1e6
        assert all(e["ts"] < t1 and e["ts"] + e["dur"] >= t0 for e in ops[name])
        assert any(e["ph"] == "M" and e["pid"] < 10_000_000 for e in trace["traceEvents"])   # Kineto's metadata
    assert ops["in"] and not ops["out"]


@pytest.mark.parametrize("arg, says", [
    ("9:3", "comes after the last"), ("a:b", "expected A:B"), ("3:", "expected A:B"), ("1.5", "expected A:B"),
    (f"5:{STEPS}", f"beyond the run, which has {STEPS} steps"), (str(STEPS + 10), "beyond the run"),
])
def test_bad_step_ranges_are_one_line(slow_run, tmp_path, arg, says):
    r = run_haiprof("export", slow_run, "--out", tmp_path / "t.json", "--steps", arg)
    assert r.returncode == 2, r
    assert r.stderr.startswith("haiprof: error: --steps") and says in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "t.json").exists() and not list(tmp_path.iterdir())


def test_hint_for_huge_runs(slow_run, tmp_path, monkeypatch, capsys):
    """Past HUGE_STEPS steps (200,000; lowered here to the run's length) the export says how to take a stretch,
    and still writes the whole run."""
    from haiprof.commands import export
    monkeypatch.setattr(export, "HUGE_STEPS", STEPS)
    assert export.cmd_export([str(slow_run), "--out", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    assert "Perfetto" in err and "--steps A:B" in err and (tmp_path / "t.json").is_file()
    assert export.cmd_export([str(slow_run), "--out", str(tmp_path / "s.json"), "--steps", "1:2"]) == 0
    assert "Perfetto" not in capsys.readouterr().err
    monkeypatch.setattr(export, "HUGE_STEPS", STEPS + 1)
    assert export.cmd_export([str(slow_run), "--out", str(tmp_path / "u.json")]) == 0
    assert "Perfetto" not in capsys.readouterr().err


def test_synthetic_long_run_streams_the_same_events(tmp_path):
    """A 20,000-step run directory as the phase writer writes it (benchmarks/report_size.write_run): streamed
    file == the in-memory trace, and a stretch holds the slow step."""
    sys.path.insert(0, str(REPO))
    from benchmarks.report_size import write_run
    from haiprof.commands.export import build_trace
    from haiprof.rundir import RunDir
    write_run(tmp_path / "run", 20_000, slow_at=12_345)
    trace, _ = _export(tmp_path / "run", tmp_path / "t.json")
    assert trace == build_trace(RunDir(tmp_path / "run"))
    part, r = _export(tmp_path / "run", tmp_path / "p.json", "--steps", "12340:12350")
    slow = max((e for e in part["traceEvents"] if e.get("cat") == "phase"), key=lambda e: e["dur"])
    assert slow["name"] == "forward" and slow["dur"] >= 300e3
    assert [e["args"]["step"] for e in part["traceEvents"] if e.get("cat") == "step"] == list(range(12340, 12351))


def test_steps_range_on_a_job_of_ranks_with_different_lengths(tmp_path):
    """A distributed run's rank-<N>/ dirs: each rank's own steps A..B; a rank that has fewer keeps what it has;
    past the longest rank is an error."""
    job = tmp_path / "job"
    write_two_rank_job(job)
    trace, r = _export(job, tmp_path / "t.json", "--steps", "2:3")
    steps = {(e["pid"], e["args"]["step"]) for e in trace["traceEvents"] if e.get("cat") == "step"}
    assert steps == {(10_000_000, 2), (10_000_001, 2), (10_000_001, 3)}
    assert "rank 0: step 2, rank 1: steps 2-3 (2 steps)" in r.stderr, r.stderr
    r = run_haiprof("export", job, "--out", tmp_path / "u.json", "--steps", "4")
    assert r.returncode == 2 and "beyond the run, which has 4 steps" in r.stderr
