"""Merging ranks: phase shares and step-time spread per rank, stragglers and why, how communication splits.

Pure functions over per-rank inputs (steps already partitioned by analyzers.steps). Ranks of a data-parallel
job advance in lock-step, so step i of every rank is the same optimizer step and comparing them needs no clock
shared across hosts:

  * the exposed allreduce time a_r of rank r in a step ends at (nearly) the same moment on every rank, so the rank
    that arrived last waits least: min_r a_r is the transfer itself, a_r - min_r a_r is rank r waiting for the
    slowest (synchronization skew);
  * the straggler is the rank the others wait for: the one that arrives last in most steps, provided the wait
    it causes is a real share of the step; its cause is the phase in which it spends more than the median of the
    other ranks (the DataLoader; compute; compute explained by bigger batches = data imbalance).
"""
from __future__ import annotations

import signal
import statistics
from dataclasses import dataclass, field

import numpy as np

from . import sharded_comm
from . import thresholds as T
from .findings import bound
from .step_columns import StepColumns
from .steps import ALL_PHASES, phase_share

COMPUTE = ("forward", "backward", "optimizer")
INPUT = ("dataloader", "h2d")


@dataclass
class RankInput:
    rank: int
    meta: dict
    steps: list                               # steady steps (warm-up excluded): StepColumns or Steps
    all_steps: int = 0
    batch_numel: list = field(default_factory=list)
    ddp_stats: list = field(default_factory=list)   # the "@ddp" records' dicts, in order
    source: str = "local"
    stats: dict = field(default_factory=dict)       # the rank's own figures over all its steady steps (digest)
    table: dict | None = None                       # its steps as columns (digest's steps.npz), instead of `steps`


def _dur(r: RankInput) -> np.ndarray:
    if r.table is not None:
        return np.asarray(r.table["duration_ns"], dtype=np.float64)
    return StepColumns.of(r.steps).duration_ns.astype(np.float64)


def _col(r: RankInput, phases) -> np.ndarray:
    """ns per step spent in `phases` (summed), from the table when there is one."""
    if r.table is not None:
        return np.sum([np.asarray(r.table[p], dtype=np.float64) for p in phases], axis=0)
    cols = StepColumns.of(r.steps)
    return sum((cols.phase(p).astype(np.float64) for p in phases), np.zeros(len(cols)))


def step_rows(r: RankInput) -> int:
    return len(r.table["duration_ns"]) if r.table is not None else len(r.steps)


def exit_text(code) -> str:
    if code is None:
        return "unknown"
    if isinstance(code, int) and code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def _median(xs):
    return statistics.median(xs) if xs else 0.0


def _aligned(ranks: list[RankInput]) -> int:
    return min((step_rows(r) for r in ranks), default=0)


def comm_split(ranks: list[RankInput]) -> dict:
    """Exposed allreduce per step split into transfer (min over ranks) and waiting for the slowest rank."""
    n = _aligned(ranks)
    out = {"ranks_compared": len(ranks), "steps_compared": n}
    if len(ranks) < 2 or n == 0:
        out["note"] = "needs at least two ranks with steps"
        return out
    a = np.stack([_col(r, ("allreduce",))[:n] for r in ranks])        # ranks x steps
    total_dur = float(sum(_dur(r)[:n].sum() for r in ranks))
    transfer = a.min(axis=0)
    skew_per_step = a.max(axis=0) - transfer
    wait = (a - transfer).sum(axis=1)
    total_exposed, total_transfer = float(a.sum()), float(transfer.sum()) * len(ranks)
    last = np.bincount(a.argmin(axis=0)[skew_per_step > 0], minlength=len(ranks))   # first of the equal, as before
    per_rank_dur = total_dur / len(ranks)
    out.update(
        exposed_share=total_exposed / total_dur if total_dur else 0.0,
        transfer_share=total_transfer / total_dur if total_dur else 0.0,
        skew_share=(total_exposed - total_transfer) / total_dur if total_dur else 0.0,
        transfer_ms_per_step=total_transfer / len(ranks) / n / 1e6,
        wait_ms_per_step={str(r.rank): float(w) / n / 1e6 for r, w in zip(ranks, wait)},
        max_skew_share=float(np.median(skew_per_step)) * n / per_rank_dur if per_rank_dur else 0.0,
        last_to_arrive={str(r.rank): int(c) for r, c in zip(ranks, last)},
    )
    return out


