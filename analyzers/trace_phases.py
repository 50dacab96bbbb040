"""Training phases and findings from a Kineto trace's annotations.

Phase intervals, in the run directory's phases.jsonl form (name, start_ns, end_ns) so steps.py attributes them
exactly as it does for `haiprof run`:
  step boundary   end of each ProfilerStep#N
  dataloader      enumerate(DataLoader)#... annotations
  forward         from the step start to the first backward event (or Optimizer.step) of the step; nested
                  phases win; "## forward ##"-style annotations where a training loop adds them
  backward        first to last autograd graph node of the step (AUTOGRAD_NODE: today's evaluate_function
                  wrapper, or the bare node of PyTorch 1.8/1.9 traces); on the device, what the autograd engine's
                  own thread launched
  optimizer       Optimizer.step#... / Optimizer.zero_grad#... annotations
  allreduce       on the device, communication kernels not hidden by compute; in GPU-less traces host
                  collectives (gloo:/c10d::/nccl: ops: there they block the host)
  h2d             host-to-device copies on the device not hidden by compute
Device intervals carry the "gpu:" prefix: steps.py then takes those phases from the device timeline.
"""
from __future__ import annotations

import re

import numpy as np

from . import thresholds as T
from .findings import Finding, bound
from .trace_breakdown import COMMUNICATION, COMPUTATION, KIND_CODES, merge, subtract

STEP_PREFIX = "ProfilerStep#"
DATALOADER_PREFIX = "enumerate(DataLoader)"
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#", "## optimizer ##")
FORWARD_PREFIXES = ("## forward ##",)       # explicit annotations some training loops add
BACKWARD_ANNOTATIONS = ("## backward ##",)
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
# An autograd graph node, known by its name. Today's traces wrap each node in an evaluate_function event; PyTorch
# 1.8/1.9 recorded the node alone ("CudnnConvolutionBackward", "ReluBackward1"; "MmBackward0" today). A custom
# Function's node is "<Class>Backward"; the engine's own are "torch::autograd::AccumulateGrad", "CppNode<...>".
# Only the autograd engine runs nodes: none is forward work, whatever thread runs it.
AUTOGRAD_NODE = re.compile(rf"^(?:{re.escape(BACKWARD_PREFIX)}|torch::autograd::)|Backward\d*$")
HOST_COLLECTIVE_PREFIXES = ("gloo:", "c10d::", "nccl:", "record_param_comms")
HOST_CATS = ("cpu_op", "user_annotation")


def _host_mask(ev, prefixes=(), pattern=None) -> np.ndarray:
    """Host events whose name starts with one of `prefixes` or matches `pattern`."""
    names = ev["name"]
    hit = {c for c in names.cat.categories if c.startswith(prefixes) or (pattern and pattern.search(c))}
    return ev["cat"].isin(HOST_CATS).to_numpy() & names.isin(hit).to_numpy()


def _host_intervals(ev, prefixes=(), pattern=None) -> list[tuple[float, float]]:
    m = _host_mask(ev, prefixes, pattern) & ev["dur_us"].notna().to_numpy()
    ts = ev["ts_us"].to_numpy()[m]
    return sorted(zip(ts, ts + ev["dur_us"].to_numpy()[m]))


def exposed_device_us(dev, kind: str, name_prefix: str = "") -> list[tuple[float, float]]:
    m = dev.kind == KIND_CODES[kind]
    if name_prefix:
        m = m & np.array([str(n).startswith(name_prefix) for n in dev.name], dtype=bool)
    s, e = merge(dev.ts_us[m], dev.end_us[m])
    comp = dev.kind == KIND_CODES[COMPUTATION]
    cs, ce = merge(dev.ts_us[comp], dev.end_us[comp])
    return subtract(s, e, cs, ce)


def phase_records(td, dev=None) -> tuple[list, dict]:
    """(records, info) for one rank: phases.jsonl-style records in ns relative to the trace start."""
    ev = td.events
    steps = _host_intervals(ev, (STEP_PREFIX,))
    info = {"profiler_steps": len(steps)}
    if not steps:
        return [], info
    t0 = min(float(ev["ts_us"].min()), steps[0][0])

    def ns(t):
        return int(round((t - t0) * 1000))

    recs = []
    backward = _host_intervals(ev, pattern=AUTOGRAD_NODE)
    optim = _host_intervals(ev, OPTIMIZER_PREFIXES)
    phases = [("dataloader", _host_intervals(ev, (DATALOADER_PREFIX,))), ("optimizer", optim),
              ("forward", _host_intervals(ev, FORWARD_PREFIXES)), ("backward", _host_intervals(ev, BACKWARD_ANNOTATIONS))]
    if dev is None or len(dev) == 0:   # with a device, host collective calls only enqueue work
        phases.append(("allreduce", _host_intervals(ev, HOST_COLLECTIVE_PREFIXES)))
    for name, ivs in phases:
        recs += [[name, ns(a), ns(b)] for a, b in ivs]
    optim = _host_intervals(ev, ("Optimizer.step#",))
    bw_ts = np.array([a for a, _ in backward])
    bw_end = np.array([b for _, b in backward])
    opt_ts = np.array([a for a, _ in optim])
    for a, b in steps:
        inside = (bw_ts >= a) & (bw_ts < b) if len(bw_ts) else np.zeros(0, bool)
        first_other = [b]
        if inside.any():
            recs.append(["backward", ns(bw_ts[inside].min()), ns(min(b, bw_end[inside].max()))])
            first_other.append(bw_ts[inside].min())
        o = opt_ts[(opt_ts >= a) & (opt_ts < b)] if len(opt_ts) else opt_ts
        if len(o):
            first_other.append(o.min())
        recs.append(["forward", ns(a), ns(min(first_other))])
        recs.append(["@step", ns(b), ns(b)])
    if dev is not None and len(dev):
        recs += [["gpu:allreduce", ns(a), ns(b)] for a, b in exposed_device_us(dev, COMMUNICATION)]
        recs += [["gpu:h2d", ns(a), ns(b)] for a, b in exposed_device_us(dev, "MEMORY", "Memcpy HtoD")]
        recs += _device_work(dev, recs, steps, ns, _autograd_threads(ev))
        info["device_phases"] = ["allreduce", "h2d", "forward", "backward", "optimizer"]
    return recs, info


