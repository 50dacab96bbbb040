"""Every op-level tracing window of a run, beside the steady steps around it (summary.json `trace_windows`).

Wiring only: the windows are the "@trace-begin"/"@trace-end" marks; which file each one wrote is the
"@trace-window" mark taken just before a window asked for later (--trace-at, --trace-every, `haiprof trace`);
the first window, after warm-up, is trace.json.gz. The steps inside a window are the traced ones (kept out of the
statistics); around it: up to AROUND untraced steps on each side.

The flight recorder's windows (--trace-on-anomaly, ANOMALY_MARK) carry `anomaly`: the step the slow moment was
due at and its period. Their recorded steps go back into the whole-run analysis (a stall it traced is still a
stall of the run, and its slowest-steps row links to the trace), and each such trace is read once to explain its
slowest step (analyzers/stall_trace.py).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import statistics
import zlib

import numpy as np
import orjson

from haiprof.analyzers import stall_trace
from haiprof.analyzers.findings import edited
from haiprof.analyzers.step_columns import StepColumns
from haiprof.analyzers.steps import trace_windows

from ..rundir.vocabulary import ANOMALY_MARK, KINETO_TRACE, TRACE_BEGIN, TRACE_END, WINDOW_MARK, window_trace

RECORDED = 3                       # a flight-recorder window's recorded steps follow its profiler warm-up step
MAX_TRACE_BYTES = 256 << 20        # a flight-recorder trace larger than this is not read back (memory)
SAME_STALL = 3                     # a slow step of the traced stall's period: this many median steps or more
GUESS = re.compile(r"^(the process wrote .* to disk around it)(: haiprof's own .*| \(a checkpoint\?\))$")
AROUND = 20
LAST_NS = np.iinfo(np.int64).max   # a window never closed ends at inf: as int64, the ns stay exact


def analyze(records: list, steps, run_path) -> list[dict]:
    marks = [(r[0], r[1]) for r in records if r[0] in (TRACE_BEGIN, TRACE_END)]
    asked = sorted((r[1], r[3]) for r in records if r[0] == WINDOW_MARK and len(r) >= 4)
    anomaly = {int(r[3]): r for r in records if r[0] == ANOMALY_MARK and len(r) >= 8}
    cols = StepColumns.of(steps)
    duration = cols.duration_ns
    out = []
    for begin, end in trace_windows(marks):
        before = [step for t, step in asked if t <= begin]
        name = window_trace(before[-1]) if before and (not out or before[-1] != out[-1]["asked_step"]) \
            else KINETO_TRACE
        # the steps are in order: the ones overlapping the window and the AROUND on each side are index ranges
        lo = int(np.searchsorted(cols.end_ns, begin, side="right"))
        hi = int(np.searchsorted(cols.start_ns, min(end, LAST_NS), side="left"))   # never closed: to the end
        inside = lo + np.flatnonzero(cols.traced[lo:hi] & (cols.end_ns[lo:hi] > begin) & (cols.start_ns[lo:hi] < end))
        if not len(inside):
            continue
        first, last = int(cols.index[inside[0]]), int(cols.index[inside[-1]])
        idx = cols.index
        a, b = int(np.searchsorted(idx, first - AROUND)), int(np.searchsorted(idx, last + AROUND, side="right"))
        near = a + np.flatnonzero(~cols.traced[a:b] & (idx[a:b] != idx[a:b].clip(first, last)))
        in_ms = statistics.fmean(duration[inside].tolist()) / 1e6
        around_ms = statistics.fmean(duration[near].tolist()) / 1e6 if len(near) else None
        out.append({"file": name if (run_path / name).is_file() else None, "asked_step": before[-1] if before and
                    name != KINETO_TRACE else None, "first_step": first, "last_step": last,
                    "steps": len(inside), "step_ms": round(in_ms, 4),
                    "around_ms": round(around_ms, 4) if around_ms is not None else None,
                    "slowdown": round(in_ms / around_ms, 3) if around_ms else None})
        at = out[-1]["asked_step"]
        if at is not None and at in anomaly:
            r = anomaly[at]
            out[-1]["anomaly"] = {"due_step": int(r[5]) if r[5] >= 0 else None, "period_steps": int(r[6]) or None,
                                  "seen_step": int(r[7]), "recorded_steps": [at + 1, at + RECORDED]}
            if len(r) >= 9 and r[8]:   # placed by time: a stall on a clock, its period in seconds
                out[-1]["anomaly"]["period_s"] = round(float(r[8]) / 1e3, 3)
    return out


def with_traced_stalls(steady, all_steps, windows: list, median_step_ms: float | None):
    """The steady steps plus the stalls the flight recorder traced (StepColumns, in step order): each window's
    explained step, when it is a stall (SAME_STALL x the median step or more). Its other recorded steps stay out:
    the profiler, Python functions recorded, slows short steps several times over."""
    stalls = [w["explained"]["step"] for w in windows if (w.get("explained") or {}).get("step") is not None
              and median_step_ms and w["explained"]["step_ms"] >= SAME_STALL * median_step_ms]
    if not stalls:
        return steady
    cols = StepColumns.of(all_steps)
    return cols.take(np.isin(cols.index, StepColumns.of(steady).index) | np.isin(cols.index, stalls))


def _own_dirs() -> tuple:
    """haiprof's own code folders (the package; collectors/analyzers/fixes under it or beside it in a source
    checkout): its frames in a trace are the profiler's, never the script's culprit."""
    import importlib.util
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for name in ("haiprof.collectors", "haiprof.analyzers", "haiprof.fixes"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.add(os.path.dirname(os.path.abspath(spec.origin)))
    return tuple(d + os.sep for d in dirs)


def load_trace(path):
    """A trace file parsed as JSON (None when it cannot be read whole: missing, cut short, not JSON). orjson
    parses it (a report's largest single cost with the standard library: ~5x slower); the standard library only
    where orjson refuses what Python's json takes (NaN, Infinity)."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error):
        return None
    try:
        return orjson.loads(raw)
    except ValueError:
        pass
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def read_events(path) -> list | None:
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            return None
    except OSError:
        return None
    data = load_trace(path)
    return data.get("traceEvents") if isinstance(data, dict) else None


def explain(windows: list, run_path, median_step_ms: float | None) -> None:
    """Each flight-recorder window's slowest step explained from its trace (`explained`), in place; a window
    whose slowest recorded step is no stall (under SAME_STALL x the median step) is a miss (`missed`)."""
    own = _own_dirs()
    for w in windows:
        an = w.get("anomaly")
        if not an or not w.get("file"):
            continue
        events = read_events(run_path / w["file"])
        x = stall_trace.explain(events, own, median_step_ms) if events else None
        if x is None:
            continue
        x["step"] = an["recorded_steps"][0] + x["step_in_window"]
        if median_step_ms and x["step_ms"] < SAME_STALL * median_step_ms:
            # the slow moment it was placed for did not come (a period learned from slow steps that lined up by
            # chance on a busy machine, or a stretch already over): said as a miss, never marked as a stall
            w["missed"] = {"step": x["step"], "step_ms": x["step_ms"],
                           "times_median": round(x["step_ms"] / median_step_ms, 2)}
            continue
        w["explained"] = x


def link_stalls(windows: list, whole: dict, median_step_ms: float | None) -> None:
    """The slowest-steps rows a flight-recorder window recorded link to its trace (`trace`), rows of the same
    periodic stall name it; the periodic-stall finding quotes it. In place, on summary parts not yet checked."""
    traced = [w for w in windows if w.get("explained")]
    for r in whole.get("slowest_steps") or []:
        for w in traced:
            x, an = w["explained"], w["anomaly"]
            lo, hi = an["recorded_steps"]
            period = an.get("period_steps")
            if lo <= r["step"] <= hi:
                note = f"traced by the flight recorder ({w['file']})" + \
                    (f": {x['sentence']}" if r["step"] == x["step"] else "")
            elif period and abs(r["step"] - x["step"]) % period in (0, 1, period - 1) and median_step_ms \
                    and r["time_ms"] >= max(SAME_STALL * median_step_ms, x["step_ms"] / 2):
                note = f"the stall every {period} steps, traced at step {x['step']} ({w['file']})"
            else:
                continue
            r["trace"] = w["file"]
            # the trace says what the step did: the sampler's guess at whose disk writes they were goes
            r["notes"] = [GUESS.sub(r"\1", n) for n in r.get("notes", [])] + [note]
            break
    for i, f in enumerate(whole.get("findings") or []):
        if f.get("kind") != "periodic-stall" or not traced:
            continue
        w = max(traced, key=lambda w: w["explained"]["step_ms"])
        x = w["explained"]
        whole["findings"][i] = edited(f, message=f"{f['message']}. Traced at step {x['step']} ({w['file']}): "
                                      f"{x['sentence']}",
                                      evidence={**f["evidence"], "trace": w["file"], "trace_step": x["step"],
                                                "trace_ms": x["ms"], "trace_culprit": x["culprit"]})
