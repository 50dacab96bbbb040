"""One node's slow network link: the node whose TCP send queues back up while the others' drain.

A slow link does not make its rank arrive late at the gradient sync (analyzers/culprit.py finds nobody late): the
transfer itself is slow, for every rank, so the job is communication-bound and every rank looks alike. The node
behind it shows what the others do not: bytes it wrote to its sockets wait to leave (collectors/tcp_queues.py
samples the summed send queue of its established TCP connections and its interfaces' bytes).

Per rank (`summarize`, over the steady steps' samples): the share of samples with data queued to send (backlog
share), the mean bytes queued, and the rate it delivered while it had data queued: bytes sent over the time its
queues held data (mean tx rate / backlog share; a byte sent stays queued until acknowledged, so nothing is sent
while the queues are empty).

The rule (`find`), over nodes (the ranks of one host share its network namespace and so its figures):
  - its backlog share is at least BACKLOG_RATIO times the other nodes' median, more than chance gives over the
    samples taken (a one-sided hypergeometric test of its backlogged samples against the others' pooled ones,
    times the number of nodes, under CHANCE);
  - it delivered at most SLOW_RATE_RATIO of the other nodes' median rate while backlogged (or the others never
    had data queued at a sample);
  - its backlog share exceeds the others' by more than the share of the step the ranks wait for a late rank or
    node (the caller's `waited`): while they wait, their data sits in their send queues, a backlog that is not
    their link (with a slow link nobody arrives late: the transfer itself takes long);
  - and the job's exposed transfer is a communication finding (the caller's).
A link as fast as the others' would take (1 - its rate / theirs) of the exposed transfer off the step; compression
(fp16 halves the bytes) at most half, so a node that passes the rate test is worth at least what compression is.
"""
from __future__ import annotations

import math
import statistics

from . import counters

BACKLOG_RATIO = 2.0      # backlogged at least twice as often as the other nodes
SLOW_RATE_RATIO = 0.5    # delivering at most half the others' rate: its fix is worth at least fp16 compression
CHANCE = 0.05            # how likely sampling noise alone gives a node this many backlogged samples
MIN_SAMPLES = 8          # per node: fewer cannot tell a backlog share from noise
EXACT_UP_TO = 2000       # samples in all up to which chance() sums the hypergeometric tail exactly


def _window(samples: list, window) -> list:
    rows = [s for s in samples if isinstance(s, dict) and "t_ns" in s and "send_queued_bytes" in s]
    if window:
        inside = [s for s in rows if window[0] <= s["t_ns"] <= window[1]]
        if len(inside) >= 3:
            return inside
    return rows


def summarize(samples: list, window: tuple | None = None) -> dict:
    """One rank's view of its host's TCP send queues (collectors/tcp_queues.py samples) over `window` (t_ns
    start, end: the steady steps; all samples when fewer than 3 fall in it)."""
    rows = _window(samples, window)
    if not rows:
        return {"samples": 0}
    k = sum(1 for s in rows if s["send_queued_bytes"] > 0)
    out = {"samples": len(rows), "backlogged": k, "backlog_share": k / len(rows),
           "queued_bytes_mean": statistics.fmean(s["send_queued_bytes"] for s in rows)}
    tx = counters.mean_rate(counters.rate_series(rows, lambda s: s.get("tx_bytes")))
    out["tx_bytes_per_s"] = tx
    out["delivery_bytes_per_s"] = tx / out["backlog_share"] if tx is not None and k else None
    rt = counters.mean_rate(counters.rate_series(rows, lambda s: s.get("retrans_segs")))
    out["retrans_per_s"] = rt
    return out


def chance(k: int, n: int, k_others: int, n_others: int) -> float:
    """P(at least k of a node's n samples backlogged | backlogged samples fall at random among all samples):
    one-sided hypergeometric tail."""
    total, hits = n + n_others, k + k_others
    if n <= 0 or total <= 0:
        return 1.0
    if total > EXACT_UP_TO:   # many nodes and samples: the normal approximation (exact sums of big binomials cost)
        q = hits / total
        var = n * q * (1 - q) * (total - n) / max(total - 1, 1)
        mean = n * q
        return 1.0 if var <= 0 else min(1.0, 0.5 * math.erfc((k - 0.5 - mean) / math.sqrt(2 * var)))
    denom = math.comb(total, n)
    return min(1.0, sum(math.comb(hits, i) * math.comb(total - hits, n - i)
                        for i in range(k, min(n, hits) + 1)) / denom)


def nodes(per_rank: list) -> dict:
    """[{rank, host, tcp: summarize(...)}] -> host -> {ranks, tcp} (the host's first rank with samples: all its
    ranks read the same namespace-wide counters)."""
    out: dict = {}
    for r in per_rank:
        nd = out.setdefault(r.get("host"), {"host": r.get("host"), "ranks": [], "tcp": None})
        nd["ranks"].append(r["rank"])
        if nd["tcp"] is None and (r.get("tcp") or {}).get("samples", 0) >= MIN_SAMPLES:
            nd["tcp"] = r["tcp"]
    return out