def _autograd_threads(ev) -> set:
    """Threads of the autograd engine: they run autograd nodes and no ProfilerStep (not the main thread, which
    runs backward itself on CPU)."""
    if "tid" not in ev:
        return set()
    engine = set(ev["tid"][_host_mask(ev, pattern=AUTOGRAD_NODE)].tolist())
    main = set(ev["tid"][ev["name"].astype(str).str.startswith(STEP_PREFIX)].tolist())
    return engine - main


WALK_BACK = 32   # host phases looked at backwards for the innermost one around a launch


def _device_work(dev, recs: list, steps: list, ns, autograd_tids: set = frozenset()) -> list:
    """The other device events as `gpu:<phase>` intervals: backward when the autograd engine's thread launched
    them, else the phase the host was in at the launch (the innermost host phase around it; the latest begun
    when none is), and `@gpu-step` marks: each step ends on the device when the last work its host step launched
    ends. The same records `haiprof run` writes, so one engine reads both."""
    host = sorted((r[1], r[0], r[2]) for r in recs if r[0] in ("forward", "backward", "optimizer", "dataloader",
                                                                "h2d"))
    starts = np.array([t for t, _, _ in host], dtype=np.int64)
    names = [p for _, p, _ in host]
    host_ends = [e for _, _, e in host]
    tids = dev.launch_tid if dev.launch_tid is not None else np.full(len(dev), -1)
    comm, mem = KIND_CODES[COMMUNICATION], KIND_CODES["MEMORY"]
    out = []
    launch = dev.launch_ts_us
    for i in range(len(dev)):
        if dev.kind[i] in (comm,) or (dev.kind[i] == mem and str(dev.name[i]).startswith("Memcpy HtoD")):
            continue   # exposed collectives and host-to-device copies are recorded above
        t = launch[i] if not np.isnan(launch[i]) else dev.ts_us[i]
        if autograd_tids and int(tids[i]) in autograd_tids:
            out.append(["gpu:backward", ns(dev.ts_us[i]), ns(dev.end_us[i])])
            continue
        tn = ns(t)
        j = int(np.searchsorted(starts, tn, side="right")) - 1
        k = next((k for k in range(j, max(-1, j - WALK_BACK), -1) if host_ends[k] >= tn), j)
        phase = names[k] if k >= 0 else "forward"
        if phase in ("dataloader", "h2d"):   # work a loader or a copy call enqueued (pinning, casts) is compute
            phase = "forward"
        out.append([f"gpu:{phase}", ns(dev.ts_us[i]), ns(dev.end_us[i])])
    ends = []
    for a, b in steps:
        m = (launch >= a) & (launch < b)
        ends.append(float(dev.end_us[m].max()) if m.any() else b)
    prev = None
    for e in ends:
        e = e if prev is None else max(e, prev)   # device step ends never run backwards
        out.append(["@gpu-step", ns(e), ns(e)])
        prev = e
    return out


def launch_finding(rank, temporal: dict | None, idle: dict, launch: dict) -> dict | None:
    """`launch` when the device waits on the host while many short kernels run (thresholds.py)."""
    if not temporal or temporal["kernel_time_us"] <= 0:
        return None
    host_wait = idle["host_wait_us"] / temporal["kernel_time_us"]
    short = launch.get("kernel_shorter_than_launch_share")
    if short is None:
        short = launch.get("short_kernel_share")
    sev = "high" if host_wait >= T.TRACE_HOST_WAIT_HIGH else "moderate" if host_wait >= T.TRACE_HOST_WAIT_MODERATE \
        else None
    if sev is None or short is None or short < T.TRACE_SHORT_KERNEL_SHARE:
        return None
    p50 = launch["kernel_dur_us"]["p50"]
    return bound(
        "launch", sev, host_wait,
        f"rank {rank}: the device waits on the host {100 * host_wait:.0f}% of the traced span while "
        f"{100 * short:.0f}% of {launch['kernels']} kernels run shorter than their launch call "
        f"(median kernel {p50:.1f} µs, mean launch {launch.get('mean_cpu_launch_us') or 0:.1f} µs)",
        {"rank": rank, "host_wait_share": host_wait, "short_kernel_share": short,
         "kernels": launch["kernels"], "median_kernel_us": p50,
         "thresholds": {"moderate": T.TRACE_HOST_WAIT_MODERATE, "high": T.TRACE_HOST_WAIT_HIGH,
                        "short_kernel_share": T.TRACE_SHORT_KERNEL_SHARE}},
        ["cuda-graphs", "compile", "fused-optim"])


def no_device_finding(rank, host: dict) -> dict:
    top = host["top_ops"][0] if host.get("top_ops") else None
    what = (f"; top operator by self time: {top['name']} ({100 * top['self_share']:.0f}%, {top['count']} calls)"
            if top else "")
    return Finding(kind="no-device", severity="info",
                   message=f"rank {rank}: no GPU activity in this trace (no kernels, copies or device events); "
                           f"host-side analysis only: {host['ops']} operators on {host['threads']} thread(s){what}",
                   evidence={"rank": rank, "ops": host["ops"], "threads": host["threads"]}).as_dict()
