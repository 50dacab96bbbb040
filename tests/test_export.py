"""`haiprof export --format chrome`: a structurally valid Chrome trace (what Perfetto's JSON importer reads)."""
import contextlib
import gzip
import json
import shutil
import time
from collections import defaultdict

import pytest

import haiprof
from conftest import load_summary, run_haiprof, phase_records
from haiprof.commands.export import RANK_PID_BASE, SYSTEM_PID

PHASE_NAMES = {"dataloader", "h2d", "forward", "backward", "optimizer", "allreduce"}


def validate_chrome_trace(trace: dict) -> list[dict]:
    """The Trace Event Format's JSON Object Format: the fields each phase type needs, and slices on one thread
    that nest (a partial overlap is drawn wrongly by every viewer)."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit") in (None, "ms", "ns")
    by_thread = defaultdict(list)
    for ev in trace["traceEvents"]:
        assert ev["ph"] in {"X", "C", "M", "B", "E", "i", "I", "s", "t", "f", "b", "e", "n"}, ev
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["pid"], (int, str)), ev  # Kineto names some processes ("Spans")
        if ev["ph"] == "M":
            assert ev["name"] in {"process_name", "thread_name", "process_sort_index", "thread_sort_index",
                                  "process_labels"}, ev
            assert isinstance(ev["args"], dict)
            continue
        assert isinstance(ev["ts"], (int, float)), ev
        if ev["ph"] == "X":
            assert isinstance(ev["tid"], (int, str)) and isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
            by_thread[(ev["pid"], ev["tid"])].append(ev)
        if ev["ph"] == "C":
            assert ev["args"] and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                      for v in ev["args"].values()), ev
    eps = 1e-3  # µs: float rounding of ns -> µs
    for key, slices in by_thread.items():
        stack = []
        for ev in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= ev["ts"] + eps:
                stack.pop()
            end = ev["ts"] + ev["dur"]
            assert not stack or end <= stack[-1] + eps, f"partial overlap on {key}: {ev}"
            stack.append(end)
    return trace["traceEvents"]


@pytest.fixture(scope="module")
def seeded_run(seeded_sampled):
    return seeded_sampled   # seeded_train.py under `haiprof run --quiet --sample-interval 0.1` (conftest), only read


def test_export_chrome_structure(seeded_run, tmp_path):
    r = run_haiprof("export", seeded_run, "--format", "chrome", "--out", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "t.json")
    events = validate_chrome_trace(json.loads((tmp_path / "t.json").read_text()))
    run = haiprof.load(seeded_run)
    slices = [e for e in events if e["ph"] == "X" and e.get("cat") == "phase"]
    assert len(slices) == len(run.phases)
    assert {e["name"] for e in slices} == set(run.phases["phase"]) <= PHASE_NAMES
    assert {e["pid"] for e in slices} == {RANK_PID_BASE}
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == load_summary(seeded_run)["steps"] == 16
    # Same time axis as haiprof.load (µs vs s since the run started).
    assert sorted(e["ts"] / 1e6 for e in steps) == pytest.approx(list(run.steps["start_s"]), abs=1e-6)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"cpu_main_pct", "rss_bytes", "cpu_cores_pct"} <= counters
    assert all(e["pid"] == SYSTEM_PID for e in events if e["ph"] == "C")
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"haiprof rank 0", "haiprof system"}
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "phases (CUDA events)" not in threads   # a CPU run: no empty CUDA-events track (issue 13)


def test_export_cuda_events_track_when_there_are_gpu_records(seeded_run, tmp_path):
    from haiprof.commands.export import TID_GPU, phase_events
    from haiprof.rundir import RunDir
    run = tmp_path / "run"
    shutil.copytree(seeded_run, run)
    first = next(r for r in phase_records(run) if r[0] == "forward")
    with open(run / "phases.jsonl", "a") as f:   # an older run's file, read beside phases.bin
        f.write(json.dumps(["gpu:forward", first[1], first[2]]) + "\n")
    rd = RunDir(run)
    events = phase_events(0, rd, rd.read_meta(), 0)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "phases (CUDA events)" in names
    assert any(e["ph"] == "X" and e["tid"] == TID_GPU and e["name"] == "forward" for e in events)


def test_export_default_path_and_gzip(seeded_run, tmp_path):
    run = tmp_path / "run"   # the default path is inside the run directory: a copy of the shared run
    shutil.copytree(seeded_run, run)
    r = run_haiprof("export", run)
    assert r.returncode == 0, r.stderr
    validate_chrome_trace(json.loads((run / "trace.chrome.json").read_text()))
    r = run_haiprof("export", seeded_run, "--out", tmp_path / "t.json.gz")
    assert r.returncode == 0, r.stderr
    with gzip.open(tmp_path / "t.json.gz", "rt") as f:
        validate_chrome_trace(json.load(f))


def test_merge_kineto_window_lines_up(tmp_path):
    """A torch.profiler window recorded during the run lands inside the run's steps on the merged axis."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run_dir = tmp_path / "run"
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        model(torch.randn(32, 64)).mean().backward()
        opt.step()

    with haiprof.profile(out=run_dir, sample_interval_s=0.1):
        for _ in range(4):
            step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                step()
        for _ in range(2):
            step()
    raw = tmp_path / "kineto.json"
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(run_dir / "trace.json.gz", "wb") as dst:
        dst.write(src.read())

    r = run_haiprof("export", run_dir, "--merge-trace", "--out", tmp_path / "merged.json")
    assert r.returncode == 0, r.stderr
    events = validate_chrome_trace(json.loads((tmp_path / "merged.json").read_text()))
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "step")
    assert len(steps) == 9
    ops = [e for e in events if e["ph"] == "X" and e["name"].startswith("aten::")]
    assert ops, "no Kineto ops merged"
    window = (min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops))
    # The profiled window is steps 4..6; clocks agree to well under a step, allow 2 ms of slack.
    assert steps[4][0] - 2000 <= window[0] and window[1] <= steps[6][1] + 2000, (window, steps[3:8])


