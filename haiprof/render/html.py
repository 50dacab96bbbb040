"""report.html: one self-contained file (plotly.js inlined compressed, no network), verdict sentence first,
then "do this next" and a table of contents.

Sections are small functions (RunData -> HTML fragment, figures) listed in SECTIONS; a new collector or analyzer
adds its panel by adding a function there. Every string that came from the run goes through `esc`.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from . import charts, evidence, hardware, plotly_inline
from .escape import esc
from .gpu import section_gpu      # device-first GPU view (CUDA runs)
from .top import section_next, toc
from .ops import section_ops   # op-level trace panel (tracing window)
from .ranks import section_ranks  # distributed runs (issue 5)
from .windows import section_windows   # every tracing window (--trace-at, --trace-every, haiprof trace)
from .slowest import section_slowest   # the slowest steps of the whole run

PHASES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other")


def step_columns(steps, keys) -> dict:
    """The step chart's numpy columns (the one place the chart meets the steps): index, duration_ns, ns per phase
    and traced (the op-level tracing window's steps). `steps`: StepColumns (arrays as they are) or Step objects
    (the device partition of a CUDA run)."""
    if hasattr(steps, "arrays"):
        a = steps.arrays()
        n = len(a["index"])
        zero = np.zeros(n)
        f64 = np.float64   # asarray: float columns (the device steps') are not copied
        return {"index": a["index"], "traced": a["traced"], "duration_ns": np.asarray(a["duration_ns"], dtype=f64),
                "phases": {k: np.asarray(a["phases"][k], dtype=f64) if k in a["phases"] else zero for k in keys}}
    n = len(steps)
    return {"index": np.fromiter((st.index for st in steps), np.int64, n),
            "traced": np.fromiter((st.traced for st in steps), bool, n),
            "duration_ns": np.fromiter((st.end_ns - st.start_ns for st in steps), np.float64, n),
            "phases": {k: np.fromiter((st.phases_ns.get(k, 0) for st in steps), np.float64, n) for k in keys}}


# -- sections ------------------------------------------------------------------------------------------------
def section_verdict(d, figs):
    s = d.summary
    badge = esc(s["bottleneck"])
    exit_line = ""
    if s.get("exit_code") not in (0, None):
        exit_line = f'<p class="warn">The script exited with code {esc(s["exit_code"])}' + \
                    (f": {esc(d.meta.get('error'))}" if d.meta.get("error") else "") + "</p>"
    elif s.get("exit_code") is None:
        exit_line = '<p class="warn">The run did not finish under haiprof; showing data up to the last flush.</p>'
    steady = s["step_time_s"].get("steady") or s["step_time_s"].get("median")
    facts = (f"{s['steps']} steps, {steady * 1e3:.1f} ms/step (steady)" if steady else f"{s['steps']} steps")
    if s.get("eval_s"):
        facts += (f"; evaluation passes between steps took {s['eval_s']:.2f} s ({100 * s['eval_share']:.0f}% of "
                  f"the run), not counted in the steps")
    return (f'<section id="verdict"><div class="badge b-{badge}">{badge}</div>'
            f'<h2 id="headline">{esc(s["headline"])}</h2><p class="facts">{esc(facts)}</p>{exit_line}</section>')


def _traced(steps) -> list:
    """The indices of the traced steps (steps: a list of Step or a StepColumns)."""
    if hasattr(steps, "arrays"):
        return steps.index[steps.traced].tolist()
    return [st.index for st in steps if st.traced]


def section_phases(d, figs):
    s = d.summary
    if not d.steps:
        return '<section><h3>Phases</h3><p>No training steps were detected, so there is no phase breakdown.</p></section>'
    figs["share"] = charts.share_chart(s["phase_share"])
    host_chart = ""
    if getattr(d, "device_steps", None):   # CUDA runs: the step chart on the device clock, as the shares above
        keys = [*PHASES, "busy:estimated", *charts.IDLE_COLORS]
        figs["steps"] = charts.step_chart(step_columns(d.device_steps, keys), s.get("warmup_steps_excluded", 0), keys,
                                          budget=charts.STEP_DETAIL_BUDGET * 2 // 3,
                                          title="Device time per step: busy by phase, idle by host cause (device clock)")
        figs["host-steps"] = charts.step_chart(step_columns(d.steps, PHASES), s.get("warmup_steps_excluded", 0),
                                               PHASES, budget=charts.STEP_DETAIL_BUDGET // 3,
                                               title="Host time per step by phase (host clock)")
        host_chart = ("<details><summary>Host time per step (host clock: what the CPU did, not what the GPU "
                      "waited for)</summary><div class='chart' id='fig-host-steps'></div></details>")
    else:
        figs["steps"] = charts.step_chart(step_columns(d.steps, PHASES), s.get("warmup_steps_excluded", 0), PHASES)
    # the shaded steps, counted from the steps drawn (a job's page draws its reference rank's steps)
    traced = len(_traced(d.steps))
    left = [f"{s['warmup_steps_excluded']} warm-up step(s)"] if s.get("warmup_steps_excluded") else []
    left += [f"{traced} step(s) of the op-level tracing window"] if traced else []
    note = f"<p class='note'>Shares exclude {' and '.join(left)} (shaded).</p>" if left else ""
    return (f'<section id="phases"><h3>Phases</h3><div class="chart" id="fig-share"></div>'
            f'{note}<div class="chart" id="fig-steps"></div>{host_chart}</section>')


def section_utilization(d, figs):
    tl = d.timelines.get("system")
    if not tl:
        st = d.status.get("system")
        why = st.get("reason") if st and st.get("reason") else "no samples were recorded (the run was too short)"
        return (f'<section id="utilization"><h3>Utilization</h3>'
                f'<p class="unavailable">System sampler: {esc(why)}</p></section>')
    axis = charts.step_axis(d)   # lined up with "Time per step" (seconds when there are too few steps)
    figs["cpu"] = charts.timeline_chart("CPU of the process tree", "% of one core", tl["cpu"], axis)
    if tl.get("cpu_host"):
        figs["cpu-host"] = charts.timeline_chart("CPU of the host", "% of all cores", tl["cpu_host"], axis)
    figs["mem"] = charts.timeline_chart("Memory", "GiB", tl["mem"], axis)
    figs["io"] = charts.timeline_chart("Disk and network", "MiB/s", tl["io_mib_s"], axis)
    u = d.summary.get("utilization", {})
    facts = ""
    if u.get("cpu_main_pct_mean") is not None:
        facts = (f"training process CPU {u['cpu_main_pct_mean']:.0f}% (mean), workers "
                 f"{u.get('cpu_children_pct_mean') or 0:.0f}%, peak RSS {u.get('rss_bytes_max', 0) / 2**30:.2f} GiB")
    return (f'<section id="utilization"><h3>Utilization</h3><p>{esc(facts)}</p>'
            f'<div class="chart" id="fig-cpu"></div>'
            + ('<div class="chart" id="fig-cpu-host"></div>' if tl.get("cpu_host") else "")
            + '<div class="chart" id="fig-mem"></div>'
            '<div class="chart" id="fig-io"></div></section>')


def section_findings(d, figs):
    items = []
    for f in d.summary["findings"]:
        message = f["message"]
        if message and message in d.summary.get("headline", ""):   # each fact once: the verdict says it
            message = "the verdict above"
        fixes = ", ".join(f"<code>--fix {esc(fx)}</code>" for fx in f.get("fixes", []))
        fixes_html = f' <span class="note">(fixes: {fixes})</span>' if fixes else ""
        items.append(f'<li class="finding sev-{esc(f["severity"])}"><b>{esc(f["kind"])}</b> '
                     f'<span class="sev">{esc(f["severity"])}</span>: {esc(message)}{fixes_html}'
                     f'<details><summary>evidence</summary>{evidence.table(f.get("evidence") or {})}'
                     f'</details></li>')
    body = "".join(items) or "<li>No findings.</li>"
    return f'<section id="findings"><h3>Findings</h3><ul>{body}</ul></section>'


def section_collectors(d, figs):
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td>{'available' if st.get('available') else 'unavailable'}</td>"
        f"<td>{esc(st.get('reason') or '')}</td></tr>" for name, st in sorted(d.status.items()))
    det = d.summary["step_detection"]
    rows += "<tr><td>step detection</td><td></td><td>" + esc(
        f"step boundaries from {det.get('boundary')}, timing: {det.get('timing')}") + "</td></tr>"
    return f'<section id="collectors"><h3>Collectors</h3><table class="grid">{rows}</table></section>'


def _when(t) -> str:
    """An epoch time as a local timestamp a person reads (the raw number stays in meta.json)."""
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return "" if t is None else str(t)
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t)).strip()
    except (OverflowError, OSError, ValueError):
        return str(t)


def section_meta(d, figs):
    keep = ("command", "cwd", "host", "python", "torch", "cpu_model", "cpu_count", "gpus", "start_time",
            "end_time", "exit_code", "how", "haiprof_version")
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(_when(d.meta[k]) if k.endswith('_time') else d.meta[k])}</td></tr>"
                   for k in keep if k in d.meta)
    return f'<section id="meta"><h3>Run</h3><table class="grid">{rows}</table></section>'


from .trace_panels import section_trace  # noqa: E402  (haiprof analyze)

SECTIONS = [section_verdict, section_next, section_findings, section_trace, section_ranks, section_gpu,
            section_phases, section_slowest, section_ops, section_windows, section_utilization, hardware.section_hardware, section_collectors,
            section_meta]

# --- fixes panel (haiprof run --fix): right after the verdict ---
from .fixes_panel import section_fixes  # noqa: E402
SECTIONS.insert(2, section_fixes)
# --- end fixes panel ---

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{font-size:18px;color:#555} h2{font-size:24px;margin:8px 0} h3{border-bottom:1px solid #ddd;padding-bottom:4px}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;background:#777;font-weight:600}
.b-io{background:#e45756}.b-compute{background:#4c78a8}.b-launch{background:#f58518}.b-communication{background:#b279a2}
.rank-dists{display:grid;grid-template-columns:repeat(auto-fit,minmax(340px,1fr));gap:8px}.warn{color:#b00}.note,.facts{color:#666}.unavailable{color:#a60}
.row{display:flex;gap:16px;align-items:center}.row .chart{flex:1}
table.grid,table.kv{border-collapse:collapse}table.grid td,table.kv td{border:1px solid #ddd;padding:3px 8px;vertical-align:top}
li.finding{margin:8px 0}.sev{font-size:12px;padding:1px 6px;border-radius:6px;background:#eee}
.sev-high .sev{background:#f8d0d0}.sev-moderate .sev{background:#fde8c8}
pre{white-space:pre-wrap;font-size:12px;background:#f6f6f6;padding:6px} code{background:#f3f3f3;padding:1px 4px}
#next{border:2px solid #4c78a8;border-radius:8px;padding:4px 14px 10px;background:#f5f8fc}#next h3{border:0;margin:6px 0}
.next-title{font-size:18px;font-weight:600}.next-why,.next-gain,.next-cmd{margin-top:4px}.next-gain{color:#2a7a2a;font-weight:600}
#toc{margin:12px 0;padding:6px 0;border-bottom:1px solid #ddd;font-size:14px}#toc a{color:#2a5d9f;text-decoration:none}
table.grid code{word-break:break-all}.scroll-x{max-width:100%;overflow-x:auto}#rank-table td:last-child{word-break:break-all;min-width:14em}th{text-align:left;font-weight:600;background:#fafafa}table.grid th{border:1px solid #ddd;padding:3px 8px}
"""

TITLES = {"verdict": "Verdict", "next": "Do this next", "fixes": "Fixes", "findings": "Findings", "trace": "Trace",
          "ranks": "Ranks", "gpu": "GPU", "phases": "Phases", "ops": "Op-level trace", "windows": "Tracing windows", "slowest": "Slowest steps",
          "utilization": "Utilization",
          "hardware": "Hardware", "collectors": "Collectors", "meta": "Run"}


def render(d) -> str:
    figs: dict = {}
    parts = [section(d, figs) for section in SECTIONS]
    ids = [m.group(1) for p in parts for m in [re.match(r'<section id="([\w-]+)"', p)] if m]
    nav = toc([(i, TITLES.get(i, i)) for i in ids if i not in ("verdict", "next")])
    top = 2 if len(parts) > 1 and parts[1].startswith('<section id="next"') else 1
    body = "\n".join(parts[:top] + [nav] + parts[top:])
    title = f"haiprof: {d.meta.get('target_name', 'run')}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<style>{CSS}{plotly_inline.CSS}</style></head><body>'
            f'<h1>{esc(title)}</h1>{body}{plotly_inline.scripts(charts.with_hover(figs))}</body></html>')


def write(d, path: Path) -> Path:
    """The page, atomically. Bytes that are not UTF-8 in an argument or a file name reach python as lone
    surrogates (os.fsdecode): they are shown as \\xNN escapes, never a failed report."""
    tmp = path.with_name("." + path.name + ".tmp")
    try:
        tmp.write_text(render(d), encoding="utf-8", errors="backslashreplace")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
