"""Turn a run directory into summary.json: read the files, call the analyzers, assemble the contract keys.

This is wiring only; the decisions live in haiprof.analyzers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from haiprof.analyzers import steps as step_analysis
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import conditions, h2d, stall_verdict, utilization, verdict
from haiprof.analyzers import whatif
from haiprof.analyzers.findings import Finding, checked, edited

from ..rundir import SCHEMA_VERSION, TRACE_FILE, RunDir
from . import device as device_analysis
from . import gpu as gpu_analysis
from . import hardware as hw_analysis
from . import efficiency, whole_run, windows
from .run_model import BULK_RECORDS, PER_STEP_EXTRAS, Run  # noqa: F401 (the record classes: re-exported)
# findings judged from step shares: none below the verdict's MIN_STEPS measured steps
MIN_STEPS_KINDS = {"io", "compute", "launch", "communication", "other", "energy"}


@dataclass
class RunData:
    """Everything a renderer may show: finished data, no further analysis needed."""
    run_dir: RunDir
    meta: dict
    summary: dict
    # all the steps (warm-up included): analyzers.step_columns.StepColumns, .arrays() for charts (index,
    # duration_ns, ns per phase, traced); an empty list where there are none
    steps: list = field(default_factory=list)
    samples: dict = field(default_factory=dict)        # collector -> list of sample dicts
    status: dict = field(default_factory=dict)         # collector -> {"available", "reason"}
    timelines: dict = field(default_factory=dict)      # panel -> series, ready to plot
    # CUDA runs: the steps on the device clock as the step chart draws them (device.chart_steps: StepColumns on
    # the host steps' rows, phases "busy" by phase and "idle:<cause>", float ns)
    device_steps: list = field(default_factory=list)
    ranks_grid: dict = field(default_factory=dict)     # a job: ranks x step buckets (analyzers/rank_spread.grid)
    # CUDA runs: the step numbers of the device's steady steps (device_timeline.steady: the one steady rule), which
    # set the device chart's y-axis
    device_steady: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _trace_results(run_dir: RunDir) -> dict:
    """Per-rank results `haiprof analyze` stored beside the phases; {} for `haiprof run` dirs."""
    import json

    try:
        with open(run_dir.file(TRACE_FILE), encoding="utf-8") as f:
            out = json.load(f)
        return out if isinstance(out, dict) else {}
    except (OSError, ValueError):
        return {}


def analyze(run_dir: RunDir, extra_findings: list | None = None, run: Run | None = None) -> RunData:
    """`run`: the directory already read (run_model.Run); read here otherwise. Nothing below reads a raw file."""
    run = run if run is not None else Run.read(run_dir)
    meta, records, loader_waits, split = run.meta, run.records, run.loader_waits, run.split
    all_steps, step_info, steady = run.steps, run.step_info, run.steady     # StepColumns
    share = step_analysis.phase_share(steady)
    stats = step_analysis.step_time_stats(steady)
    traced_excluded = int((all_steps.traced & ~np.isin(all_steps.index, steady.index)).sum())
    n = len(all_steps)
    stats["steady"] = step_analysis.seconds_per_step(steady)
    findings = verdict.phase_findings(share, len(steady), stats["median"], stats["steady"]) if n else []
    op_trace = launch_analysis(run)              # op-level trace of the tracing window, if any
    trace_findings = op_trace.pop("findings", []) if op_trace else []
    # CUDA runs: the device timeline decides shares, step time and verdict (haiprof/device_analysis.py); the
    # trace's launch statistics stay as evidence (its kernel time per step sets the kernel density).
    device = device_analysis.analyze(records, op_trace, split) if n else None
    # the device steps on the host steps' rows (the step chart on the device clock lines up with the others),
    # made now so the device steps' columns are freed
    chart = device_analysis.chart_steps(device.pop("steps"), device["density"], all_steps.index, all_steps.start_ns) \
        if device is not None else []
    if device is not None:
        share, stats["steady"], findings = device["phase_share"], device["steady_s"], device["findings"]
        findings += [f for f in trace_findings if f.get("kind") != "launch"]
        if not any(f.get("kind") == "pageable-h2d" for f in findings):   # no trace said so: the DataLoader may
            traced_us = ((op_trace or {}).get("steps") or 0) * ((op_trace or {}).get("step_ms_median") or 0.0) * 1e3
            pageable = h2d.pageable_finding((op_trace or {}).get("copies") or {}, h2d.loader_pin_memory(records),
                                            traced_us or None)
            findings += [pageable] if pageable else []
    else:
        findings += trace_findings
    findings += list(extra_findings or [])
    trace = _trace_results(run_dir)  # `haiprof analyze` directories
    # On the device timeline the launch verdict is the partition's; the trace's own launch statistics stay
    # under summary["trace"] as evidence.
    findings += [f for f in trace.get("findings", []) if device is None or f.get("kind") != "launch"]
    samples, status = run.samples, run.status
    # -- hardware collectors: GPU, links, NUMA, disks, energy; input-bound split (analysis/hardware.py) --
    origin = hw_analysis.timeline_origin(meta, samples, all_steps)   # one time origin for every chart
    hw = hw_analysis.analyze(records, all_steps, samples, status, meta, origin, None, split)
    del split   # the last analysis of the intervals: a long run's arrays are freed before the rest
    run.release_intervals()
    findings = hw_analysis.refine_io(findings, records, loader_waits, all_steps, samples, hw["summary"]["hardware"],
                                     meta)
    del loader_waits
    run.loader_waits = None
    findings += hw["findings"]
    neighbour = utilization.neighbour_finding(samples.get("system", []), T.HOST_SATURATED, T.NEIGHBOUR_CORES)
    findings += [neighbour] if neighbour else []
    # -- end hardware --
    gpu = gpu_analysis.analyze(run.trace(), records, all_steps, hw["summary"]["hardware"], op_trace)
    findings += gpu["findings"]
    decide = verdict.decide_device if device is not None else verdict.decide
    if device is None:
        verdict.host_launch_on_the_step(findings, share)   # the traced steps' overhead, on the steady step
        verdict.split_host_compute(findings)   # the trace's framework overhead is inside the compute phases
    # fewer than MIN_STEPS *measured* steps (after warm-up; the tracing window's steps are measured, only slowed)
    # conclude nothing; a trace (`haiprof analyze`) holds only its profiled steps, all of them measured
    measured = n if trace and not meta.get("steps_from_run") else min(n, len(steady) + traced_excluded)
    bottleneck, no_verdict = decide(findings, measured)   # its sentence is the headline only without a verdict
    suffix = ""
    if neighbour and measured >= T.MIN_STEPS:
        suffix += (f" Measured on a busy machine (other processes took {neighbour['evidence']['other_cores_mean']:.1f} "
                   f"of {neighbour['evidence']['cores']} cores): noisy.")
    if device is None and _cuda_host_cpu_model(meta, op_trace) and measured >= T.MIN_STEPS:
        suffix += (" The model ran on the CPU: this machine has a GPU "
                   f"({(meta.get('gpus') or ['?'])[0]}), and no CUDA kernel ran in the traced steps.")
    system = utilization.summarize_system(samples.get("system", []))   # the page's utilization block too
    if n == 0:
        suffix += utilization.work_in_children(system, T.CHILD_WORK_CORES)
    if measured < T.MIN_STEPS:   # findings follow the verdict's minimum: shares of one or two steps judge nothing
        findings = [f for f in findings if f.get("kind") not in MIN_STEPS_KINDS]
    exit_code = meta.get("exit_code")
    summary = {
        "schema_version": SCHEMA_VERSION,
        "bottleneck": bottleneck,
        "headline": None,   # below, once: after what the script already does is known
        "phase_share": {k: round(v, 6) for k, v in share.items()},
        "steps": n,
        "steps_analyzed": len(steady),
        "steps_measured": measured,      # what the verdict counts (fewer than 3: bottleneck none)
        "warmup_steps_excluded": n - len(steady) - traced_excluded,
        "traced_steps_excluded": traced_excluded,     # steps the profiler window touched
        "traced_steps_included": bool(steady.traced.any()),   # nothing else was left to measure
        "launch": op_trace,
        "device": device["summary"] if device is not None else None,
        "gpu": gpu["gpu"],                # top kernels and copies of the tracing window (CUDA runs)
        "memory": gpu["memory"],          # device memory per step (allocator counters)
        "step_time_s": stats,
        "noisy": neighbour is not None,   # measured beside a busy neighbour (the busy-neighbour finding)
        # how the run was set up and the load beside it: a --fix comparison checks both runs saw the same
        "conditions": {**(meta.get("conditions") or {}),
                       **(conditions.other_load(samples.get("system", [])) or {}),
                       "cpu_wait_share": meta.get("cpu_wait_share")},
        # evaluation passes between steps (forwards without autograd): outside the steps and phase_share
        "eval_s": round(step_info.get("eval_s", 0.0), 6),
        "eval_share": round(step_info.get("eval_s", 0.0) / (step_info.get("eval_s", 0.0) + int(
            all_steps.duration_ns.sum()) / 1e9 or 1.0), 6),
        "step_detection": step_info,
        "exit_code": exit_code,
        "finished": exit_code is not None,
        "findings": verdict.sort_findings(findings),
        "utilization": system,
        "collectors": status,
        "command": meta.get("command"),
        "script_uses": _script_uses(meta, records),
        **hw["summary"],
    }
    # the whole run, not its typical step: drift, periodic stalls, memory creep, slowest steps (whole_run.py)
    # (the flight recorder's traced steps too: a stall it traced is still one; windows.py explains it from its trace)
    summary["trace_windows"] = windows.analyze(records, all_steps, run_dir.path)
    median_ms = (stats.get("median") or 0) * 1e3 or None
    windows.explain(summary["trace_windows"], run_dir.path, median_ms)
    whole = whole_run.analyze(windows.with_traced_stalls(steady, all_steps, summary["trace_windows"], median_ms),
                              records, samples)
    windows.link_stalls(summary["trace_windows"], whole, median_ms)
    summary["efficiency"] = efficiency.analyze(run_dir.path, meta, summary["trace_windows"], run.trace_events,
                                               stats.get("steady"), device is not None)   # FLOPs, MFU
    from .thread_advice import findings as thread_findings
    summary["findings"] += thread_findings(run_dir.path, meta, summary, run.trace_events)   # tiny ops, many threads
    run.release_trace()   # its last reader
    efficiency.add_device_use(summary["efficiency"], summary["gpu"], summary["memory"], summary.get("hardware"))
    efficiency.quote_mfu(summary["findings"], summary["efficiency"])
    summary["findings"] = verdict.sort_findings(summary["findings"] + whole["findings"])
    summary["slowest_steps"] = whole["slowest_steps"]
    if exit_code is None:
        live, _ = run_dir.in_progress(meta) if not meta.get("distributed") else (False, "")
        summary["snapshot"] = live   # `haiprof report` of a run still going: what it has written so far
        summary["findings"].append(Finding(
            kind="incomplete", severity="info", share=0.0,
            message=(f"a snapshot of a run still in progress, after {n} step(s): the run writes its own report "
                     "when it ends" if live else
                     "the run did not finish under haiprof (killed?): data up to the last flush is shown"),
            evidence={"last_flush": "≤ 1 s before the end"}, fixes=[]).as_dict())
    # --- fixes (haiprof run --fix): what each fix did, before/after, loss guard ---
    from .fix_results import add_fix_results
    add_fix_results(run_dir, meta, summary, all_steps)
    # --- end fixes ---
    from .handoff import attach as probe_handoff
    probe_handoff(run_dir.path, meta, summary)   # the worker hand-off rate, where the prefetch what-if needs it
    from .read_parallel import attach as probe_reads
    probe_reads(run_dir.path, meta, summary, samples.get("system", []))   # the storage's parallel read rate, likewise
    summary["predictions"] = whatif.predict_all(summary)   # each fix's what-if on this run, where a gain is quoted
    left_out = summary["advice_left_out"] = gpu_analysis.advice_left_out(summary)   # done, measured, not worth it
    # the verdict weighs the whole run: stalls that waste more than the verdict's open fixes can remove lead instead
    stall = stall_verdict.weigh(summary["findings"], bottleneck, stats.get("steady") or stats.get("median"),
                                left_out, summary["predictions"]) if measured >= T.MIN_STEPS else None
    if stall:
        summary["bottleneck"] = bottleneck = stall["bottleneck"]
        summary["stall_verdict"] = {k: stall[k] for k in ("instead_of", "stall_share")}
    top = next((f for f in summary["findings"] if f["kind"] == bottleneck), None)
    summary["headline"] = (no_verdict if top is None else
                           verdict.headline(top, stats.get("steady") or stats.get("median"), left_out,
                                            summary["predictions"])) + suffix
    if stall:
        summary["headline"] = stall["headline"] + suffix
    drop_left_out_fixes(summary["findings"], left_out)
    summary["findings"] = checked(summary["findings"])   # the contract, after the last in-place edit
    summary["next_steps"] = gpu_analysis.next_steps(summary)   # "do this next", ranked
    if stall and summary["next_steps"] is not None:
        summary["next_steps"].insert(0, stall["action"])   # the verdict's action first
    timelines = {"system": utilization.system_timelines(samples.get("system", []), origin),
                 "hardware": hw["timelines"], "origin_ns": origin}
    if trace:
        summary.update(source="trace", trace={k: v for k, v in trace.items() if k != "findings"})
        if not meta.get("steps_from_run"):   # else the steps are the run's own, beside the trace it recorded
            step_info["boundary"] = "ProfilerStep annotations" if n else "none (no ProfilerStep annotations)"
        timelines["trace"] = trace
    return RunData(run_dir, meta, summary, all_steps, samples, status, timelines, chart,
                   device_steady=device["steady_index"] if device is not None else np.zeros(0, dtype=np.int64))


def drop_left_out_fixes(findings: list, left_out: dict) -> None:
    """No fix is offered anywhere on the page for what the script already does (or this run applied): each
    finding keeps the others; the left-out ones go to its evidence with the reason."""
    for i, f in enumerate(findings):
        gone = [x for x in f.get("fixes") or [] if x in left_out]
        if gone:
            findings[i] = edited(f, fixes=[x for x in f["fixes"] if x not in left_out],
                                 evidence={**(f.get("evidence") or {}),
                                           "fixes_left_out": {x: left_out[x] for x in gone}})


def _cuda_host_cpu_model(meta: dict, op_trace: dict | None) -> bool:
    """A machine with a GPU whose run put nothing on it: no CUDA-event spans (device is None here) and a trace
    whose steps ran no CUDA kernel."""
    if not meta.get("gpus") or not op_trace or op_trace.get("error"):
        return False
    gpu = op_trace.get("gpu")
    return gpu is None or not (gpu or {}).get("kernels")


# -- op-level trace: launch analysis -----------------------------------------------------------------------------
def _script_uses(meta: dict, records) -> dict:
    """What the script already does (recorded in its first steps), and a pinned DataLoader."""
    uses = dict(meta.get("script_uses") or {})
    if h2d.loader_pin_memory(records):
        uses["pin_memory"] = "DataLoader(pin_memory=True)"
    return uses


def launch_analysis(run: Run) -> dict | None:
    """Launch-bound statistics and findings from the run's trace (None without one; an unreadable trace is a
    reason, never a failed report)."""
    from haiprof.analyzers.kineto_reader import TraceError

    data, path = run.trace(), run.trace_path()
    if data is None:
        return None
    from haiprof.analyzers import launch   # pandas: only for a run with a trace
    if isinstance(data, TraceError):
        return {"trace": path.name, "error": str(data), "findings": []}
    try:
        events = launch.complete_events(data.events)
        whole = data.metadata.get("haiprof_traced_steps")
        out = launch.analyze_events(events, whole_steps=int(whole) if str(whole).isdigit() else None)
        # Pageable host-to-device copies (Kineto names each copy by its memory kinds): synchronous, never overlapped.
        memcpy = events[events["cat"] == "gpu_memcpy"]
        out["copies"] = h2d.pageable_copies({"name": n, "cat": "gpu_memcpy", "dur": d}
                                            for n, d in zip(memcpy["name"], memcpy["dur_us"]))
        traced_us = (out.get("steps") or 0) * (out.get("step_ms_median") or 0.0) * 1e3
        pageable = h2d.pageable_finding(out["copies"], None, traced_us or None)
        out["findings"] += [pageable] if pageable else []
    except TraceError as e:
        return {"trace": path.name, "error": str(e), "findings": []}
    out["trace"] = path.name
    return out
