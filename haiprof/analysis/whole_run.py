"""The whole run at once: drift, periodic stalls, memory creep and the slowest steps (analyzers/long_run.py).

Wiring only: the run's steps, phase records and samples become numpy arrays, one entry per step or per sample.
"""
from __future__ import annotations

import numpy as np

from haiprof.analyzers import long_run
from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers.step_columns import StepColumns

from ..rundir.vocabulary import LOADER_MARK, MEM_MARK, TRACE_BEGIN, TRACE_END   # LOADER_MARK: an epoch start

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
                    long_run.periodic_stalls(a["duration"], a["start"], phases, new_loader, index=a["index"],
                                             own_periods_s={OWN_WRITER: FLUSH_INTERVAL_S})):
        if finding is not None:
            out["findings"].append(finding)
    lo, hi = int(a["start"][0]), int(a["end"][-1])
    system = [s for s in samples.get("system", []) if lo <= s.get("t_ns", -1) <= hi and "rss_bytes" in s]
    if system:
        creep = long_run.memory_creep(np.array([s["t_ns"] for s in system]),
                                      np.array([s["rss_bytes"] for s in system]),
                                      "host memory (RSS of the process tree)", steps=len(a["duration"]))
        if creep is not None:
            out["findings"].append(creep)
    mem = [(int(r[1]), r[3]) for r in records if isinstance(r, list) and len(r) >= 4 and r[0] == MEM_MARK
           and lo <= r[1] <= hi]
    if mem:
        creep = long_run.memory_creep(np.array([t for t, _ in mem]), np.array([v for _, v in mem]),
                                      "device memory allocated", steps=len(a["duration"]))
        if creep is not None:
            out["findings"].append(creep)
    notes: dict = {}
    for i in np.flatnonzero(new_loader):
        notes.setdefault(int(a["index"][i]), []).append("epoch start (a new DataLoader iterator)")
    out["slowest_steps"] = long_run.slowest_steps(a["duration"], a["index"], phases, SLOWEST, notes)
    _context(out["slowest_steps"], a, records, samples.get("system", []))
    return out


EVAL_NAME = "eval"            # collectors/phases.py: a forward without autograd (an evaluation pass)
CHECKPOINT_BYTES = 1 << 20    # the process tree wrote this much around a step: a checkpoint (or a log dump)
OWN_TRACE_WRITE = "haiprof's own export of its op-level trace to the run directory, not the script's"


def _trace_spans(records: list) -> list[tuple[int, int]]:
    """The tracing windows, (begin, end) ns. Their marks bracket the profiler's export of trace.json, so a write
    in a sampler interval that overlaps one is (at least in part) haiprof's own; a window the run ended inside
    has no end mark and lasts to the end (its export runs at close)."""
    begins = sorted(int(r[1]) for r in records if isinstance(r, list) and len(r) > 1 and r[0] == TRACE_BEGIN)
    ends = sorted(int(r[1]) for r in records if isinstance(r, list) and len(r) > 1 and r[0] == TRACE_END)
    spans = []
    for b in begins:
        e = next((e for e in ends if e >= b), None)
        spans.append((b, e if e is not None else np.iinfo(np.int64).max))
        if e is not None:
            ends.remove(e)
    return spans


def _context(rows: list, a: dict, records: list, system: list) -> None:
    """What else each slow step had around it, added to its notes: an evaluation pass between it and the step
    before, the disk writes of the process tree (a checkpoint) and the CPU of the process and of the machine in
    the sampler's interval around it ("host")."""
    if not rows:
        return
    evals = np.asarray(sorted(int(r[1]) for r in records if isinstance(r, list) and r and r[0] == EVAL_NAME),
                       dtype=np.int64)
    system = [x for x in system if isinstance(x.get("t_ns"), int)]
    sys_t = np.asarray([x["t_ns"] for x in system], dtype=np.int64)
    pos = np.searchsorted(a["index"], [r["step"] for r in rows])
    own_spans = _trace_spans(records)
    for r, i in zip(rows, pos):
        start, end = int(a["start"][i]), int(a["end"][i])
        before = int(a["end"][i - 1]) if i > 0 else start - 1
        n_eval = int(np.searchsorted(evals, start, "right") - np.searchsorted(evals, before, "left"))
        if n_eval:
            r["notes"].append(f"an evaluation pass before it ({n_eval} eval forwards)")
        if len(sys_t) < 2:
            continue
        # the sampler's intervals that overlap the step (the one around it for a step shorter than one)
        j0 = max(1, int(np.searchsorted(sys_t, start, "right")))
        j1 = min(len(sys_t) - 1, max(j0, int(np.searchsorted(sys_t, end, "left"))))
        if start > sys_t[-1] or end < sys_t[0]:
            continue
        wrote = (system[j1].get("proc_write_bytes") or 0) - (system[j0 - 1].get("proc_write_bytes") or 0)
        # The counter is per process tree, so the trace export cannot be told apart from a script's write in the
        # same interval: such an interval is haiprof's, said so, never "a checkpoint?".
        own = any(b <= sys_t[j1] and e >= sys_t[j0 - 1] for b, e in own_spans)
        if wrote >= CHECKPOINT_BYTES:
            r["notes"].append(f"the process wrote {wrote / 1e6:.0f} MB to disk around it: {OWN_TRACE_WRITE}"
                              if own else f"the process wrote {wrote / 1e6:.0f} MB to disk around it (a checkpoint?)")
        cpu = [system[j]["cpu_main_pct"] for j in range(j0, j1 + 1)
               if isinstance(system[j].get("cpu_main_pct"), (int, float))]
        cores = [float(np.mean(c)) for j in range(j0, j1 + 1)
                 if isinstance(c := system[j].get("cpu_cores_pct"), list) and c
                 and all(isinstance(x, (int, float)) for x in c)]
        if cpu:
            r["host"] = (f"training process {np.mean(cpu):.0f}% CPU" +
                         (f", machine {np.mean(cores):.0f}% busy" if cores else "") +
                         f" ({(sys_t[j1] - sys_t[j0 - 1]) / 1e9:.1f} s around the step)")
