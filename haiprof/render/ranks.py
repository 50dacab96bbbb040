"""The "Ranks" panel of a distributed run: hosts and ranks, per-rank phases, step-time spread, communication."""
from __future__ import annotations

from . import charts
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


def section_ranks(d, figs) -> str:
    dist = d.summary.get("distributed")
    if not dist:
        return ""
    rows_html = []
    for r in dist["ranks"]:
        share = r.get("phase_share") or {}
        where = f"{r.get('host') or '?'} · node {r.get('node_rank', '?')} · local {r.get('local_rank', '?')}"
        status = f"{r.get('status')}" + (f" ({r.get('exit_code')})" if r.get("exit_code") not in (0, None) else "")
        cells = [r["rank"], where, status, r.get("steps"),
                 f"{_ms(r.get('step_time_median_s'))} / {_ms(r.get('step_time_p90_s'))}"] + \
                [_pct(share.get(p)) if share else "" for p in PHASES] + \
                [f"{r.get('source')}: {r['dir']}" if r.get("dir") else r.get("source")]
        cls = "" if r.get("status") == "ok" else ' class="warn"'
        rows_html.append(f"<tr{cls}>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ["rank", "host · node · local rank", "status", "steps",
                                            "median / p90 ms", *(SHORT[p] for p in PHASES),
                                            "data via: directory on its host"])
    hosts = "; ".join(f"{_esc(h)}: ranks {', '.join(map(str, rs))}" for h, rs in dist.get("hosts", {}).items())
    parts = [f'<section id="ranks"><h3>Ranks</h3><p>{dist["world_size"]} rank(s). Hosts: {hosts or "n/a"}</p>',
             f'<div class="scroll-x"><table class="grid" id="rank-table"><tr>{head}</tr>{"".join(rows_html)}'
             f'</table></div>']
    for p in dist.get("problems", []):
        parts.append(f'<p class="warn">{_esc(p["message"])}</p>')
    sp = dist.get("step_time_spread") or {}
    if sp:
        parts.append(f"<p>Step-time spread: rank {sp['fastest_rank']} {_ms(sp['fastest_median_s'])} ms to rank "
                     f"{sp['slowest_rank']} {_ms(sp['slowest_median_s'])} ms median ({_pct(sp['spread'])}).</p>")
    c = dist.get("comm") or {}
    if "exposed_share" in c:
        waits = ", ".join(f"rank {k} {v:.1f} ms" for k, v in c.get("wait_ms_per_step", {}).items())
        parts.append(f"<p>Exposed communication {_pct(c['exposed_share'])} of step time: transfer "
                     f"{_pct(c['transfer_share'])} ({c['transfer_ms_per_step']:.1f} ms/step), waiting for the "
                     f"slowest rank {_pct(c['skew_share'])} ({_esc(waits)}).</p>")
    ddp = dist.get("ddp")
    if ddp:
        parts.append(f"<p>DDP reducer: {ddp['comm_ms']:.1f} ms communication per step, {ddp['overlap_ms']:.1f} ms "
                     f"of it overlapped with backward: {_pct(ddp['exposed_fraction'])} exposed.</p>")
    for s in dist.get("stragglers", []):
        parts.append(f'<p class="warn">Straggler: rank {s["rank"]} ({_esc(s["host"])}): {_esc(s["reason"])}</p>')
    if dist.get("gather"):
        g = dist["gather"].get("ranks", {})
        parts.append("<p class='note'>Data from other ranks: " + _esc(", ".join(f"rank {k}: {v}" for k, v in g.items())
                                                                   or "n/a") + "</p>")
    if any(r.get("phase_share") for r in dist["ranks"]):
        figs["ranks"] = spread_chart(dist["ranks"])
        parts.append('<div class="chart" id="fig-ranks"></div>')
    ref = dist.get("reference_rank")
    if ref is not None:
        parts.append(f"<p class='note'>Step and utilization charts below show rank {ref}.</p>")
    return "".join(parts) + "</section>"
