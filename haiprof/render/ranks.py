"""The "Ranks" panel of a distributed run: hosts and ranks, per-rank phases, step-time spread, communication."""
from __future__ import annotations

from . import charts, rank_charts
from .escape import esc as _esc

PHASES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other")


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


def _row(r: dict) -> str:
    share = r.get("phase_share") or {}
    where = f"{r.get('host') or '?'} · node {r.get('node_rank', '?')} · local {r.get('local_rank', '?')}"
    status = f"{r.get('status')}" + (f" ({r.get('exit_code')})" if r.get("exit_code") not in (0, None) else "")
    work = (r.get("medians_ms") or {}).get("work_ms")
    cells = [r["rank"], where, status, r.get("steps"),
             f"{_ms(r.get('step_time_median_s'))} / {_ms(r.get('step_time_p90_s'))}",
             "" if work is None else f"{work:.1f}"] + \
            [_pct(share.get(p)) if share else "" for p in PHASES] + \
            [f"{r.get('source')}: {r['dir']}" if r.get("dir") else r.get("source")]
    cls = "" if r.get("status") in ("ok", "elsewhere") else ' class="warn"'
    return f"<tr{cls}>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>"


def _table(rows: list, table_id: str) -> str:
    head = "".join(f"<th>{h}</th>" for h in HEAD)
    return (f'<div class="scroll-x"><table class="grid" id="{table_id}"><tr>{head}</tr>'
            f'{"".join(_row(r) for r in rows)}</table></div>')


def _tables(dist: dict) -> str:
    """Every rank when there are few; else the outliers and the ranks with problems, the rest a click away."""
    rows = dist["ranks"]
    if len(rows) <= FULL_TABLE:
        return _table(rows, "rank-table")
    out = dist.get("outliers") or {}
    named = {r["rank"] for r in out.get("ranks", [])} | {k for n in out.get("nodes", []) for k in n["slow_ranks"]}
    named |= {s["rank"] for s in dist.get("stragglers", [])} | {p["rank"] for p in dist.get("problems", [])}
    picked = [r for r in rows if r["rank"] in named]
    note = (f"<p>The {len(picked)} rank(s) named above (outliers, stragglers, failures); all {len(rows)} ranks "
            f"below.</p>" if picked else f"<p>No outlier rank among the {len(rows)}.</p>")
    return (note + (_table(picked, "rank-table") if picked else "") +
            f'<details id="rank-table-all"><summary>All {len(rows)} ranks</summary>{_table(rows, "rank-table-full")}'
            f"</details>")


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


def _nodes(dist: dict) -> str:
    nodes = dist.get("nodes") or []
    if not nodes:
        return ""
    slow = {n["host"]: n for n in (dist.get("outliers") or {}).get("nodes", [])}
    rows = []
    for n in nodes:
        s = slow.get(n["host"])
        cells = [n["host"], n.get("node_rank", ""), len(n["ranks"]), _ms(n.get("step_time_median_s")),
                 f"slow: +{s['excess_ms']:.0f} ms/step before the sync ({s['cause']})" if s else "",
                 _links_text(n.get("links") or {})]
        cls = ' class="warn"' if s else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("host", "node", "ranks", "median step ms", "slow node",
                                            "network (per node, its first rank's sampler)"))
    table = f'<div class="scroll-x"><table class="grid" id="node-table"><tr>{head}</tr>{"".join(rows)}</table></div>'
    if len(nodes) > FULL_TABLE:   # the slow nodes first; the rest a click away
        picked = [r for n, r in zip(nodes, rows) if n["host"] in slow]
        return ((f'<div class="scroll-x"><table class="grid" id="node-table-slow"><tr>{head}</tr>{"".join(picked)}'
                 f"</table></div>" if picked else "") +
                f"<details id='nodes-all'><summary>All {len(nodes)} nodes</summary>{table}</details>")
    return table


def _outliers(dist: dict) -> str:
    out = dist.get("outliers") or {}
    parts = []
    for n in out.get("nodes", []):
        parts.append(f'<li class="warn">Slow node <b>{_esc(n["host"])}</b> (node {_esc(n.get("node_rank"))}): '
                     f'{len(n["slow_ranks"])} of its {n["ranks_on_node"]} ranks, +{n["excess_ms"]:.0f} ms per step '
                     f'before the sync, cause {_esc(n["cause"])}</li>')
    for r in out.get("ranks", [])[:10]:
        parts.append(f'<li class="warn">Slow rank <b>{r["rank"]}</b> ({_esc(r["host"])}, local rank '
                     f'{_esc(r["local_rank"])}): +{r["excess_ms"]:.0f} ms per step before the sync, cause '
                     f'{_esc(r["cause"])}</li>')
    if len(out.get("ranks", [])) > 10:
        parts.append(f"<li>{len(out['ranks']) - 10} more slow rank(s) in the table</li>")
    if "limit_ms" in out:
        parts.append(f"<li class='note'>Outlier: more than {out['limit_ms']:.1f} ms per step before the gradient "
                     f"sync (the ranks' median {out['median_work_ms']:.1f} ms, robust sigma "
                     f"{out['robust_sigma_ms']:.2f} ms); a node with half its ranks or more slow is named as the "
                     f"node.</li>")
    return f'<ul id="rank-outliers">{"".join(parts)}</ul>' if parts else ""


