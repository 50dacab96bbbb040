"""The "Ranks" panel of a distributed run: hosts and ranks, per-rank phases, step-time spread, communication."""
from __future__ import annotations

from . import charts, rank_charts
from .escape import render

from ..rundir.vocabulary import ALL_PHASES as PHASES


def _ms(s) -> str:
    return "" if s is None else f"{s * 1e3:.1f}"


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:.0f}%"


SHORT = {"dataloader": "load", "h2d": "h2d", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
         "allreduce": "comm", "other": "other"}


def spread_chart(rows: list) -> dict:
    """Per-rank median step by phase, in the phase colours of every other chart of the page."""
    ok = [r for r in rows if r.get("phase_share")]
    data = [{"type": "bar", "name": p, "x": [f"rank {r['rank']}" for r in ok],
             "y": [r["phase_share"][p] * (r.get("step_time_median_s") or 0) * 1e3 for r in ok],
             "marker": {"color": charts.PHASE_COLORS[p]}}
            for p in PHASES if any(r["phase_share"].get(p) for r in ok)]
    return {"data": data, "layout": charts._layout("Median step per rank, by phase", "ms", barmode="stack")}


FULL_TABLE = 16        # up to this many ranks the table lists every rank; beyond, the outliers (rest in <details>)
BAR_CHART = 32         # a bar per rank up to this many ranks; beyond, distributions and heatmaps
HEAD = ["rank", "host · node · local rank", "status", "steps", "median / p90 ms", "before sync ms",
        *(SHORT[p] for p in PHASES), "data via: directory on its host"]


def _row(r: dict) -> dict:
    share = r.get("phase_share") or {}
    where = f"{r.get('host') or '?'} · node {r.get('node_rank', '?')} · local {r.get('local_rank', '?')}"
    status = f"{r.get('status')}" + (f" ({r.get('exit_code')})" if r.get("exit_code") not in (0, None) else "")
    work = (r.get("medians_ms") or {}).get("work_ms")
    cells = [r["rank"], where, status, r.get("steps"),
             f"{_ms(r.get('step_time_median_s'))} / {_ms(r.get('step_time_p90_s'))}",
             "" if work is None else f"{work:.1f}"] + \
            [_pct(share.get(p)) if share else "" for p in PHASES] + \
            [f"{r.get('source')}: {r['dir']}" if r.get("dir") else r.get("source")]
    return {"cells": cells, "warn": r.get("status") not in ("ok", "elsewhere")}


def _tables(dist: dict) -> dict:
    """Every rank when there are few; else the outliers and the ranks with problems, the rest a click away."""
    rows = dist["ranks"]
    every = [_row(r) for r in rows]
    if len(rows) <= FULL_TABLE:
        return {"head": HEAD, "every": every, "full": False, "picked": []}
    out = dist.get("outliers") or {}
    named = {r["rank"] for r in out.get("ranks", [])} | {k for n in out.get("nodes", []) for k in n["slow_ranks"]}
    named |= {s["rank"] for s in dist.get("stragglers", [])} | {p["rank"] for p in dist.get("problems", [])}
    picked = [row for r, row in zip(rows, every) if r["rank"] in named]
    return {"head": HEAD, "every": every, "full": True, "picked": picked}


def _links_text(links: dict) -> str:
    parts = []
    for group, label in (("infiniband", "IB"), ("nic", "NIC")):
        for port, v in (links.get(group) or {}).items():
            cap = f" of {v['rate_gbps']:.0f} Gb/s" if v.get("rate_gbps") else \
                f" of {v['speed_mbps'] / 1000:.0f} Gb/s" if v.get("speed_mbps") else ""
            tx, rx = v.get("tx_bytes_per_s_mean"), v.get("rx_bytes_per_s_mean")
            peak = v.get("peak_share_of_capacity")
            parts.append(f"{label} {port}: tx {(tx or 0) / 1e6:.1f} rx {(rx or 0) / 1e6:.1f} MB/s{cap}"
                         + (f", peak {100 * peak:.0f}%" if peak is not None else ""))
    return "; ".join(parts) or "no IB/NIC samples"


