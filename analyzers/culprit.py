"""The rank behind the barrier: which rank or node a data-parallel job waits for, why, and what to do about it.

Pure functions over the merge's per-rank inputs (analyzers.distributed.RankInput) and what the straggler and
outlier analyses already found. Every rank leaves the gradient sync together, so the job's step is the slowest
rank's work (step minus exposed communication) plus the transfer: a culprit is a rank, or a node of ranks, whose
work exceeds the others' and so makes everyone else wait. Its `late_ms` is that excess, a mean over the compared
steps (a pause every few steps costs its mean, not its median: nothing at the median step).

Its cause is read from its own record, in this order of evidence, the first that accounts for half its lateness:
  1. its input wait (DataLoader and host-to-device copy) above the others';
  2. its run-queue wait: the training thread's share of runnable time spent waiting for a CPU (the kernel's
     schedstat run delay, recorded per rank) times its compute time, above the others' (another process on its
     cores stretches its compute);
  3. pauses outside the training phases (garbage collection, logging, checkpointing; a sleep): its "other" time;
  4. its compute on batches of the same size (a slower or throttled device or CPU; bigger batches are data
     imbalance);
and the largest of them when none does.

What fixing it gives back is the time the others stop waiting: the first culprit alone takes the job's lateness
down to the next culprit's, all of them together to nothing.
"""
from __future__ import annotations

import math

import statistics

import numpy as np

from . import thresholds as T
from .findings import Finding

INPUT = ("dataloader", "h2d")
COMPUTE = ("forward", "backward", "optimizer")
MAX_CULPRITS = 5           # named one by one; the rest stay in the outlier list
# a rank's own findings that are its host's signs (evidence 5): NUMA placement, its links, other load on its host
HOST_KINDS = ("numa", "placement", "link", "busy-neighbour")
# The steps a pause shows in: its "other" time above the others' by at least this share of its largest excess.
PAUSE_STEP = 0.5
CAUSE_ORDER = ("input", "run-queue", "pause", "compute")


def _cols(r, n: int) -> dict:
    """ms per step of a rank's first n aligned rows: work, input, compute, other, and each row's step count."""
    if r.table is not None:
        t = r.table
        col = {c: np.asarray(t[c][:n], dtype=np.float64) for c in ("duration_ns", "allreduce", "other", *INPUT,
                                                                   *COMPUTE)}
        w = np.asarray(t["steps"][:n], dtype=np.float64) if "steps" in t else np.ones(n)
    else:
        from .step_columns import StepColumns
        st = StepColumns.of(r.steps)
        col = {"duration_ns": st.duration_ns[:n].astype(np.float64),
               **{p: st.phase(p)[:n].astype(np.float64) for p in ("allreduce", "other", *INPUT, *COMPUTE)}}
        w = np.ones(n)
    return {"work": (col["duration_ns"] - col["allreduce"]) / 1e6, "input": sum(col[p] for p in INPUT) / 1e6,
            "compute": sum(col[p] for p in COMPUTE) / 1e6, "other": col["other"] / 1e6, "w": w}


def _mean(x: np.ndarray, w: np.ndarray) -> float:
    total = float(w.sum()) if len(x) else 0.0
    return float(x @ w) / total if total > 0 else 0.0


def _rank_figures(ranks: list, n: int) -> dict:
    """rank -> mean ms per step of work/input/compute/other, run-queue ms, batch size, per-step columns."""
    out = {}
    for r in ranks:
        c = _cols(r, n)
        share = r.meta.get("cpu_wait_share")
        fig = {k: _mean(c[k], c["w"]) for k in ("work", "input", "compute", "other")}
        fig["runq"] = share * fig["compute"] if isinstance(share, (int, float)) else None
        fig["cpu_wait_share"] = share
        fig["numel"] = statistics.fmean(r.batch_numel) if r.batch_numel else None
        fig["cols"] = c
        out[r.rank] = fig
    return out


def _others(figs: dict, members: set, key: str):
    vals = [f[key] for k, f in figs.items() if k not in members and f.get(key) is not None]
    return statistics.median(vals) if vals else None


def _late(figs: dict, members: set) -> float:
    """Mean ms per step the members' work exceeds the others' (step by step: the others' median each step)."""
    others = [f["cols"]["work"] for k, f in figs.items() if k not in members]
    if not others:
        return 0.0
    typical = np.median(np.stack(others), axis=0)
    lates = [_mean(figs[k]["cols"]["work"] - typical, figs[k]["cols"]["w"]) for k in members]
    return max(0.0, float(np.median(lates)))