def ddp_overlap(ranks: list[RankInput]) -> dict | None:
    """DDP's own reducer timers: communication span and how much of it overlapped backward compute.

    DDP keeps running averages over its sampled iterations; each sample is recovered from consecutive averages
    (x_k = k*avg_k - (k-1)*avg_{k-1}) so the first, warm-up sample can be dropped.
    """
    comm, overlap = [], []
    for r in ranks:
        seen = []
        for rec in r.ddp_stats:
            if "avg_backward_comm_time" not in rec or rec.get("model", 0) != 0:
                continue
            pair = (rec["avg_backward_comm_time"], rec.get("avg_backward_compute_comm_overlap_time", 0))
            if not seen or pair != seen[-1]:
                seen.append(pair)
        samples = []
        for k, (c, o) in enumerate(seen, start=1):
            pc, po = seen[k - 2] if k > 1 else (0, 0)
            samples.append((k * c - (k - 1) * pc, k * o - (k - 1) * po))
        for c, o in samples[1:] if len(samples) > 1 else samples:
            if c > 0:
                comm.append(c)
                overlap.append(min(max(o, 0), c))
    if not comm:   # no DDP: a sharded (FSDP) job's collectives, timed to completion, in the same shape
        return sharded_comm.overlap([r.ddp_stats for r in ranks])
    c, o = statistics.fmean(comm), statistics.fmean(overlap)
    return {"comm_ms": c / 1e6, "overlap_ms": o / 1e6, "exposed_fraction": (c - o) / c if c else 0.0,
            "samples": len(comm), "source": "DDP reducer timers (_get_ddp_logging_data), sampled iterations"}


def _phase_median(r: RankInput, phases) -> float:
    col = _col(r, phases)
    return float(np.median(col)) if len(col) else 0.0


def stragglers(ranks: list[RankInput], split: dict) -> list[dict]:
    """The rank the others wait for, with its cause; [] when no rank holds the others up."""
    if len(ranks) < 2 or not split.get("steps_compared"):
        return []
    counts = split["last_to_arrive"]
    slow = max(counts, key=lambda k: counts[k])
    n = split["steps_compared"]
    if counts[slow] < T.STRAGGLER_CONSISTENCY * n or split["max_skew_share"] < T.STRAGGLER_SKEW_SHARE:
        return []
    by_rank = {str(r.rank): r for r in ranks}
    s, others = by_rank[slow], [r for r in ranks if str(r.rank) != slow]
    excess = {}
    for name, phases in (("dataloader", INPUT), ("compute", COMPUTE), ("other", ("other",))):
        mine = _phase_median(s, phases)
        theirs = _median([_phase_median(o, phases) for o in others])
        excess[name] = (mine - theirs) / 1e6
    cause = max(excess, key=excess.get)
    wait = split["wait_ms_per_step"]
    others_wait = _median([wait[str(o.rank)] for o in others])
    # Lock-step noise makes some rank last in most steps; a straggler's own excess must explain the wait it causes.
    if excess[cause] < T.STRAGGLER_EXPLAINED * others_wait:
        return []
    mine_numel = statistics.fmean(s.batch_numel) if s.batch_numel else 0
    their_numel = _median([statistics.fmean(o.batch_numel) for o in others if o.batch_numel])
    detail = {"excess_ms_per_step": excess, "batch_numel_mean": mine_numel, "others_batch_numel_mean": their_numel,
              "last_to_arrive_steps": counts[slow], "steps_compared": n}
    if cause == "compute" and their_numel and mine_numel >= (1 + T.DATA_IMBALANCE) * their_numel:
        cause = "data imbalance"
    why = {"dataloader": f"its DataLoader: {excess['dataloader']:.0f} ms/step more waiting for batches than the "
                         f"other ranks",
           "compute": f"its compute: forward+backward+optimizer {excess['compute']:.0f} ms/step slower than the "
                      f"other ranks on batches of the same size",
           "data imbalance": f"data imbalance: its batches are {mine_numel / their_numel:.2f}x the others' size "
                             if their_numel else "data imbalance",
           "other": f"time outside the measured phases: {excess['other']:.0f} ms/step more than the other ranks"}
    return [{"rank": s.rank, "host": s.meta.get("host"), "local_rank": s.meta.get("local_rank"), "cause": cause,
             "reason": why[cause], "others_wait_ms_per_step": others_wait,
             "evidence": detail}]


