"""A run directory as a Chrome trace (JSON Object Format), for Perfetto: what `haiprof export --format chrome`
writes.

Phases become complete slices ("ph": "X") on one process per rank (host timings on one thread, CUDA-event
timings on another, the steps on a third); system samples become counter tracks ("ph": "C") of a "system"
process. `--merge-trace` adds a Kineto trace (torch.profiler's export; by default trace.json.gz in the run dir, or in
each rank's directory), shifted onto the same time axis.

Time axis: microseconds since the run started. Each run dir's CLOCK_MONOTONIC stamps are mapped to wall time
through the pair meta.json records at start (start_time, start_monotonic_ns); Kineto stamps are wall time
(`baseTimeNanoseconds` + ts), so both line up to within the clocks' agreement.

Memory: the events are made and written a chunk at a time (`Trace.chunks`, `write_trace`); what a long run
keeps whole is numpy columns (the phase records, the slices' sort order), tens of bytes a record.
"""
from __future__ import annotations

import bisect
import functools
import gzip
import json
import os
import re
from pathlib import Path
from typing import Iterator

import numpy as np

from ..rundir import PHASES, RunDir
from ..rundir.vocabulary import KINETO_TRACES

# Pids above Linux's pid_max (2**22), so ours never collide with the real pids and device ids Kineto uses.
RANK_PID_BASE = 10_000_000
SYSTEM_PID = 20_000_000
TID_STEPS, TID_HOST, TID_GPU = 1, 2, 3
KINETO_NAMES = KINETO_TRACES
CHUNK = 10_000   # events made and written at a time: a few MiB of dicts, whatever the length of the run
BUCKET_CHUNKS = 10   # phase slices sorted at a time, in chunks: a few MiB of arrays (one pass over the columns each)

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


def phase_events(rank: int, run_dir: RunDir, meta: dict, base_wall_ns: int, window=None) -> list[dict]:
    """Slices for one rank: each recorded interval, plus one slice per step on its own track (phase_chunks as
    one list)."""
    return [ev for chunk in phase_chunks(rank, run_dir, meta, base_wall_ns, window) for ev in chunk]


def _overlaps(start: np.ndarray, end: np.ndarray, window) -> np.ndarray:
    """Intervals [start, end] with a part inside window [t0, t1) (one of no length: its point inside)."""
    t0, t1 = window
    return (start < t1) & (np.maximum(end, start + 1) > t0)


def phase_chunks(rank: int, run_dir: RunDir, meta: dict, base_wall_ns: int, window=None,
                 chunk: int = CHUNK, cols=None) -> Iterator[list[dict]]:
    """phase_events a chunk of at most `chunk` slices at a time (the track metadata first): a dict per slice
    only for the slices of the chunk being written. `window`: (t0, t1) on this run dir's CLOCK_MONOTONIC (ns):
    only the slices overlapping it (steps numbered as in the whole run). `cols`: the run dir's phase records
    as the caller already read them (Trace.columns), else read here."""
    pid = RANK_PID_BASE + rank
    offset = _wall_ns(meta)(0) - base_wall_ns   # ns to add to a CLOCK_MONOTONIC time to get the trace's axis
    cols = cols if cols is not None else run_dir.read_phase_columns()
    sl = _Slices(cols, offset, window)
    del cols
    head = [_meta_event("process_name", pid, 0, f"haiprof rank {rank}"),
            _meta_event("process_sort_index", pid, 0, rank),
            _meta_event("thread_name", pid, TID_STEPS, "steps"),
            _meta_event("thread_name", pid, TID_HOST, "phases (host)")]
    if sl.has_gpu:   # CPU runs: no empty CUDA-events track
        head.append(_meta_event("thread_name", pid, TID_GPU, "phases (CUDA events)"))
    yield head
    yield from sl.chunks(pid, chunk)
    marks, first = sl.marks, sl.first_host
    del sl   # the columns
    if not len(marks):
        return
    # the steps: between consecutive marks, the first from the first host slice (of the whole run) before them
    lead = first is not None and (first + offset) / 1e3 < (int(marks[0]) + offset) / 1e3
    edges_ns = np.concatenate([[first], marks]) if lead else marks
    idx = np.arange(len(edges_ns) - 1)
    if window is not None:
        idx = idx[_overlaps(edges_ns[:-1], edges_ns[1:], window)]
    edges = (edges_ns + offset) / 1e3
    for k in range(0, len(idx), chunk):
        i = idx[k:k + chunk]
        yield [{"ph": "X", "name": f"step {n}", "cat": "step", "pid": pid, "tid": TID_STEPS, "ts": a, "dur": d,
                "args": {"step": n}}
               for n, a, d in zip(i.tolist(), edges[i].tolist(), (edges[i + 1] - edges[i]).tolist())]