def _pause_steps(figs: dict, members: set) -> tuple[int, int]:
    """(steps in which the members' "other" time stands out, steps compared)."""
    others = [f["cols"]["other"] for k, f in figs.items() if k not in members]
    if not others:
        return 0, 0
    typical = np.median(np.stack(others), axis=0)
    excess = np.median(np.stack([figs[k]["cols"]["other"] for k in members]), axis=0) - typical
    top = float(excess.max()) if len(excess) else 0.0
    return (int((excess >= PAUSE_STEP * top).sum()) if top > 0 else 0), len(excess)


def cause(figs: dict, members: set, late: float) -> dict:
    """The members' cause, from their own record, in CAUSE_ORDER: {cause, excess_ms: {...}, ...}."""
    def mine(key):
        vals = [figs[k][key] for k in members if figs[k].get(key) is not None]
        return statistics.median(vals) if vals else None

    excess = {}
    for key, name in (("input", "input"), ("other", "pause"), ("compute", "compute")):
        excess[name] = (mine(key) or 0.0) - (_others(figs, members, key) or 0.0)
    runq_mine, runq_theirs = mine("runq"), _others(figs, members, "runq")
    excess["run-queue"] = (runq_mine - (runq_theirs or 0.0)) if runq_mine is not None else 0.0
    # the run-queue wait is part of the compute time it stretched: the compute left is the device's or CPU's own
    excess["compute"] -= max(0.0, excess["run-queue"])
    name = next((c for c in CAUSE_ORDER if excess[c] >= 0.5 * late > 0), max(CAUSE_ORDER, key=excess.get))
    out = {"cause": name, "excess_ms": excess, "cpu_wait_share": mine("cpu_wait_share"),
           "others_cpu_wait_share": _others(figs, members, "cpu_wait_share")}
    numel, their_numel = mine("numel"), _others(figs, members, "numel")
    if name == "compute" and numel and their_numel and numel >= (1 + T.DATA_IMBALANCE) * their_numel:
        out.update(cause="data imbalance", batch_ratio=numel / their_numel)
    if name == "pause":
        out["pause_steps"], out["steps_compared"] = _pause_steps(figs, members)
    return out


def _intermittent(ranks: list, figs: dict, step_ms: float) -> list:
    """A rank the others wait for only some steps (a pause every few steps): it arrives last in the steps that
    carry most of the waiting. Used when no rank is late at the median step."""
    if len(ranks) < 2 or step_ms <= 0:
        return []
    work = np.stack([figs[r.rank]["cols"]["work"] for r in ranks])
    w = figs[ranks[0].rank]["cols"]["w"]
    skew = work.max(axis=0) - np.median(work, axis=0)
    if _mean(skew, w) < T.STRAGGLER_SKEW_SHARE * step_ms:
        return []
    blame = np.bincount(work.argmax(axis=0), weights=skew * w, minlength=len(ranks))
    top = int(blame.argmax())
    if blame[top] < T.STRAGGLER_CONSISTENCY * blame.sum():
        return []
    return [{"rank": ranks[top].rank, "host": ranks[top].meta.get("host"),
             "local_rank": ranks[top].meta.get("local_rank")}]


def host_signs(summaries: dict) -> dict:
    """rank -> its host's own signs (evidence 5: throttling, NIC, NUMA, a busy neighbour), from the rank's summary:
    {"numa": message, ..., "throttle": "GPU 0: hw_slowdown"}."""
    out = {}
    for rank, s in summaries.items():
        signs = {f["kind"]: f.get("message", "") for f in s.get("findings") or [] if f.get("kind") in HOST_KINDS}
        gpus = ((s.get("hardware") or {}).get("gpu") or {})
        throttled = [f"GPU {i}: {', '.join(g['throttle_reasons_seen'])}" for i, g in gpus.items()
                     if isinstance(g, dict) and g.get("throttle_reasons_seen")]
        if throttled:
            signs["throttle"] = "; ".join(throttled)
        out[rank] = signs
    return out


def _own_signs(signs: dict, members: set) -> dict:
    """The members' host signs that the other ranks do not show (one of theirs explains nothing of the gap)."""
    mine = {k: v for m in members for k, v in (signs.get(m) or {}).items()}
    theirs = {k for r, s in signs.items() if r not in members for k in s}
    return {k: v for k, v in mine.items() if k not in theirs}


