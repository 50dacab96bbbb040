"""Intra-op threads that cost more than they pay: ops too small to split across threads, waiting on them.

A reinforcement-learning loop (one small policy forward per environment step) runs matmuls of a few µs of work;
with several torch threads each parallel region wakes the others (and their spinning competes with the training
thread for cores: worst where the threads outnumber the cores the process may use, or a busy machine leaves it
fewer), so the same op sometimes takes milliseconds. Two things tell that apart from ops that merely
vary in size: ops are compared only with ops of the same name and input shapes (each group's median is what the
op costs; the time above it is waiting), and the matmuls' own work, their FLOPs over this CPU's measured matmul
peak per thread (analyzers/flops.py, collectors/matmul_peak.py), says whether any op is large enough for a thread
to pay: an op whose work on one thread is below a thread wake-up gains nothing from more threads.

The advice is torch.set_num_threads(N) (OMP_NUM_THREADS=N before the script starts) with N what the largest
matmul pays for; its predicted gain is the waiting it removes less what the matmuls then take on fewer threads.
Advice only: there is no fix id for it. Pure: a trace's events in, a finding out.
"""
from __future__ import annotations

import math
from collections import defaultdict

from . import flops
from . import whatif
from .findings import Finding

# A thread wake-up on Linux (futex wake, schedule, cache refill): ~5-50 µs; an op needs at least this much work
# per extra thread for the split to pay.
WAKE_S = 50e-6
# Waiting below this share of the traced step is not worth advice (the run's noise is of that order).
MIN_SHARE = 0.05
SEVERITY = ((0.4, "high"), (0.2, "moderate"), (MIN_SHARE, "low"))


def _window(events: list) -> tuple[list, list, float]:
    """(outermost ops in whole steps, with whether each ran a matmul and its FLOPs), (FLOPs of every matmul op),
    total step time in µs."""
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith(flops.STEP_PREFIX))
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
                 key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
    top, mm, open_top = [], [], {}   # open_top: tid -> [end, row] of the outermost op running on that thread
    for e in ops:
        ts, tid = float(e["ts"]), e.get("tid")
        if not any(a <= ts < b for a, b in steps):
            continue
        args = e.get("args") or {}
        f = flops.op_flops(str(e["name"]), args.get("Input Dims") or [], args.get("Concrete Inputs"))
        cur = open_top.get(tid)
        if cur is None or ts >= cur[0]:
            row = {"key": (e["name"], str(args.get("Input Dims"))), "dur": float(e.get("dur", 0)), "flops": 0}
            top.append(row)
            cur = open_top[tid] = [ts + row["dur"], row]
        if f and e["name"] in flops.MATMUL:
            mm.append(f)
            cur[1]["flops"] += f
    return top, mm, sum(b - a for a, b in steps)


def analyze(events: list, threads: int | None, peak_flops: float | None, steady_s: float | None) -> dict | None:
    """The finding (kind "threads", advice only) where tiny ops wait on intra-op threads; None otherwise (one
    thread, no measured peak, no shapes in the trace, ops large enough to pay for the threads, little waiting)."""
    if not threads or threads <= 1 or not peak_flops or not steady_s:
        return None
    top, mm, total_us = _window(events)
    if not mm or not total_us:
        return None
    per_thread = peak_flops / threads
    largest_s = max(mm) / per_thread                      # the biggest matmul's work on one thread
    n = max(1, min(threads, math.ceil(largest_s / WAKE_S)))
    if n >= threads:
        return None   # the largest matmul pays for every thread the run has
    groups = defaultdict(list)
    for r in top:
        groups[r["key"]].append(r)
    wait_all = wait_mm = 0.0
    for rows in groups.values():
        durs = sorted(r["dur"] for r in rows)
        med = durs[len(durs) // 2]
        for r in rows:
            wait_all += r["dur"] - med
            wait_mm += (r["dur"] - med) if r["flops"] else 0.0
    steps = total_us / 1e6
    n_steps = max(1, sum(1 for e in events if e.get("ph") == "X"
                         and str(e.get("name", "")).startswith(flops.STEP_PREFIX)))
    # the matmuls on n threads instead of all of them: their work at n/threads of the measured peak
    cost = sum(mm) / n_steps * (1 / (per_thread * n) - 1 / peak_flops)
    share = lambda us: us / 1e6 / steps   # noqa: E731  (of the traced step: the waiting is measured there)
    waiting, in_mm, cost_share = share(wait_all), share(wait_mm), cost * n_steps / steps
    if waiting < MIN_SHARE:
        return None
    point, low, high = waiting - cost_share, max(0.0, in_mm - cost_share), waiting
    p = {"fix": None, "gain_share": max(0.0, point), "low_share": low, "high_share": high, "touches_share": waiting,
         "step_s": steady_s, "step_after_s": steady_s * (1 - max(0.0, point)), "cost_s": None, "worth": True,
         "why_not": None, "touches": "ops waiting beyond their same-shape median",
         "assumed": (f"with {n} thread(s) the waiting of ops beyond their same-shape median goes "
                     f"({100 * waiting:.0f}% of the traced step, {100 * in_mm:.0f}% in matmuls), and the matmuls "
                     f"run at {n}/{threads} of the measured peak (+{1e6 * cost:.0f} µs a step)")}
    p["text"] = whatif.quote(p)
    line = f"torch.set_num_threads({n}) (or OMP_NUM_THREADS={n} before the script starts)"
    severity = next(s for t, s in SEVERITY if waiting >= t)
    message = (f"tiny ops wait on intra-op threads: ops take {100 * waiting:.0f}% of the traced step beyond the "
               f"median of ops of the same shape (waiting for threads to wake, or for a core the threads compete "
               f"for), and the largest matmul is {1e6 * largest_s:.1f} µs of work on "
               f"one thread, too little to split across {threads} threads (a wake-up costs ~{1e6 * WAKE_S:.0f} µs); "
               f"{line} is {p['text']}")
    return Finding(kind="threads", severity=severity, share=max(0.0, point), message=message, fixes=[],
                   evidence={"threads": threads, "advised_threads": n, "line": line, "waiting_share": waiting,
                             "matmul_waiting_share": in_mm, "largest_matmul_s": largest_s,
                             "matmuls_per_step": len(mm) / n_steps, "predicted": p}).as_dict()