class _Slices:
    """The phase slices of a run dir's columns in the trace's order: by track, start and longest first (a
    parent before its children at the same start, for viewers to nest them), then written order. Sorted and made
    a time bucket of about BUCKET_CHUNKS x `chunk` slices at a time (`chunks`): beside the columns, memory holds
    one bucket's arrays and one chunk's dicts, however long the run. `offset`: ns to add to a CLOCK_MONOTONIC
    time to get the trace's axis; `window`: (t0, t1) ns, only the slices overlapping it. Also the @step marks'
    times (`marks`, sorted), the first host slice's start (`first_host`) and whether any slice is a CUDA-event
    one (`has_gpu`)."""

    def __init__(self, cols, offset: int, window=None):
        def what(name):   # (tid, phase), phase None for anything not a phase interval
            tid, phase = (TID_GPU, name[4:]) if name.startswith("gpu:") else (TID_HOST, name)
            return (tid, phase) if phase in PHASES else (0, None)

        self.cols, self.offset, self.phases = cols, offset, list(PHASES)
        looked = [what(x) for x in cols.names] + [(0, None)]
        self.phase_of = np.array([self.phases.index(p) if p else -1 for _, p in looked], dtype=np.int8)
        self.tid_of = np.array([t for t, _ in looked], dtype=np.int8)
        mark = np.zeros(len(looked), dtype=bool)
        mark[[i for i, x in enumerate(cols.names) if x == "@step"]] = True
        self.marks = np.sort(np.concatenate([cols.start[mark[cols.code]],
                                             np.array([r[1] for _, r in cols.odd if r[0] == "@step"], np.int64)]))
        # records the columns do not hold (few): (written order, tid, phase, start, end); an odd record before the
        # column row it was written before (2a < 2a + 1)
        self.odd = [(2 * at, t, self.phases.index(p), r[1], r[2]) for at, r in cols.odd
                    for t, p in [what(r[0])] if p is not None and r[2] >= r[1]]
        self.row_tid = self.tid_of[cols.code]
        self.row_tid[cols.end < cols.start] = 0
        host = [o[3] for o in self.odd if o[1] == TID_HOST]
        rows = self.row_tid == TID_HOST
        big = np.iinfo(np.int64).max
        firsts = ([int(np.min(cols.start, where=rows, initial=big))] if rows.any() else []) + host
        self.first_host = min(firsts) if firsts else None   # where the first step begins
        self.has_gpu = bool((self.row_tid == TID_GPU).any()) or any(o[1] == TID_GPU for o in self.odd)
        if window is not None:
            self.row_tid[~_overlaps(cols.start, cols.end, window)] = 0
            self.odd = [o for o in self.odd if _overlaps(np.array([o[3]]), np.array([o[4]]), window)[0]]

    def _buckets(self, rows: np.ndarray, odd: list, chunk: int) -> list:
        """Start times cutting this track's slices into buckets of about `chunk` (rows with one start share a
        bucket, so bucket by bucket is the sorted order), from every k-th row."""
        n = int(rows.sum()) + len(odd)
        if n <= chunk:
            return []
        step = max(1, len(rows) * chunk // n // 4)   # ~4 sampled rows a bucket
        sample = self.cols.start[::step][rows[::step]]
        cuts = np.unique(sample[::4]) if len(sample) > 4 else sample
        return cuts[1:].tolist()

    def chunks(self, pid: int, chunk: int) -> Iterator[list[dict]]:
        cols, names, offset = self.cols, self.phases, self.offset
        for tid in (TID_HOST, TID_GPU):
            rows = self.row_tid == tid
            odd = [o for o in self.odd if o[1] == tid]
            cuts = [None] + self._buckets(rows, odd, BUCKET_CHUNKS * chunk) + [None]
            for lo, hi in zip(cuts, cuts[1:]):
                sel = rows.copy() if lo is None else rows & (cols.start >= lo)
                if hi is not None:
                    sel &= cols.start < hi
                at = np.flatnonzero(sel)
                del sel
                o = [x for x in odd if (lo is None or x[3] >= lo) and (hi is None or x[3] < hi)]
                order = np.concatenate([2 * at + 1, np.array([x[0] for x in o], dtype=np.int64)])
                phase = np.concatenate([self.phase_of[cols.code[at]], np.array([x[2] for x in o], dtype=np.int8)])
                start = np.concatenate([cols.start[at], np.array([x[3] for x in o], dtype=np.int64)])
                end = np.concatenate([cols.end[at], np.array([x[4] for x in o], dtype=np.int64)])
                ts, dur = (start + offset) / 1e3, (end - start) / 1e3
                by = np.lexsort((order, -dur, ts))
                for k in range(0, len(by), chunk):
                    i = by[k:k + chunk]
                    yield [{"ph": "X", "name": names[n], "cat": "phase", "pid": pid, "tid": tid, "ts": a, "dur": d}
                           for n, a, d in zip(phase[i].tolist(), ts[i].tolist(), dur[i].tolist())]


def counter_events(samples: list[dict], meta: dict, base_wall_ns: int, pid: int = SYSTEM_PID,
                   collector: str = "system", window=None) -> list[dict]:
    """Counter tracks from one sampler's records: numeric fields (and numeric lists, one series per item) as
    they are, the system sampler's cumulative byte counters as MiB/s between consecutive samples. Fields of
    collectors other than `system` are prefixed with the collector's name. `window`: (t0, t1) on the run dir's
    CLOCK_MONOTONIC (ns): the samples inside it, and the last one before it (its values hold at t0)."""
    to_wall = _wall_ns(meta)
    prefix = "" if collector == "system" else f"{collector}."
    recs = [r for r in samples if isinstance(r, dict) and isinstance(r.get("t_ns"), int)]
    prev = None
    if window is not None:
        times = [r["t_ns"] for r in recs]
        lo, hi = max(0, bisect.bisect_left(times, window[0]) - 1), bisect.bisect_left(times, window[1])
        prev = recs[lo - 1] if lo > 0 else None   # a rate needs the sample before
        recs = recs[lo:hi]
    events = []
    for rec in recs:
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


def kineto_events(path: Path, base_wall_ns: int, window_us=None) -> list[dict]:
    """A torch.profiler / Kineto Chrome trace, shifted onto our axis (µs since the run started). `window_us`:
    (a, b) on that axis: only the events overlapping it (and the metadata)."""
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
            if window_us is not None:
                dur = ev.get("dur") if isinstance(ev.get("dur"), (int, float)) else 0
                if not (ev["ts"] < window_us[1] and (ev["ts"] + dur > window_us[0] or ev["ts"] >= window_us[0])):
                    continue
        elif ev.get("ph") == "M":
            ev.pop("ts", None)
        out.append(ev)
    return out


class Trace:
    """The Chrome trace of a run, its events a chunk at a time (`chunks`), then the object's other keys
    (`tail`): what `write_trace` streams into the file and `build_trace` collects. `merge`: Kineto traces to add
    (see `kineto_traces` for the defaults); `windows`: {rank: (t0, t1)} on that rank's CLOCK_MONOTONIC (ns), only
    the events overlapping it (None: the whole run). After `chunks`, `steps` holds per rank the step slices
    written: (count, first index, last index)."""

    def __init__(self, run_dir: RunDir, merge: list[Path] | None = None, windows: dict | None = None,
                 chunk: int = CHUNK):
        self.meta = run_dir.read_meta()
        self.sources = rank_sources(run_dir, self.meta)
        for _, rdir, rmeta in self.sources:
            try:
                _wall_ns(rmeta)  # fail early, with the reason, on a run dir without a time base
            except ExportError as e:
                raise ExportError(f"{rdir.path}: {e}") from None
        # Time zero: the earliest rank start (a job directory's own meta may predate or lack its ranks' clocks).
        self.base_wall_ns = min(int(rmeta["start_time"] * 1e9) for _, _, rmeta in self.sources)
        self.merge, self.windows, self.chunk = list(merge or []), windows, chunk
        self.steps: dict = {}
        self._columns: dict = {}   # rank -> its phase records, read once (a step range reads them first)

    def columns(self, rank: int):
        """A rank's phase records as columns (RunDir.read_phase_columns), read once: for the step range and the
        slices both; let go once its slices are written."""
        if rank not in self._columns:
            rdir = next(d for r, d, _ in self.sources if r == rank)
            self._columns[rank] = rdir.read_phase_columns()
        return self._columns[rank]

    def _window(self, rank: int):
        return None if self.windows is None else self.windows.get(rank, (0, 0))   # (0, 0): nothing

    def _window_us(self):
        """The hull of the ranks' windows on the trace's axis (µs), for the Kineto events; None: everything."""
        if self.windows is None:
            return None
        spans = []
        for rank, _, rmeta in self.sources:
            (t0, t1), offset = self._window(rank), _wall_ns(rmeta)(0) - self.base_wall_ns
            spans += [((t0 + offset) / 1e3, (t1 + offset) / 1e3)] if t1 > t0 else []
        return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0.0, 0.0)

    def chunks(self) -> Iterator[list[dict]]:
        base = self.base_wall_ns
        for rank, rdir, rmeta in self.sources:
            # the records a step range read already, else phase_chunks reads them; held by it alone from here
            for part in phase_chunks(rank, rdir, rmeta, base, self._window(rank), self.chunk,
                                     self._columns.pop(rank, None)):
                if part and part[0].get("cat") == "step":
                    n, lo, hi = self.steps.get(rank, (0, None, None))
                    self.steps[rank] = (n + len(part), part[0]["args"]["step"] if lo is None else lo,
                                        part[-1]["args"]["step"])
                yield part
            collectors = rdir.sample_collectors()
            if collectors:
                pid = SYSTEM_PID + rank
                label = "haiprof system" if len(self.sources) == 1 else f"haiprof system (rank {rank})"
                yield [_meta_event("process_name", pid, 0, label),
                       _meta_event("process_sort_index", pid, 0, 1_000_000 + rank)]
                for name in collectors:   # read_samples: at most MAX_SAMPLES a collector, however long the run
                    yield counter_events(rdir.read_samples(name), rmeta, base, pid, name, self._window(rank))
        window_us = self._window_us()
        for path in self.merge:
            yield kineto_events(path, base, window_us)

    def tail(self) -> dict:
        return {"displayTimeUnit": "ms", "baseTimeNanoseconds": self.base_wall_ns,
                "otherData": {"haiprof_run": self.meta.get("target_name"), "command": self.meta.get("command"),
                              "merged_traces": [str(p) for p in self.merge]}}