def find(per_rank: list, transfer_ms: float, waited: float = 0.0) -> dict | None:
    """The node whose link the job's transfer waits on, with its evidence, or None (fewer than two nodes with
    enough samples, no node that passes the rule). `transfer_ms`: the exposed transfer per step; `waited`: the
    share of the step the ranks wait for a late rank or node."""
    by_host = {h: nd for h, nd in nodes(per_rank).items() if nd["tcp"]}
    if len(by_host) < 2 or transfer_ms <= 0:
        return None
    host = max(by_host, key=lambda h: by_host[h]["tcp"]["backlog_share"])
    mine, others = by_host[host]["tcp"], [nd["tcp"] for h, nd in by_host.items() if h != host]
    their_share = statistics.median(o["backlog_share"] for o in others)
    if mine["backlog_share"] < BACKLOG_RATIO * their_share or not mine["backlogged"] or \
            mine["backlog_share"] - their_share <= waited:
        return None
    p = len(by_host) * chance(mine["backlogged"], mine["samples"], sum(o["backlogged"] for o in others),
                              sum(o["samples"] for o in others))
    if p >= CHANCE:
        return None
    rate = mine.get("delivery_bytes_per_s")
    theirs = [o["delivery_bytes_per_s"] for o in others if o.get("delivery_bytes_per_s")]
    their_rate = statistics.median(theirs) if theirs else None
    if rate is None or (their_rate is not None and rate > SLOW_RATE_RATIO * their_rate):
        return None
    ratio = rate / their_rate if their_rate else None
    gain = transfer_ms * (1 - ratio) if ratio is not None else transfer_ms
    return {"kind": "link", "host": host, "ranks": sorted(by_host[host]["ranks"]), "subject": f"node {host}'s link",
            "cause": "link", "backlog_share": mine["backlog_share"], "others_backlog_share": their_share,
            "queued_bytes_mean": mine["queued_bytes_mean"],
            "others_queued_bytes_mean": statistics.median(o["queued_bytes_mean"] for o in others),
            "delivery_bytes_per_s": rate, "others_delivery_bytes_per_s": their_rate,
            "retrans_per_s": mine.get("retrans_per_s"), "samples": mine["samples"], "chance": p,
            "nodes_compared": len(by_host), "transfer_ms": transfer_ms, "gain_ms": gain,
            "gain_is_bound": ratio is None}


def _mb(x) -> str:
    return f"{x / 1e6:.1f} MB/s" if x else "?"


def evidence_text(lk: dict) -> str:
    """Why this node's link: its queues and its delivery rate against the other nodes', in numbers."""
    from .culprit import rank_span
    ranks = ("rank " if len(lk["ranks"]) == 1 else "ranks ") + rank_span(lk["ranks"])
    others = "the other node" if lk["nodes_compared"] == 2 else f"the {lk['nodes_compared'] - 1} other nodes"
    theirs = (f"{_mb(lk['others_delivery_bytes_per_s'])} on {others}" if lk["others_delivery_bytes_per_s"]
              else f"{others} never had data queued at a sample")
    retrans = f"; {lk['retrans_per_s']:.0f} TCP retransmits/s" if lk.get("retrans_per_s") else ""
    return (f"node {lk['host']} ({ranks}) had data waiting in its TCP send queues in "
            f"{100 * lk['backlog_share']:.0f}% of samples (mean {lk['queued_bytes_mean'] / 1e3:.0f} KB) against "
            f"{100 * lk['others_backlog_share']:.0f}% ({lk['others_queued_bytes_mean'] / 1e3:.0f} KB) on "
            f"{others}, and sent {_mb(lk['delivery_bytes_per_s'])} while it had "
            f"data to send against {theirs}{retrans}")


def gain_text(lk: dict) -> str:
    return f"{'up to ' if lk['gain_is_bound'] else ''}{lk['gain_ms']:.0f} ms"


def action(lk: dict) -> dict:
    """The first action when the link leads: that node's own link, with its evidence."""
    return {"title": f"Check node {lk['host']}'s network link / NIC (negotiated speed, errors, its switch port, "
                     f"other traffic on it)",
            "reason": f"the exposed transfer ({lk['transfer_ms']:.0f} ms per step) waits on node {lk['host']}'s "
                      f"link: {evidence_text(lk)}; a link as fast as the others' gives back {gain_text(lk)} per "
                      f"step",
            "fix": None}


def headline(lk: dict, label: str, exposed_share: float, steady_s: float) -> str:
    return (f"{label} (high): {100 * exposed_share:.0f}% of the {steady_s * 1e3:.1f} ms step is exposed "
            f"communication, bound by node {lk['host']}'s network link: {evidence_text(lk)}; a link as fast as the "
            f"others' shortens the step by {gain_text(lk)}.")
