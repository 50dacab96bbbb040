"""The whole run at once: drift, periodic stalls, memory creep and the slowest steps (analyzers/long_run.py).

Wiring only: the run's steps, phase records and samples become numpy arrays, one entry per step or per sample.
"""
from __future__ import annotations

import numpy as np

from haiprof.analyzers import long_run
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers.step_columns import StepColumns

LOADER_MARK = "@loader"   # collectors/phases.py: a DataLoader iterator began (an epoch start)
MEM_MARK = "@mem"         # device memory counters at a step end
SLOWEST = 20
FLUSH_INTERVAL_S = 0.5    # rundir's phase writer: formats and writes the queued records every 0.5 s
OWN_WRITER = "haiprof's phase writer (it formats and writes the queued records every 0.5 s)"


def _step_arrays(steps) -> dict:
    cols = StepColumns.of(steps)
    arr = {"index": cols.index, "start": cols.start_ns, "end": cols.end_ns, "traced": cols.traced,
           "duration": cols.duration_ns}
    arr["phases"] = {p: cols.phase(p) for p in step_analysis.ALL_PHASES}
    return arr


def _marks_in_steps(times_ns: list, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per step: whether one of the times falls inside it (a mark at a step's start boundary belongs to it)."""
    hit = np.zeros(len(start), dtype=bool)
    if not len(times_ns) or not len(start):
        return hit
    t = np.asarray(sorted(times_ns), dtype=np.int64)
    first = np.searchsorted(t, start, side="left")
    last = np.searchsorted(t, end, side="right")
    hit[last > first] = True
    return hit


def analyze(steady: list, records: list, samples: dict) -> dict:
    """{"findings": [...], "slowest_steps": [...]} over the steady steps (warm-up and traced steps out)."""
    out = {"findings": [], "slowest_steps": []}
    if not steady:
        return out
    a = _step_arrays(steady)
    loader_t = [int(r[1]) for r in records if isinstance(r, list) and r and r[0] == LOADER_MARK]
    new_loader = _marks_in_steps(loader_t, a["start"], a["end"])
    phases = {p: v for p, v in a["phases"].items() if v.any()}
    for finding in (long_run.drift(a["duration"]),
                    long_run.periodic_stalls(a["duration"], a["start"], phases, new_loader,
                                             own_periods_s={OWN_WRITER: FLUSH_INTERVAL_S})):
        if finding is not None:
            out["findings"].append(finding)
    lo, hi = int(a["start"][0]), int(a["end"][-1])
    system = [s for s in samples.get("system", []) if lo <= s.get("t_ns", -1) <= hi and "rss_bytes" in s]
    if system:
        creep = long_run.memory_creep(np.array([s["t_ns"] for s in system]),
                                      np.array([s["rss_bytes"] for s in system]), "host memory (RSS of the process tree)")
        if creep is not None:
            out["findings"].append(creep)
    mem = [(int(r[1]), r[3]) for r in records if isinstance(r, list) and len(r) >= 4 and r[0] == MEM_MARK
           and lo <= r[1] <= hi]
    if mem:
        creep = long_run.memory_creep(np.array([t for t, _ in mem]), np.array([v for _, v in mem]),
                                      "device memory allocated")
        if creep is not None:
            out["findings"].append(creep)
    notes: dict = {}
    for i in np.flatnonzero(new_loader):
        notes.setdefault(int(a["index"][i]), []).append("epoch start (a new DataLoader iterator)")
    out["slowest_steps"] = long_run.slowest_steps(a["duration"], a["index"], phases, SLOWEST, notes)
    return out