def _nodes(dist: dict) -> dict | None:
    nodes = dist.get("nodes") or []
    if not nodes:
        return None
    slow = {n["host"]: n for n in (dist.get("outliers") or {}).get("nodes", [])}
    rows = []
    for n in nodes:
        s = slow.get(n["host"])
        rows.append({"warn": bool(s), "cells": [
            n["host"], n.get("node_rank", ""), len(n["ranks"]), _ms(n.get("step_time_median_s")),
            f"slow: +{s['excess_ms']:.0f} ms/step before the sync ({s['cause']})" if s else "",
            _links_text(n.get("links") or {})]})
    head = ("host", "node", "ranks", "median step ms", "slow node", "network (per node, its first rank's sampler)")
    return {"head": head, "every": rows, "fold": len(nodes) > FULL_TABLE,   # beyond: the slow nodes first
            "slow": [r for n, r in zip(nodes, rows) if n["host"] in slow]}


def _outliers(dist: dict) -> tuple[list, dict | None]:
    """The slow nodes and ranks named, and the limit that makes an outlier."""
    out = dist.get("outliers") or {}
    items = [{"kind": "node", "node": n["host"], "node_rank": n.get("node_rank"), "slow": len(n["slow_ranks"]),
              "on_node": n["ranks_on_node"], "excess": f"{n['excess_ms']:.0f}", "cause": n["cause"]}
             for n in out.get("nodes", [])]
    items += [{"kind": "rank", "rank": r["rank"], "host": r["host"], "local_rank": r["local_rank"],
               "excess": f"{r['excess_ms']:.0f}", "cause": r["cause"]} for r in out.get("ranks", [])[:10]]
    if len(out.get("ranks", [])) > 10:
        items.append({"kind": "more", "more": len(out["ranks"]) - 10})
    limit = None
    if "limit_ms" in out:
        limit = {"limit": f"{out['limit_ms']:.1f}", "median": f"{out['median_work_ms']:.1f}",
                 "sigma": f"{out['robust_sigma_ms']:.2f}"}
    return items, limit


def _paragraphs(dist: dict) -> list[tuple[str, str]]:
    """(class, text) of each sentence under the tables: problems, spread, communication, stragglers, gather."""
    out = [("warn", p["message"]) for p in dist.get("problems", [])[:20]]
    sp = dist.get("step_time_spread") or {}
    if sp and sp["fastest_rank"] == sp["slowest_rank"]:   # one rank with steps: nothing to spread
        out.append(("", f"Step time: rank {sp['fastest_rank']} {_ms(sp['fastest_median_s'])} ms median, the only "
                        f"rank with steps."))
    elif sp:
        out.append(("", f"Step-time spread: rank {sp['fastest_rank']} {_ms(sp['fastest_median_s'])} ms to rank "
                        f"{sp['slowest_rank']} {_ms(sp['slowest_median_s'])} ms median ({_pct(sp['spread'])})."))
    c = dist.get("comm") or {}
    if "exposed_share" in c:
        w = c.get("wait_ms_per_step", {})
        if len(w) <= 8:
            waits = ", ".join(f"rank {k} {v:.1f} ms" for k, v in w.items())
        else:
            vals = sorted(w.values())
            waits = f"median rank {vals[len(vals) // 2]:.1f} ms, most {vals[-1]:.1f} ms"
        out.append(("", f"Exposed communication {_pct(c['exposed_share'])} of step time: transfer "
                        f"{_pct(c['transfer_share'])} ({c['transfer_ms_per_step']:.1f} ms/step), waiting for the "
                        f"slowest rank {_pct(c['skew_share'])} ({waits})."))
    ddp = dist.get("ddp")
    if ddp:
        # FSDP's all-gathers overlap forward as well as backward: say "compute", and name what measured it
        who, with_what = ("FSDP collectives", "compute") if ddp.get("framework") == "FSDP" else ("DDP reducer",
                                                                                                  "backward")
        # its own timers, pooled over the ranks: the exposed figure above is the mean over ranks too
        out.append(("", f"{who}: {ddp['comm_ms']:.1f} ms communication per step (its own timers, mean over "
                        f"ranks), {ddp['overlap_ms']:.1f} ms of it overlapped with {with_what}: "
                        f"{_pct(ddp['exposed_fraction'])} exposed, {ddp['comm_ms'] - ddp['overlap_ms']:.1f} ms."))
    culprits = dist.get("culprits") or []   # analyzers/culprit.py: who the others wait for, slowest first
    out += [("warn", f"The other ranks wait for {c['subject']}: {c['late_ms']:.0f} ms per step "
                     f"({100 * c['late_share']:.0f}% of the step), cause: {c['cause']}") for c in culprits]
    lk = dist.get("slow_link")   # analyzers/slow_link.py: the node whose link the transfer waits on
    if lk:
        out.append(("warn", f"The transfer waits on node {lk['host']}'s link: {lk['backlog_share'] * 100:.0f}% of "
                            f"samples with data queued to send (the other nodes "
                            f"{lk['others_backlog_share'] * 100:.0f}%), {lk['delivery_bytes_per_s'] / 1e6:.1f} MB/s "
                            f"while it had data to send."))
    named = {k for c in culprits for k in c["ranks"]}
    out += [("warn", f"Straggler: rank {s['rank']} ({s['host']}): {s['reason']}") for s in dist.get("stragglers", [])
            if s["rank"] not in named]
    if dist.get("gather"):
        g = dist["gather"].get("ranks", {})
        kinds: dict = {}
        for k, v in g.items():
            kinds.setdefault(str(v).split(" (")[0], []).append(k)
        text = ", ".join(f"rank {k}: {v}" for k, v in g.items()) if len(g) <= 8 else \
            "; ".join(f"{how}: {len(ks)} rank(s)" for how, ks in kinds.items())
        out.append(("note", "Data from other ranks: " + (text or "n/a")))
    return out


