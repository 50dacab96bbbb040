"""`haiprof export RUN_DIR --format chrome`: the run as a Chrome trace (JSON Object Format), for Perfetto.

Phases become complete slices ("ph": "X") on one process per rank (host timings on one thread, CUDA-event
timings on another, the steps on a third); system samples become counter tracks ("ph": "C") of a "system"
process. `--merge-trace` adds a Kineto trace (torch.profiler's export; by default trace.json.gz in the run dir, or in
each rank's directory), shifted onto the same time axis.

Time axis: microseconds since the run started. Each run dir's CLOCK_MONOTONIC stamps are mapped to wall time
through the pair meta.json records at start (start_time, start_monotonic_ns); Kineto stamps are wall time
(`baseTimeNanoseconds` + ts), so both line up to within the clocks' agreement.
"""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np

from ..errors import OneLineParser
from ..rundir import PHASES, RunDir

# Pids above Linux's pid_max (2**22), so ours never collide with the real pids and device ids Kineto uses.
RANK_PID_BASE = 10_000_000
SYSTEM_PID = 20_000_000
TID_STEPS, TID_HOST, TID_GPU = 1, 2, 3
KINETO_NAMES = ("trace.json.gz", "trace.json")

# Cumulative counters in the system samples: exported as MiB/s rates, since a running total is unreadable.
CUMULATIVE = ("proc_read_bytes", "proc_write_bytes", "disk_read_bytes", "disk_write_bytes", "net_sent_bytes",
              "net_recv_bytes")


class ExportError(Exception):
    """A problem with the input (e.g. an unreadable Kineto trace): one line for the user."""


def _wall_ns(meta: dict):
    """Function mapping this run dir's CLOCK_MONOTONIC ns to wall-clock ns."""
    start_wall = meta.get("start_time")
    start_mono = meta.get("start_monotonic_ns")
    if not isinstance(start_wall, (int, float)) or not isinstance(start_mono, int):
        raise ExportError("meta.json lacks start_time/start_monotonic_ns: cannot place the run on a time axis")
    offset = int(start_wall * 1e9) - start_mono
    return lambda t: t + offset


RANK_DIR = re.compile(r"rank-?(\d+)")


def rank_sources(run_dir: RunDir, meta: dict) -> list[tuple[int, RunDir, dict]]:
    """(rank, run dir, meta) for every rank whose data this run holds: the rank-<N>/ sub-directories of a
    distributed run (each a run dir of its own), or else the run dir itself (rank from meta, default 0)."""
    out = []
    for sub in sorted(run_dir.path.iterdir()):
        m = RANK_DIR.fullmatch(sub.name)
        if m and sub.is_dir() and (sub / "meta.json").is_file():
            sub_dir = RunDir(sub)
            out.append((int(m.group(1)), sub_dir, sub_dir.read_meta()))
    if not out:
        out.append((int(meta.get("rank", 0) or 0), run_dir, meta))
    return sorted(out, key=lambda r: r[0])


def _meta_event(name: str, pid: int, tid: int, value) -> dict:
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {key: value}}


def phase_events(rank: int, run_dir: RunDir, meta: dict, base_wall_ns: int) -> list[dict]:
    """Slices for one rank: each recorded interval, plus one slice per step on its own track."""
    to_wall = _wall_ns(meta)
    pid = RANK_PID_BASE + rank
    events = [_meta_event("process_name", pid, 0, f"haiprof rank {rank}"),
              _meta_event("process_sort_index", pid, 0, rank),
              _meta_event("thread_name", pid, TID_STEPS, "steps"),
              _meta_event("thread_name", pid, TID_HOST, "phases (host)")]
    offset = to_wall(0) - base_wall_ns

    def us(t_ns: int) -> float:
        return (to_wall(t_ns) - base_wall_ns) / 1e3

    slices, step_marks = _slices(run_dir.read_phase_columns(), offset, pid)
    if any(ev["tid"] == TID_GPU for ev in slices):   # CPU runs: no empty CUDA-events track
        events.append(_meta_event("thread_name", pid, TID_GPU, "phases (CUDA events)"))
    events += slices
    step_marks.sort()
    first = min([ev["ts"] for ev in slices if ev["tid"] == TID_HOST] or [None]) if step_marks else None
    edges = ([first] if first is not None and first < us(step_marks[0]) else []) + [us(t) for t in step_marks]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        events.append({"ph": "X", "name": f"step {i}", "cat": "step", "pid": pid, "tid": TID_STEPS, "ts": a,
                       "dur": b - a, "args": {"step": i}})
    return events


