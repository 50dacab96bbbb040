"""report.html: one self-contained file (plotly.js inlined compressed, no network), verdict sentence first,
then "do this next" and a table of contents.

Sections are small functions (RunData -> HTML fragment, figures) listed in SECTIONS; a new collector or analyzer
adds its panel by adding a function there. The markup is in templates/ (report.html.j2 for this module's sections
and the page); the functions compute values, and the template engine escapes every one of them.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from . import charts, evidence, hardware, plotly_inline
from .escape import render as fragment
from .gpu import section_gpu      # device-first GPU view (CUDA runs)
from .top import section_next, toc
from .ops import section_ops   # op-level trace panel (tracing window)
from .ranks import label_populations, section_ranks  # distributed runs (issue 5)
from .windows import section_windows   # every tracing window (--trace-at, --trace-every, haiprof trace)
from .slowest import section_slowest   # the slowest steps of the whole run

from ..rundir.vocabulary import ALL_PHASES as PHASES


def step_columns(steps, keys) -> dict:
    """The step chart's numpy columns (the one place the chart meets the steps): index, duration_ns, ns per phase
    and traced (the op-level tracing window's steps). `steps`: StepColumns, the host's or the device's (a run
    without device steps has none: empty columns)."""
    if not hasattr(steps, "arrays"):
        if len(steps):
            raise TypeError("the step chart takes the steps as columns (StepColumns)")
        return {"index": np.zeros(0, np.int64), "traced": np.zeros(0, bool), "duration_ns": np.zeros(0),
                "phases": {k: np.zeros(0) for k in keys}}
    a = steps.arrays()
    n = len(a["index"])
    zero = np.zeros(n)
    f64 = np.float64   # asarray: float columns (the device steps') are not copied
    return {"index": a["index"], "traced": a["traced"], "duration_ns": np.asarray(a["duration_ns"], dtype=f64),
            "phases": {k: np.asarray(a["phases"][k], dtype=f64) if k in a["phases"] else zero for k in keys}}


# -- sections ------------------------------------------------------------------------------------------------
TEMPLATE = "report.html.j2"


def section_verdict(d, figs):
    s = d.summary
    steady = s["step_time_s"].get("steady") or s["step_time_s"].get("median")
    facts = (f"{s['steps']} steps, {steady * 1e3:.1f} ms/step (steady)" if steady else f"{s['steps']} steps")
    if s.get("eval_s"):
        facts += (f"; evaluation passes between steps took {s['eval_s']:.2f} s ({100 * s['eval_share']:.0f}% of "
                  f"the run), not counted in the steps")
    code = s.get("exit_code")
    return fragment(TEMPLATE, "verdict", badge=s["bottleneck"], headline=s["headline"], facts=facts,
                    exit_code=None if code in (0, None) else code, error=d.meta.get("error"), unfinished=code is None)


def _traced(steps) -> list:
    """The indices of the traced steps (steps: StepColumns; none: a RunData without steps)."""
    return steps.index[steps.traced].tolist() if len(steps) else []


def section_phases(d, figs):
    s = d.summary
    if not d.steps:
        return fragment(TEMPLATE, "no_phases")
    figs["share"] = charts.share_chart(s["phase_share"])
    host_chart = bool(getattr(d, "device_steps", None))
    flight = charts.flight_marks(s.get("trace_windows"))   # the flight recorder's traced stalls, marked
    if host_chart:   # CUDA runs: the step chart on the device clock, as the shares above
        keys = [*PHASES, "busy:estimated", *charts.IDLE_COLORS]
        figs["steps"] = charts.step_chart(step_columns(d.device_steps, keys), s.get("warmup_steps_excluded", 0), keys,
                                          budget=charts.STEP_DETAIL_BUDGET * 2 // 3, flight=flight,
                                          title="Device time per step: busy by phase, idle by host cause (device clock)")
        figs["host-steps"] = charts.step_chart(step_columns(d.steps, PHASES), s.get("warmup_steps_excluded", 0),
                                               PHASES, budget=charts.STEP_DETAIL_BUDGET // 3, flight=flight,
                                               title="Host time per step by phase (host clock)")
    else:
        figs["steps"] = charts.step_chart(step_columns(d.steps, PHASES), s.get("warmup_steps_excluded", 0), PHASES,
                                          flight=flight)
    # the shaded steps, counted from the steps drawn (a job's page draws its reference rank's steps)
    traced = len(_traced(d.steps))
    left = [f"{s['warmup_steps_excluded']} warm-up step(s)"] if s.get("warmup_steps_excluded") else []
    left += [f"{traced} step(s) of the op-level tracing window"] if traced else []
    return fragment(TEMPLATE, "phases", excluded=" and ".join(left), host_chart=host_chart)


def section_utilization(d, figs):
    tl = d.timelines.get("system")
    if not tl:
        st = d.status.get("system")
        why = st.get("reason") if st and st.get("reason") else "no samples were recorded (the run was too short)"
        return fragment(TEMPLATE, "no_utilization", why=why)
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
    return fragment(TEMPLATE, "utilization", facts=facts, cpu_host=bool(tl.get("cpu_host")))


def section_findings(d, figs):
    rows = []
    for f in d.summary["findings"]:
        message = f["message"]
        if message and message in d.summary.get("headline", ""):   # each fact once: the verdict says it
            message = "the verdict above"
        rows.append({"kind": f["kind"], "severity": f["severity"], "message": message, "fixes": f.get("fixes", []),
                     "evidence": evidence.table(f.get("evidence") or {})})
    return fragment(TEMPLATE, "findings", rows=rows)


def section_collectors(d, figs):
    rows = [(name, "available" if st.get("available") else "unavailable", st.get("reason") or "")
            for name, st in sorted(d.status.items())]
    det = d.summary["step_detection"]
    per_step = det.get("optimizer_steps_per_step") or 1
    cycle = f" (a step is one cycle of {per_step} optimizer steps: several optimizers step each iteration)" \
        if per_step > 1 else ""
    rows.append(("step detection", "", f"step boundaries from {det.get('boundary')}{cycle}, "
                                        f"timing: {det.get('timing')}"))
    return fragment(TEMPLATE, "grid", id="collectors", title="Collectors", rows=rows)


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
    rows = [(k, _when(d.meta[k]) if k.endswith("_time") else d.meta[k]) for k in keep if k in d.meta]
    return fragment(TEMPLATE, "grid", id="meta", title="Run", rows=rows)


from .trace_panels import section_trace  # noqa: E402  (haiprof analyze)

SECTIONS = [section_verdict, section_next, section_findings, section_trace, section_ranks, section_gpu,
            section_phases, section_slowest, section_ops, section_windows, section_utilization, hardware.section_hardware, section_collectors,
            section_meta]

# --- fixes panel (haiprof run --fix): right after the verdict ---
from .fixes_panel import section_fixes  # noqa: E402
SECTIONS.insert(2, section_fixes)
# --- end fixes panel ---

TITLES = {"verdict": "Verdict", "next": "Do this next", "fixes": "Fixes", "findings": "Findings", "trace": "Trace",
          "ranks": "Ranks", "gpu": "GPU", "phases": "Phases", "ops": "Op-level trace", "windows": "Tracing windows", "slowest": "Slowest steps",
          "utilization": "Utilization",
          "hardware": "Hardware", "collectors": "Collectors", "meta": "Run"}


def render(d) -> str:
    figs: dict = {}
    # each section is a template's fragment (Markup), or "" when it has nothing to show
    parts = [p for p in (section(d, figs) for section in SECTIONS) if p]
    label_populations(d, figs)   # a job's charts: the ranks' mean or the reference rank
    ids = [m.group(1) for p in parts for m in [re.match(r'<section id="([\w-]+)"', p)] if m]
    nav = toc([(i, TITLES.get(i, i)) for i in ids if i not in ("verdict", "next")])
    top = 2 if len(parts) > 1 and parts[1].startswith('<section id="next"') else 1
    return fragment(TEMPLATE, "page", title=f"haiprof: {d.meta.get('target_name', 'run')}", parts=parts, top=top,
                    nav=nav, scripts=plotly_inline.scripts(charts.with_hover(figs)))


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