# A job's page draws the reference rank's own steps and samples, and the ranks' mean phase shares: each chart says
# whose figures it shows.
REFERENCE_FIGS = ("steps", "host-steps", "cpu", "cpu-host", "mem", "io")


def label_populations(d, figs: dict) -> None:
    """On a job's page, every chart outside the Ranks panel names its population: the mean over the ranks (the
    phase shares) or the reference rank (steps and utilization)."""
    dist = d.summary.get("distributed")
    if not dist:
        return
    counted = sum(1 for r in dist.get("ranks", []) if r.get("phase_share"))
    ref = dist.get("reference_rank")
    suffix = {"share": f" (mean over {counted} ranks)"} if counted else {}
    if ref is not None:
        suffix.update({k: f" (rank {ref})" for k in REFERENCE_FIGS})
    for key, text in suffix.items():
        title = ((figs.get(key) or {}).get("layout") or {}).get("title")
        if isinstance(title, dict) and text not in title.get("text", ""):
            title["text"] = title.get("text", "") + text


def section_ranks(d, figs) -> str:
    dist = d.summary.get("distributed")
    if not dist:
        return ""
    hosts = dist.get("hosts", {})
    if len(hosts) <= 8:
        where = "; ".join(f"{h}: ranks {', '.join(map(str, rs))}" for h, rs in hosts.items()) or "n/a"
    else:
        where = f"{len(hosts)} hosts, {max(len(v) for v in hosts.values())} ranks on the largest"
    grid = getattr(d, "ranks_grid", None) or {}
    charts_shown = {"bars": False, "dists": None, "heats": []}
    if len(dist["ranks"]) <= BAR_CHART and any(r.get("phase_share") for r in dist["ranks"]):
        figs["ranks"] = spread_chart(dist["ranks"])
        charts_shown["bars"] = True
    if len(dist["ranks"]) > BAR_CHART or len(grid.get("ranks") or []) >= 3:
        dists = rank_charts.distributions(grid.get("per_rank") or [])
        heats = rank_charts.heatmaps(grid)
        figs.update(dists)
        figs.update(heats)
        charts_shown.update(dists=list(dists), heats=list(heats))
    outliers, limit = _outliers(dist)
    return render("ranks.html.j2", "section", world=dist["world_size"], where=where, outliers=outliers, limit=limit,
                  ranks=_tables(dist), nodes=_nodes(dist), paragraphs=_paragraphs(dist), charts=charts_shown,
                  reference=dist.get("reference_rank"))
