"""Ranks at scale: outlier ranks, slow nodes, and the ranks x step-buckets grid, from per-rank step tables.

Pure functions over numpy arrays (one table per rank: step time and time per phase, one row per steady step or
bucket of steps). In a data-parallel job every rank's step ends at the shared gradient sync, so step time is the
same everywhere; what differs is the time a rank spends *before* the sync (its work: step minus exposed
communication). The rank with more work is the one the others wait for.

  * outliers: work above the job's median by OUTLIER_SIGMAS robust sigmas and OUTLIER_MIN_SHARE of the step;
  * slow nodes: a host where at least SLOW_NODE_SHARE of the ranks (and two) are outliers is one finding naming
    the node, not eight findings naming its ranks (a slow node: its network, its CPUs, its storage, its clocks);
  * the grid: per rank, its rows averaged into the job's step buckets, for a heatmap; and its arrival at the sync
    after the first rank's (the first rank's exposed allreduce less its own, step by step).
"""
from __future__ import annotations

import math

import numpy as np

from . import thresholds as T

INPUT = ("dataloader", "h2d")
COMPUTE = ("forward", "backward", "optimizer")
CAUSES = {"dataloader": INPUT, "compute": COMPUTE, "other": ("other",)}
GRID_METRICS = {"step": ("duration_ns",), "data": INPUT, "comm": ("allreduce",)}


def _sum(table: dict, cols) -> np.ndarray:
    return np.sum([table[c] for c in cols], axis=0, dtype=np.float64) if len(table["duration_ns"]) else np.zeros(0)


def rank_medians(table: dict) -> dict:
    """Median ms per step of a rank: step, work before the sync, and each cause's phases."""
    if not len(table["duration_ns"]):
        return {}
    dur = np.asarray(table["duration_ns"], dtype=np.float64)
    out = {"step_ms": float(np.median(dur)) / 1e6,
           "work_ms": float(np.median(dur - np.asarray(table["allreduce"], dtype=np.float64))) / 1e6,
           "comm_ms": float(np.median(table["allreduce"])) / 1e6}
    for name, cols in CAUSES.items():
        out[f"{name}_ms"] = float(np.median(_sum(table, cols))) / 1e6
    return out


def outliers(ranks: list[dict]) -> dict:
    """ranks: [{"rank", "host", "local_rank", **rank_medians}] -> {"nodes": [...], "ranks": [...], thresholds}.

    Every outlier is in exactly one place: under its node when the node is slow, else under "ranks".
    """
    have = [r for r in ranks if r.get("work_ms") is not None]
    out = {"nodes": [], "ranks": [], "ranks_compared": len(have)}
    if len(have) < 3:
        out["note"] = "needs at least three ranks"
        return out
    work = np.array([r["work_ms"] for r in have])
    med = float(np.median(work))
    sigma = 1.4826 * float(np.median(np.abs(work - med)))
    step = float(np.median([r["step_ms"] for r in have]))
    limit = med + max(T.OUTLIER_SIGMAS * sigma, T.OUTLIER_MIN_SHARE * step)
    out.update(median_work_ms=med, robust_sigma_ms=sigma, limit_ms=limit, median_step_ms=step)
    typical = {name: float(np.median([r[f"{name}_ms"] for r in have])) for name in CAUSES}
    slow = []
    for r in have:
        if r["work_ms"] > limit:
            excess = {name: r[f"{name}_ms"] - typical[name] for name in CAUSES}
            cause = max(excess, key=excess.get)
            slow.append({"rank": r["rank"], "host": r.get("host"), "local_rank": r.get("local_rank"),
                         "node_rank": r.get("node_rank"), "work_ms": r["work_ms"],
                         "excess_ms": r["work_ms"] - med, "cause": cause, "excess_by_cause_ms": excess})
    per_host: dict = {}
    for r in have:
        per_host.setdefault(r.get("host"), []).append(r["rank"])
    slow_on: dict = {}
    for s in slow:
        slow_on.setdefault(s["host"], []).append(s)
    for host, members in slow_on.items():
        size = len(per_host.get(host, []))
        if len(members) >= max(2, math.ceil(T.SLOW_NODE_SHARE * size)):
            causes = [m["cause"] for m in members]
            out["nodes"].append({"host": host, "node_rank": members[0].get("node_rank"), "ranks_on_node": size,
                                 "slow_ranks": sorted(m["rank"] for m in members),
                                 "excess_ms": float(np.median([m["excess_ms"] for m in members])),
                                 "cause": max(set(causes), key=causes.count)})
        else:
            out["ranks"] += members
    out["nodes"].sort(key=lambda n: -n["excess_ms"])
    out["ranks"].sort(key=lambda r: -r["excess_ms"])
    return out


def grid(tables: list[dict], buckets: int) -> dict:
    """{"step"|"data"|"comm": ranks x buckets array of ms per step} and each bucket's first step index.

    The job's buckets split the shortest rank's rows evenly (ranks step together: row i is the same step on
    every rank); a rank's value in a bucket is the mean over its rows there, weighted by steps per row.
    """
    n = min((len(t["duration_ns"]) for t in tables), default=0)
    b = max(1, min(buckets, n))
    if n == 0:
        return {"buckets": [], **{m: np.zeros((len(tables), 0)) for m in GRID_METRICS}}
    edges = np.linspace(0, n, b + 1).astype(int)
    out = {m: np.zeros((len(tables), b), dtype=np.float32) for m in GRID_METRICS}
    for i, t in enumerate(tables):
        w = np.asarray(t["steps"][:n], dtype=np.float64)
        wsum = np.add.reduceat(w, edges[:-1])
        for m, cols in GRID_METRICS.items():
            v = _sum(t, cols)[:n] * w
            out[m][i] = np.add.reduceat(v, edges[:-1]) / wsum / 1e6
    # arrival at the sync: how long after the first rank each one got there (the first waits the longest in its
    # exposed allreduce, so its allreduce less a rank's own); the rank everyone waits for is the latest
    first = np.max([np.asarray(t["allreduce"][:n], dtype=np.float64) for t in tables], axis=0)
    out["late"] = np.zeros((len(tables), b), dtype=np.float32)
    for i, t in enumerate(tables):
        w = np.asarray(t["steps"][:n], dtype=np.float64)
        late = (first - np.asarray(t["allreduce"][:n], dtype=np.float64)) * w
        out["late"][i] = np.add.reduceat(late, edges[:-1]) / np.add.reduceat(w, edges[:-1]) / 1e6
    out["buckets"] = [int(x) for x in np.asarray(tables[0]["first_step"])[edges[:-1]]]
    return out