def section_ranks(d, figs) -> str:
    dist = d.summary.get("distributed")
    if not dist:
        return ""
    hosts = dist.get("hosts", {})
    if len(hosts) <= 8:
        where = "; ".join(f"{_esc(h)}: ranks {', '.join(map(str, rs))}" for h, rs in hosts.items()) or "n/a"
    else:
        where = f"{len(hosts)} hosts, {max(len(v) for v in hosts.values())} ranks on the largest"
    parts = [f'<section id="ranks"><h3>Ranks</h3><p>{dist["world_size"]} rank(s). Hosts: {where}</p>',
             _outliers(dist), _tables(dist)]
    for p in dist.get("problems", [])[:20]:
        parts.append(f'<p class="warn">{_esc(p["message"])}</p>')
    sp = dist.get("step_time_spread") or {}
    if sp:
        parts.append(f"<p>Step-time spread: rank {sp['fastest_rank']} {_ms(sp['fastest_median_s'])} ms to rank "
                     f"{sp['slowest_rank']} {_ms(sp['slowest_median_s'])} ms median ({_pct(sp['spread'])}).</p>")
    c = dist.get("comm") or {}
    if "exposed_share" in c:
        w = c.get("wait_ms_per_step", {})
        if len(w) <= 8:
            waits = ", ".join(f"rank {k} {v:.1f} ms" for k, v in w.items())
        else:
            vals = sorted(w.values())
            waits = f"median rank {vals[len(vals) // 2]:.1f} ms, most {vals[-1]:.1f} ms"
        parts.append(f"<p>Exposed communication {_pct(c['exposed_share'])} of step time: transfer "
                     f"{_pct(c['transfer_share'])} ({c['transfer_ms_per_step']:.1f} ms/step), waiting for the "
                     f"slowest rank {_pct(c['skew_share'])} ({_esc(waits)}).</p>")
    ddp = dist.get("ddp")
    if ddp:
        # FSDP's all-gathers overlap forward as well as backward: say "compute", and name what measured it
        who, with_what = ("FSDP collectives", "compute") if ddp.get("framework") == "FSDP" else ("DDP reducer",
                                                                                                  "backward")
        parts.append(f"<p>{who}: {ddp['comm_ms']:.1f} ms communication per step, {ddp['overlap_ms']:.1f} ms "
                     f"of it overlapped with {with_what}: {_pct(ddp['exposed_fraction'])} exposed.</p>")
    for s in dist.get("stragglers", []):
        parts.append(f'<p class="warn">Straggler: rank {s["rank"]} ({_esc(s["host"])}): {_esc(s["reason"])}</p>')
    if dist.get("gather"):
        g = dist["gather"].get("ranks", {})
        kinds: dict = {}
        for k, v in g.items():
            kinds.setdefault(str(v).split(" (")[0], []).append(k)
        text = ", ".join(f"rank {k}: {v}" for k, v in g.items()) if len(g) <= 8 else \
            "; ".join(f"{how}: {len(ks)} rank(s)" for how, ks in kinds.items())
        parts.append("<p class='note'>Data from other ranks: " + _esc(text or "n/a") + "</p>")
    grid = getattr(d, "ranks_grid", None) or {}
    if len(dist["ranks"]) <= BAR_CHART and any(r.get("phase_share") for r in dist["ranks"]):
        figs["ranks"] = spread_chart(dist["ranks"])
        parts.append('<div class="chart" id="fig-ranks"></div>')
    if len(dist["ranks"]) > BAR_CHART or len(grid.get("ranks") or []) >= 3:
        dists = rank_charts.distributions(grid.get("per_rank") or [])
        heats = rank_charts.heatmaps(grid)
        figs.update(dists)
        figs.update(heats)
        parts.append('<div class="rank-dists">' + "".join(f'<div class="chart" id="fig-{k}"></div>' for k in dists)
                     + "</div>")
        parts.append("".join(f'<div class="chart heatmap" id="fig-{k}"></div>' for k in heats))
    parts.append(_nodes(dist))
    ref = dist.get("reference_rank")
    if ref is not None:
        parts.append(f"<p class='note'>Step and utilization charts below show rank {ref}.</p>")
    return "".join(parts) + "</section>"
