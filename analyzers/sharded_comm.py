"""Sharded data parallel (FSDP): how much of its all-gather and reduce-scatter time the training thread waited for.

Input: each rank's per-step collective statistics (collectors/sharded_comm.py, source "fsdp"): the collectives'
summed span from issue to completion and the part the training thread spent blocked in them. What was not blocked
overlapped compute (an async all-gather prefetched under the previous layer's forward). Output in the shape of
analyzers.distributed.ddp_overlap, so the job's communication finding reads either the same way.
"""
from __future__ import annotations

import statistics

SOURCE = "fsdp"
FRAMEWORK = "FSDP"


def overlap(stats_per_rank: list[list[dict]]) -> dict | None:
    """Mean per step over the ranks' steps, each rank's first step (warm-up: lazy init, first all-gathers) left
    out when it has more; None when no rank ran a sharded collective on the host's clock."""
    comm, exposed, by_kind, calls, nbytes = [], [], {}, [], []
    for stats in stats_per_rank:
        # device collectives (NCCL) return once queued: the host saw no span, the device timeline has it
        mine = [s for s in stats if s.get("source") == SOURCE and s.get("comm_ns", 0) > 0
                and not s.get("device_calls")]
        for s in mine[1:] if len(mine) > 1 else mine:
            c = s["comm_ns"]
            comm.append(c)
            exposed.append(min(max(s.get("exposed_ns", 0), 0), c))
            for kind, ns in (s.get("span_ns") or {}).items():
                by_kind.setdefault(kind, []).append(ns)
            calls.append(sum((s.get("calls") or {}).values()))
            nbytes.append(s.get("bytes", 0))
    if not comm:
        return None
    c, e = statistics.fmean(comm), statistics.fmean(exposed)
    return {"comm_ms": c / 1e6, "overlap_ms": (c - e) / 1e6, "exposed_fraction": e / c if c else 0.0,
            "samples": len(comm), "framework": FRAMEWORK,
            "by_kind_ms": {k: statistics.fmean(v) / 1e6 for k, v in sorted(by_kind.items())},
            "calls_per_step": statistics.fmean(calls), "mb_per_step": statistics.fmean(nbytes) / 2**20,
            "source": "FSDP collectives (all-gather, reduce-scatter) timed from issue to completion"}
