"""Report panel for the op-level trace: ops per step, op self-time distribution, tiny vs compute-heavy share,
the top ops and, on GPU traces, kernels and GPU idle time. Every name from the trace is escaped."""
from __future__ import annotations

from . import charts
from .escape import render

TEMPLATE = "ops.html.j2"

SHARE_PARTS = (  # (summary key, label, colour); they add up to the traced step
    ("heavy_share", "compute-heavy ops (matmul/conv/attention)", "#4c78a8"),
    ("other_op_share", "other ops (not tiny)", "#72b7b2"),
    ("dataloader_share", "waiting for input (DataLoader)", "#e45756"),
    ("framework_share", "framework overhead (tiny ops + Python between ops)", "#f58518"),
)


def _layout(title: str, xtitle: str, ytitle: str, **extra) -> dict:
    layout = {"title": {"text": charts.safe_text(title)}, "height": 300, "template": None,
              "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "xaxis": {"title": {"text": xtitle}},
              "yaxis": {"title": {"text": ytitle}}, "legend": {"orientation": "h"},
              "meta": {"unit": ytitle or xtitle}}   # what hover values are in (charts.with_hover)
    layout.update(extra)
    return layout


def _bin_label(b: dict) -> str:
    return f"≥ {b['lo_us']:g} µs" if b["hi_us"] is None else f"{b['lo_us']:g}–{b['hi_us']:g} µs"


def histogram_chart(bins: list, title: str, what: str) -> dict:
    """Total time per duration bin (one quantity on the axis), the count of each bin written on its bar: many
    cheap ops and a few expensive ones read differently."""
    bins = [b for b in bins if b["count"]]
    labels = [_bin_label(b) for b in bins]
    return {"data": [{"type": "bar", "name": "total time (ms)", "x": labels, "y": [b["total_us"] / 1e3 for b in bins],
                      "text": [f"{b['count']}×" for b in bins], "marker": {"color": "#4c78a8"}}],
            "layout": _layout(title + f" (total time per bin; {what} per bar)",
                              "self time" if what == "ops" else "duration", "ms",
                              margin={"l": 60, "r": 20, "t": 40, "b": 90}, xaxis={"tickangle": -45})}


def share_chart(cpu: dict) -> dict:
    parts = [(label, 100 * cpu.get(key, 0.0), colour) for key, label, colour in SHARE_PARTS]
    return {"data": [{"type": "bar", "orientation": "h", "name": label, "y": ["traced step"], "x": [v],
                      "marker": {"color": colour}, "text": [f"{v:.0f}%"], "textposition": "inside"}
                     for label, v, colour in parts],
            "layout": _layout("Where the traced steps go (median over steps)", "% of step", "", height=200,
                              barmode="stack", xaxis={"range": [0, 100], "title": {"text": "% of step"}})}


def ops_per_step_chart(counts: list) -> dict:
    return {"data": [{"type": "bar", "x": [f"traced step {i + 1}" for i in range(len(counts))], "y": counts,
                      "marker": {"color": "#4c78a8"}}],
            "layout": _layout("Ops per traced step", "", "ops", height=240)}


def _top_ops(top: list) -> list:
    return [(o["name"], o["kind"], f"{o['per_step']:.1f}", f"{o['median_self_us']:.1f}", f"{o['total_ms']:.2f}",
             f"{100 * o['share']:.1f}%") for o in top]


def _gpu_facts(g: dict, figs: dict, steady_busy: float | None = None) -> list:
    figs["kernel-hist"] = histogram_chart(g["kernel_duration_histogram"], "Kernel durations", "kernels")
    idle = g["idle_us"]
    idle_total = sum(idle.values()) or 1.0
    ls = g["launch_stats"]
    short = "n/a" if g["short_kernel_fraction"] is None else f"{100 * g['short_kernel_fraction']:.0f}%"
    facts = [("kernels per step", f"{g['kernels_per_step']:.0f} ({g['kernels']} kernels, {g['steps']} steps)"),
             ("kernel duration", f"median {g['kernel_us_median']:.1f} µs, p90 {g['kernel_us_p90']:.1f} µs"),
             ("kernels shorter than their launch call", short),
             ("CPU launch time vs GPU kernel time",
              f"{g['cpu_launch_us'] / 1e3:.2f} ms vs {g['gpu_kernel_us'] / 1e3:.2f} ms"),
             *([("GPU busy on the steady steps (kernels and copies, device clock)",
                 f"{100 * steady_busy:.0f}%, idle {100 * (1 - steady_busy):.0f}%")] if steady_busy is not None else []),
             ("GPU idle in the traced steps (profiler on, share of kernel span)", f"{100 * g['idle_share']:.1f}%"),
             ("idle split (HTA)", ", ".join(f"{k.replace('_', ' ')} {100 * v / idle_total:.0f}%"
                                            for k, v in idle.items())),
             ("launch delay (mean)", "n/a" if ls["mean_launch_delay"] is None
              else f"{ls['mean_launch_delay']:.1f} µs over {ls['n']} launches")]
    return facts


def section_ops(d, figs) -> str:
    op = d.summary.get("launch")
    status = d.status.get("trace") or {}
    if not op:
        return render(TEMPLATE, "unavailable", why=status.get("reason") or "no trace was recorded")
    values = {"trace": op.get("trace"), "reason": status.get("reason", ""), "error": op.get("error"), "host": None,
              "fold_host": False, "gpu": None}
    if op.get("error"):
        return render(TEMPLATE, "section", **values)
    cpu, gpu = op.get("cpu"), op.get("gpu")
    if cpu:
        figs["op-share"] = share_chart(cpu)
        figs["op-hist"] = histogram_chart(cpu["self_time_histogram"], "Op self-time distribution", "ops")
        counts = cpu["ops_per_step_by_step"]
        varies = len(set(counts)) > 1
        if varies:   # identical bars say nothing the sentence below does not
            figs["ops-per-step"] = ops_per_step_chart(counts)
        facts = (f'{cpu["ops_per_step"]:.0f} ops per step over {cpu["steps"]} traced step(s) (median step '
                 f'{cpu["step_ms_median"]:.1f} ms with the profiler on); median op self time '
                 f'{cpu["op_self_us_median"]:.1f} µs, p90 {cpu["op_self_us_p90"]:.1f} µs; tiny ops alone '
                 f'{100 * cpu["tiny_share"]:.0f}% of the step.')
        values["host"] = {"facts": facts, "varies": varies, "top": _top_ops(cpu["top_ops"])}
        # a GPU run: the host's view is secondary to the GPU section
        values["fold_host"] = bool(gpu or d.summary.get("device"))
    if gpu:
        values["gpu"] = _gpu_facts(gpu, figs, (d.summary.get("device") or {}).get("busy_share"))
    return render(TEMPLATE, "section", **values)