def rank_rows(ranks: list[RankInput], expected: list[int], failures: dict,
              gathering: bool = True) -> tuple[list, list]:
    """One row per rank (present or not) and the missing/failed ones with their exit codes.

    `gathering` is False in the directory of a node other than rank 0's: other nodes' ranks are expected to be
    absent there (their data went to rank 0), so they are listed as elsewhere, not as missing.
    """
    rows, problems = [], []
    present = {r.rank: r for r in ranks}
    for rank in expected:
        r = present.get(rank)
        fail = failures.get(str(rank)) or failures.get(rank)
        proc_exit = fail.get("exitcode") if fail else None
        if r is None and not fail and not gathering:
            rows.append({"rank": rank, "status": "elsewhere", "exit_code": None})
            continue
        if r is None:
            rows.append({"rank": rank, "status": "missing", "exit_code": proc_exit})
            problems.append({"rank": rank, "exit_code": proc_exit, "status": "missing",
                             "message": f"rank {rank}: no data reached this run directory"
                                        + (f" (exit code {exit_text(proc_exit)})" if fail else "")})
            continue
        m = r.meta
        durs = (_dur(r) / 1e9).tolist() if not r.stats else []
        script_exit = m.get("exit_code")
        row = {"rank": rank, "host": m.get("host"), "node_rank": m.get("node_rank"),
               "local_rank": m.get("local_rank"), "pid": m.get("pid"), "source": r.source, "steps": r.all_steps,
               "dir": m.get("run_dir"),   # the rank's directory on its own host
               "step_time_median_s": r.stats.get("step_time_median_s") if r.stats else
               (_median(durs) if durs else None),
               "step_time_p90_s": r.stats.get("step_time_p90_s") if r.stats else
               (sorted(durs)[int(0.9 * (len(durs) - 1))] if durs else None),
               "phase_share": r.stats.get("phase_share") if r.stats else
               {k: round(v, 6) for k, v in phase_share(r.steps).items()},
               "script_exit_code": script_exit, "exit_code": proc_exit if fail else script_exit}
        status = "ok"
        if fail and script_exit == 0:
            status = "teardown-abort"
            msg = (f"rank {rank} ({m.get('host')}): training finished ({r.all_steps} steps), then the process "
                   f"died at exit with code {exit_text(proc_exit)} (e.g. an abort at process-group teardown)")
        elif fail or script_exit not in (0, None) or m.get("end_time") is None:
            status = "failed"
            code = proc_exit if fail else script_exit
            msg = (f"rank {rank} ({m.get('host')}) exited with code {exit_text(code)} after {r.all_steps} steps"
                   + (f": {m.get('error')}" if m.get("error") else "") + "; its data up to the last flush is kept")
        row["status"] = status
        rows.append(row)
        if status != "ok":
            problems.append({"rank": rank, "exit_code": row["exit_code"], "status": status, "message": msg})
    return rows, problems


def step_spread(rows: list) -> dict:
    med = {r["rank"]: r["step_time_median_s"] for r in rows if r.get("step_time_median_s")}
    if not med:
        return {}
    order = sorted(med, key=lambda k: (med[k], k))   # two ranks even when their medians are equal
    lo, hi = order[0], order[-1]
    return {"fastest_rank": lo, "slowest_rank": hi, "fastest_median_s": med[lo], "slowest_median_s": med[hi],
            "spread": (med[hi] - med[lo]) / med[lo] if med[lo] else 0.0}


def mean_share(ranks: list[RankInput]) -> dict:
    shares = [r.stats.get("phase_share") or phase_share(r.steps) for r in ranks if step_rows(r)]
    if not shares:
        return {p: (1.0 if p == "other" else 0.0) for p in ALL_PHASES}
    return {p: statistics.fmean(s[p] for s in shares) for p in ALL_PHASES}


def pooled_stats(ranks: list[RankInput]) -> dict:
    """analyzers.steps.step_time_stats and seconds_per_step ("steady") over every rank's steps, from arrays."""
    d = np.sort(np.concatenate([_dur(r) for r in ranks])) / 1e9 if ranks else np.zeros(0)
    if not len(d):
        return {"median": None, "mean": None, "p10": None, "p90": None, "min": None, "max": None, "steady": None}

    def pct(q):
        return float(d[min(len(d) - 1, int(round(q * (len(d) - 1))))])

    return {"median": float(np.median(d)), "mean": float(d.mean()), "p10": pct(0.1), "p90": pct(0.9),
            "min": float(d[0]), "max": float(d[-1]), "steady": float(d.mean())}


def comm_finding(split: dict, share: dict, ddp: dict | None, median_s, steps: int, fixes: list,
                 steady_s=None) -> dict | None:
    """Exposed communication, graded on its transfer part (waiting for a straggler is not fixed by compression)."""
    exposed = split.get("exposed_share", share.get("allreduce", 0.0))
    transfer = split.get("transfer_share", exposed)
    grade = "high" if transfer >= T.COMM_HIGH else "moderate" if transfer >= T.COMM_MODERATE else None
    if grade is None:
        return None
    fsdp = bool(ddp) and ddp.get("framework") == sharded_comm.FRAMEWORK
    what = "all-gathers and reduce-scatters not hidden by compute" if fsdp else "gradient sync not hidden by backward"
    msg = (f"{100 * exposed:.0f}% of step time is exposed communication ({what}): "
           f"{100 * transfer:.0f}% transfer, {100 * split.get('skew_share', 0.0):.0f}% waiting for the slowest rank")
    if ddp:
        msg += (f"; {ddp.get('framework', 'DDP')} overlapped only {100 * (1 - ddp['exposed_fraction']):.0f}% of its "
                f"{ddp['comm_ms']:.0f} ms of communication with {'compute' if fsdp else 'backward'}")
    if fsdp:   # compress and bucket act on DDP's reducer: nothing of theirs applies to FSDP's collectives
        fixes = []
    return bound("communication", grade, transfer, msg,
                 {"exposed_comm_share": exposed, "transfer_share": transfer,
                  "sync_skew_share": split.get("skew_share"), "exposed_fraction_of_comm":
                  ddp["exposed_fraction"] if ddp else None, "ddp": ddp, "median_step_s": median_s, "steady_step_s": steady_s,
                  "steps": steps, "thresholds": {"moderate": T.COMM_MODERATE, "high": T.COMM_HIGH}},
                 list(fixes))