def culprits(ranks: list, slow: list, spread: dict, steady_s: float | None, signs: dict | None = None) -> list[dict]:
    """The ranks and nodes the job waits for, slowest first, each with its lateness, cause and what fixing it
    alone gives back: [{kind: rank|node, subject, ranks, host, late_ms, gain_ms, cause...}]. `signs`: host_signs
    of the ranks' summaries (its host's throttling, NIC, NUMA), quoted with a compute cause."""
    n = min((len(r.table["duration_ns"]) if r.table is not None else len(r.steps) for r in ranks), default=0)
    if len(ranks) < 2 or n == 0 or not steady_s:
        return []
    figs = _rank_figures(ranks, n)
    step_ms = steady_s * 1e3
    found = [{"kind": "node", "host": nd["host"], "ranks": list(nd["slow_ranks"]),
              "ranks_on_node": nd["ranks_on_node"]} for nd in spread.get("nodes", [])]
    named = {k for c in found for k in c["ranks"]}
    singles = [s for s in slow if s["rank"] not in named]
    singles += [s for s in spread.get("ranks", []) if s["rank"] not in named | {x["rank"] for x in singles}]
    if not found and not singles:
        singles = _intermittent(ranks, figs, step_ms)
    found += [{"kind": "rank", "host": s.get("host"), "ranks": [s["rank"]], "local_rank": s.get("local_rank"),
               **({"arrival": True} if s in slow else {})} for s in singles]
    for c in found:
        members = set(c["ranks"]) & set(figs)
        c["late_ms"] = _late(figs, members) if members else 0.0
        c["subject"] = f"node {c['host']}" if c["kind"] == "node" else f"rank {c['ranks'][0]}"
        c.update(cause(figs, members, c["late_ms"]) if members else {"cause": "other", "excess_ms": {}})
        c["host_signs"] = _own_signs(signs or {}, members)
        if c.pop("arrival", False):   # named by last arrivals over a few steps: is it more than noise?
            c["chance"] = chance_late(_lateness(figs, members), len(ranks))
    found = sorted((c for c in found if c["late_ms"] >= T.OUTLIER_MIN_SHARE * step_ms),
                   key=lambda c: -c["late_ms"])[:MAX_CULPRITS]
    for i, c in enumerate(found):   # alone: the first takes the job down to the next one's lateness
        nxt = found[i + 1]["late_ms"] if i + 1 < len(found) else 0.0
        c["gain_ms"] = c["late_ms"] - nxt if i == 0 else 0.0
        c["gain_share"] = c["gain_ms"] / step_ms
        c["late_share"] = c["late_ms"] / step_ms
        # graded as exposed communication is: the others' wait is a share of their step
        c["severity"] = ("high" if c["late_share"] >= T.COMM_HIGH else
                         "moderate" if c["late_share"] >= T.COMM_MODERATE else "low")
        c["action"] = action(c)
    return found


def _who(c: dict) -> str:
    if c["kind"] == "node":
        return f"node {c['host']}'s {len(c['ranks'])} slow ranks ({rank_span(c['ranks'])})"
    where = [x for x in (c.get("host"), None if c.get("local_rank") is None else f"local rank {c['local_rank']}")
             if x]
    return f"rank {c['ranks'][0]}" + (f" ({', '.join(where)})" if where else "")


def because(c: dict) -> str:
    """The cause in the culprit's own numbers: one clause."""
    x, who = c.get("excess_ms") or {}, _who(c)
    poss = "their" if c["kind"] == "node" else "its"
    if c["cause"] == "input":
        return f"{poss} DataLoader waits {x['input']:.0f} ms per step longer than the other ranks'"
    if c["cause"] == "run-queue":
        return (f"another process shares {poss} CPU cores: {poss} training thread waited {x['run-queue']:.0f} "
                f"ms per step more for a CPU than the other ranks' (run-queue wait "
                f"{100 * (c.get('cpu_wait_share') or 0):.0f}% of its runnable time, the others' "
                f"{100 * (c.get('others_cpu_wait_share') or 0):.0f}%)")
    if c["cause"] == "pause":
        steps = (f", in {c['pause_steps']} of {c['steps_compared']} steps" if c.get("steps_compared") else "")
        return (f"{poss} pauses outside the training phases (garbage collection, logging, a sleep) take "
                f"{x['pause']:.0f} ms per step more than the other ranks'{steps}")
    if c["cause"] == "data imbalance":
        return f"{poss} batches are {c['batch_ratio']:.2f}x the other ranks'"
    if c["cause"] == "compute":
        host = c.get("host_signs") or {}
        seen = ("; its host shows what the others' do not: " + "; ".join(f"{k}: {v[:120]}" for k, v in host.items())
                if host else "")
        return (f"{poss} compute takes {x['compute']:.0f} ms per step longer than the other ranks' on batches of the "
                f"same size, with no more run-queue wait{seen}")
    return f"{who} spends {c['late_ms']:.0f} ms per step more before the gradient sync"


TITLES = {
    "input": ("More DataLoader workers on {who} (num_workers, prefetching), or check {host}'s storage",
              "prefetch"),
    "run-queue": ("Move the other process off {who}'s CPU cores, or pin {who} to cores of its own", None),
    "pause": ("Find what {who} does between steps: gc.freeze() after set-up, or logging and checkpoints off "
              "that rank's step", None),
    "data imbalance": ("Even out {who}'s batch sizes (a sampler that balances the shards)", None),
    "compute": ("Check {host}: clock throttling, a slower or shared device, NUMA placement of {who}", None),
    "other": ("Look at what {who} does outside the measured phases", None),
}