def build_trace(run_dir: RunDir, merge: list[Path] | None = None, windows: dict | None = None) -> dict:
    """The Chrome trace of a run as one dict (what `write_trace` writes, in memory: for tests and small runs)."""
    trace = Trace(run_dir, merge, windows)
    return {"traceEvents": [ev for part in trace.chunks() for ev in part], **trace.tail()}


def kineto_traces(run_dir: RunDir) -> list[Path]:
    """The Kineto windows a run holds: its own, or each rank's in a distributed run."""
    meta = run_dir.read_meta()
    found = [find_kineto(rdir) for _, rdir, _ in rank_sources(run_dir, meta)]
    own = find_kineto(run_dir)
    return [p for p in dict.fromkeys(found + [own]) if p is not None]


def write_trace(trace: Trace, out: Path) -> int:
    """Stream the trace into `out` (gzip for a .gz name) a chunk at a time, through a temporary file renamed
    over `out` when complete (no half-written trace under its name). Returns the number of events written."""
    # gzip's level 6 (gzip(1)'s default), not gzip.open's 9: compressing a long run's trace ~5x cheaper, 5% larger
    opener = functools.partial(gzip.open, compresslevel=6) if out.name.endswith(".gz") else open
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    dumps = json.JSONEncoder(separators=(",", ":")).encode   # json.dump's own output, a chunk at a time
    n = 0
    try:
        with opener(tmp, "wt", encoding="utf-8") as f:
            f.write('{"traceEvents":[')
            for part in trace.chunks():
                if part:
                    f.write(("," if n else "") + dumps(part)[1:-1])
                    n += len(part)
            f.write("]")
            for key, value in trace.tail().items():
                f.write(f",{dumps(key)}:{dumps(value)}")
            f.write("}")
        os.replace(tmp, out)
    except BaseException:   # an error or a Ctrl-C midway: no temporary file left behind
        tmp.unlink(missing_ok=True)
        raise
    return n