def _slices(cols, offset: int, pid: int) -> tuple[list[dict], list[int]]:
    """(phase slices sorted by track, start and longest first, the @step marks' times) from the phase columns:
    a dict per slice (the trace's own), no list per record read. `offset`: ns to add to a CLOCK_MONOTONIC time to
    get the trace's axis."""
    def what(name):   # (tid, phase), phase None for anything not a phase interval
        tid, phase = (TID_GPU, name[4:]) if name.startswith("gpu:") else (TID_HOST, name)
        return (tid, phase) if phase in PHASES else (0, None)

    looked = [what(x) for x in cols.names] + [(0, None)]
    phase_of = np.array([p for _, p in looked], dtype=object)
    tid_of = np.array([t for t, _ in looked], dtype=np.int64)
    at = np.flatnonzero(tid_of[cols.code].astype(bool) & (cols.end >= cols.start))
    mark = np.zeros(len(looked), dtype=bool)
    mark[[i for i, x in enumerate(cols.names) if x == "@step"]] = True
    marks = cols.start[mark[cols.code]].tolist() + [r[1] for _, r in cols.odd if r[0] == "@step"]
    odd = [(2 * a, *what(r[0]), r[1], r[2]) for a, r in cols.odd if what(r[0])[1] is not None and r[2] >= r[1]]
    start, end = cols.start[at], cols.end[at]
    # the written order (an odd record before the column row it was written before) breaks ties, as a stable sort
    order = np.concatenate([2 * at + 1, np.array([o[0] for o in odd], dtype=np.int64)])
    tid = np.concatenate([tid_of[cols.code[at]], np.array([o[1] for o in odd], dtype=np.int64)])
    phase = np.concatenate([phase_of[cols.code[at]], np.array([o[2] for o in odd], dtype=object)])
    ts = np.concatenate([(start + offset) / 1e3, np.array([(o[3] + offset) / 1e3 for o in odd], dtype=float)])
    dur = np.concatenate([(end - start) / 1e3, np.array([(o[4] - o[3]) / 1e3 for o in odd], dtype=float)])
    # A parent must come before its children at the same start for viewers to nest them.
    by = np.lexsort((order, -dur, ts, tid))
    slices = [{"ph": "X", "name": n, "cat": "phase", "pid": pid, "tid": t, "ts": a, "dur": d}
              for n, t, a, d in zip(phase[by].tolist(), tid[by].tolist(), ts[by].tolist(), dur[by].tolist())]
    return slices, marks


def counter_events(samples: list[dict], meta: dict, base_wall_ns: int, pid: int = SYSTEM_PID,
                   collector: str = "system") -> list[dict]:
    """Counter tracks from one sampler's records: numeric fields (and numeric lists, one series per item) as
    they are, the system sampler's cumulative byte counters as MiB/s between consecutive samples. Fields of
    collectors other than `system` are prefixed with the collector's name."""
    to_wall = _wall_ns(meta)
    prefix = "" if collector == "system" else f"{collector}."
    events = []
    prev = None
    for rec in samples:
        if not isinstance(rec, dict) or not isinstance(rec.get("t_ns"), int):
            continue
        ts = (to_wall(rec["t_ns"]) - base_wall_ns) / 1e3
        for key, value in rec.items():
            if key in ("t_ns", "cost_ns") or (not prefix and key in CUMULATIVE):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
                    events.append({"ph": "C", "name": prefix + key, "pid": pid, "ts": ts,
                                   "args": {str(i): v for i, v in enumerate(value)}})
                continue
            events.append({"ph": "C", "name": prefix + key, "pid": pid, "ts": ts, "args": {key: value}})
        if prev is not None:
            dt = (rec["t_ns"] - prev["t_ns"]) / 1e9
            rates = {}
            for key in CUMULATIVE if not prefix else ():
                if key in rec and key in prev and dt > 0 and rec[key] >= prev[key]:
                    rates[key.replace("_bytes", "_MiB_per_s")] = (rec[key] - prev[key]) / dt / 2**20
            if rates:
                events.append({"ph": "C", "name": "io_MiB_per_s", "pid": pid, "ts": ts, "args": rates})
        prev = rec
    return events


def find_kineto(run_dir: RunDir) -> Path | None:
    for name in KINETO_NAMES:
        if (run_dir.path / name).is_file():
            return run_dir.path / name
    return None