def test_export_bad_input(tmp_path, seeded_run):
    r = run_haiprof("export", tmp_path / "missing")
    assert r.returncode == 2 and r.stderr.startswith("haiprof: error:") and "Traceback" not in r.stderr
    no_trace = tmp_path / "no-trace"
    shutil.copytree(seeded_run, no_trace)
    for f in no_trace.glob("trace.json*"):   # the tracing window's trace, written by default
        f.unlink()
    r = run_haiprof("export", no_trace, "--merge-trace")
    assert r.returncode == 2 and "no Kineto trace" in r.stderr
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    r = run_haiprof("export", seeded_run, "--merge-trace", bad, "--out", tmp_path / "o.json")
    assert r.returncode == 2 and "not a readable Chrome trace" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o.json").exists()


def write_two_rank_job(job, window=None):
    """A distributed run's directory as `haiprof run` lays it out: rank-0/ with 3 steps, rank-1/ with 4, written by
    the real recorder; `window` (rank, step) records a Kineto trace of that step into the rank's directory."""
    import torch

    for rank in (0, 1):
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with haiprof.profile(out=job / f"rank-{rank}", sample_interval_s=0.1):
            for i in range(3 + rank):
                traced = (rank, i) == window
                ctx = torch.profiler.profile() if traced else contextlib.nullcontext()
                with ctx:
                    model(torch.randn(4, 8)).sum().backward()
                    opt.step()
                if traced:
                    ctx.export_chrome_trace(str(job / f"rank-{rank}" / "trace.json"))
            # the layout's "haiprof system" rows need a sample: a loaded machine may start the sampler after 3 steps
            system = job / f"rank-{rank}" / "samples" / "system.jsonl"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (system.is_file() and system.stat().st_size):
                time.sleep(0.05)
        meta = json.loads((job / f"rank-{rank}" / "meta.json").read_text())
        meta.update(rank=rank, world_size=2)
        (job / f"rank-{rank}" / "meta.json").write_text(json.dumps(meta))
    (job / "meta.json").write_text(json.dumps({"distributed": True, "target_name": "job"}))


def test_export_distributed_layout_one_process_per_rank(tmp_path):
    """A distributed run's directory holds rank-<N>/ run dirs: each rank gets its own slices and counters."""
    job = tmp_path / "job"
    write_two_rank_job(job, window=(1, 2))

    r = run_haiprof("export", job, "--merge-trace", "--out", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    events = validate_chrome_trace(trace)
    # Rank 1's Kineto window (its step 2) is found in its own directory and lands inside that step.
    assert trace["otherData"]["merged_traces"] == [str(job / "rank-1" / "trace.json")]
    ops = [e for e in events if e["ph"] == "X" and e["name"].startswith("aten::")]
    rank1_steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                         if e.get("cat") == "step" and e["pid"] == RANK_PID_BASE + 1)
    assert ops and rank1_steps[2][0] - 2000 <= min(e["ts"] for e in ops) <= rank1_steps[2][1] + 2000
    steps = defaultdict(int)
    for e in events:
        if e.get("cat") == "step":
            steps[e["pid"]] += 1
    assert steps == {RANK_PID_BASE: 3, RANK_PID_BASE + 1: 4}
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"
             and e["pid"] >= RANK_PID_BASE}
    assert names == {"haiprof rank 0", "haiprof rank 1", "haiprof system (rank 0)", "haiprof system (rank 1)"}
    # Rank 1 ran after rank 0: on the shared axis its steps come later.
    first = {pid: min(e["ts"] for e in events if e.get("cat") == "step" and e["pid"] == pid) for pid in steps}
    assert 0 <= first[RANK_PID_BASE] < first[RANK_PID_BASE + 1]