def action(c: dict) -> dict:
    """The culprit's own action: title, reason, fix id (or None: advice with no haiprof fix)."""
    who = c["subject"] if c["kind"] == "rank" else f"node {c['host']}"
    title, fix = TITLES.get(c["cause"], TITLES["other"])
    host = c.get("host") or "its host"
    reason = f"the other ranks wait {c['late_ms']:.0f} ms per step for {_who(c)}: {because(c)}"
    if not c["gain_ms"]:
        reason += " (once the slower ones ahead of it are fixed)"
    return {"title": title.format(who=who, host=host), "reason": reason, "fix": fix}


def finding(c: dict, order: int, steady_s: float) -> dict:
    """The culprit as a straggler finding: share = what fixing it alone gives back."""
    return Finding(kind="straggler", severity=c["severity"], share=c["gain_share"],
                   message=f"the other ranks wait {c['late_ms']:.0f} ms per step ({100 * c['late_share']:.0f}% of the "
                           f"{steady_s * 1e3:.1f} ms step) for {_who(c)}: {because(c)}",
                   evidence={**c, "culprit_order": order,
                             "steady_step_s": steady_s},
                   fixes=[c["action"]["fix"]] if c["action"]["fix"] else []).as_dict()


def chance_late(late: np.ndarray, world: int) -> float:
    """How likely lock-step noise alone makes some rank this late: a one-sided sign-flip (randomisation) test of
    its per-step lateness behind the others (exact up to 16 steps, normal beyond), times the world size (any rank
    could have been the one). Few steps cannot reach significance: 4 steps at best 1/16 per rank."""
    d = np.asarray(late, dtype=np.float64)
    d = d[np.isfinite(d)]
    n = len(d)
    if n == 0 or float(d.sum()) <= 0:
        return 1.0
    if n <= 16:
        signs = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        p = float(((signs * np.abs(d)).sum(axis=1) >= float(d.sum()) - 1e-9).mean())
    else:
        p = 0.5 * math.erfc(float(d.sum()) / math.sqrt(float((d * d).sum())) / math.sqrt(2))
    return min(1.0, max(world, 1) * p)


def _lateness(figs: dict, members: set) -> np.ndarray:
    """The members' work minus the others' median, step by step (ms)."""
    others = [f["cols"]["work"] for k, f in figs.items() if k not in members]
    mine = [figs[k]["cols"]["work"] for k in members if k in figs]
    if not others or not mine:
        return np.zeros(0)
    return np.median(np.stack(mine), axis=0) - np.median(np.stack(others), axis=0)


def leads(found: list, removable_share: float) -> dict | None:
    """The culprit the job's verdict names: the slowest, when the others' wait for it is graded high (as a class
    must be to be the verdict), is at least what the class verdict's fix can remove (`removable_share`), and its
    lateness is more than noise gives over a few steps (chance_late; its finding stays, the verdict does not
    follow it)."""
    top = found[0] if found else None
    if not top or top["severity"] != "high" or top["late_share"] < removable_share:
        return None
    chance = top.get("chance")
    return top if chance is None or chance < T.CULPRIT_CHANCE else None


def job_bottleneck(top: dict) -> str:
    """The class of what fixing the culprit removes: input when it waits for its input (the job is bound by that
    rank's or node's input pipeline); else communication, the others' waiting at the sync, with the culprit as
    its subject (a rank's CPU, pauses or compute are no class of their own: the enum stays)."""
    return "io" if top["cause"] == "input" else "communication"


def headline(found: list, bottleneck: str, steady_s: float) -> str:
    """One sentence: who the job waits for, how much of the steady step, why, and what the first fix gives back."""
    from .verdict import LABEL
    top = found[0]
    rest = "".join(f"; then {_who(c)} (+{c['late_ms']:.0f} ms per step): {because(c)}" for c in found[1:3])
    gain = f"{top['gain_ms']:.1f} ms" if len(found) > 1 else f"up to {top['gain_ms']:.1f} ms"
    return (f"{LABEL[bottleneck]} (high): the other ranks waited for {_who(top)} {100 * top['late_share']:.0f}% "
            f"of the {steady_s * 1e3:.1f} ms step: {because(top)}{rest}; fixing {top['subject']} shortens the step by "
            f"{gain}.")


def rank_span(ranks: list) -> str:
    """3, 4, 5, 6, 9 -> '3-6, 9'."""
    ranks, out, i = sorted(ranks), [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)