def kineto_events(path: Path, base_wall_ns: int) -> list[dict]:
    """A torch.profiler / Kineto Chrome trace, shifted onto our axis (µs since the run started)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError, EOFError) as e:
        raise ExportError(f"{path}: not a readable Chrome trace ({type(e).__name__}: {e})") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        raise ExportError(f"{path}: no traceEvents list")
    # Kineto writes ts relative to baseTimeNanoseconds (wall clock); older exports write wall-clock µs.
    kineto_base_ns = trace.get("baseTimeNanoseconds", 0) if isinstance(trace, dict) else 0
    shift_us = (int(kineto_base_ns or 0) - base_wall_ns) / 1e3
    out = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ev = dict(ev)
        if isinstance(ev.get("ts"), (int, float)) and ev.get("ph") != "M":
            ev["ts"] = ev["ts"] + shift_us
        elif ev.get("ph") == "M":
            ev.pop("ts", None)
        out.append(ev)
    return out


def build_trace(run_dir: RunDir, merge: list[Path] | None = None) -> dict:
    """The Chrome trace of a run; `merge`: Kineto traces to add (see `kineto_traces` for the defaults)."""
    meta = run_dir.read_meta()
    sources = rank_sources(run_dir, meta)
    for _, rdir, rmeta in sources:
        try:
            _wall_ns(rmeta)  # fail early, with the reason, on a run dir without a time base
        except ExportError as e:
            raise ExportError(f"{rdir.path}: {e}") from None
    # Time zero: the earliest rank start (a job directory's own meta may predate or lack its ranks' clocks).
    base_wall_ns = min(int(rmeta["start_time"] * 1e9) for _, _, rmeta in sources)
    events: list[dict] = []
    for rank, rdir, rmeta in sources:
        events += phase_events(rank, rdir, rmeta, base_wall_ns)
        collectors = rdir.sample_collectors()
        if collectors:
            pid = SYSTEM_PID + rank
            label = "haiprof system" if len(sources) == 1 else f"haiprof system (rank {rank})"
            events += [_meta_event("process_name", pid, 0, label),
                       _meta_event("process_sort_index", pid, 0, 1_000_000 + rank)]
            for name in collectors:
                events += counter_events(rdir.read_samples(name), rmeta, base_wall_ns, pid, name)
    for path in merge or []:
        events += kineto_events(path, base_wall_ns)
    return {"traceEvents": events, "displayTimeUnit": "ms", "baseTimeNanoseconds": base_wall_ns,
            "otherData": {"haiprof_run": meta.get("target_name"), "command": meta.get("command"),
                          "merged_traces": [str(p) for p in merge or []]}}


def kineto_traces(run_dir: RunDir) -> list[Path]:
    """The Kineto windows a run holds: its own, or each rank's in a distributed run."""
    meta = run_dir.read_meta()
    found = [find_kineto(rdir) for _, rdir, _ in rank_sources(run_dir, meta)]
    own = find_kineto(run_dir)
    return [p for p in dict.fromkeys(found + [own]) if p is not None]


def write_trace(trace: dict, out: Path) -> Path:
    opener = gzip.open if out.name.endswith(".gz") else open
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with opener(tmp, "wt", encoding="utf-8") as f:
        json.dump(trace, f, separators=(",", ":"))
    os.replace(tmp, out)
    return out


def cmd_export(argv: list[str]) -> int:
    from ..errors import UserError

    p = OneLineParser(prog="haiprof export", description="Export a run for other tools. "
                                "chrome: a Chrome trace JSON (open it in ui.perfetto.dev or chrome://tracing).")
    p.add_argument("run_dir")
    p.add_argument("--format", choices=["chrome"], default="chrome", help="output format (default chrome)")
    p.add_argument("--out", metavar="FILE", help="output file (default RUN_DIR/trace.chrome.json; .gz compresses)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--merge-trace", nargs="?", const="", metavar="KINETO_JSON",
                   help="merge a torch.profiler/Kineto Chrome trace (default: trace.json.gz in RUN_DIR)")
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    run_dir = RunDir.open(ns.run_dir)
    if ns.out and Path(ns.out).exists() and not ns.overwrite:   # never a user's file (or a run's meta.json)
        raise UserError(f"--out {ns.out}: exists; choose a new file or pass --overwrite")
    merge = None
    if ns.merge_trace is not None:
        merge = [Path(ns.merge_trace)] if ns.merge_trace else kineto_traces(run_dir)
        if not merge:
            raise UserError(f"--merge-trace: no Kineto trace in {run_dir.path} ({' or '.join(KINETO_NAMES)})")
        if not merge[0].is_file():
            raise UserError(f"--merge-trace: {merge[0]}: no such file")
    try:
        trace = build_trace(run_dir, merge)
    except ExportError as e:
        raise UserError(str(e)) from None
    out = Path(ns.out) if ns.out else run_dir.path / "trace.chrome.json"
    try:
        write_trace(trace, out)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    print(out)
    return 0
