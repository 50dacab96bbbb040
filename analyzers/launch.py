"""Launch-bound analysis from an op-level trace: is the step framework/launch overhead or real compute?

Input: a DataFrame of complete trace events with columns name, cat, ts_us, dur_us, pid, tid, and, for GPU traces,
correlation and stream (-1 when absent). Pure functions; thresholds in thresholds.py.

CPU (every trace): op count per step, each op's self time (its duration minus its direct children's), the share of
the step spent in tiny ops (self time < TINY_OP_SELF_US: dispatch overhead dominates) versus compute-heavy ops
(matmul / conv / attention …). Hundreds of tiny ops filling the step is `launch`; big matmuls is `compute`.

GPU (traces with kernels), HTA's definitions (Holistic Trace Analysis, breakdown_analysis.py / cuda_kernel_analysis.py):
  * idle time per stream, per gap between consecutive kernels: host wait when the next kernel's launch call started
    after the previous kernel ended; kernel wait when the gap is below CONSECUTIVE_KERNEL_DELAY_US; other otherwise.
  * launch stats: per launched kernel/memcpy/memset, the launch call's duration (cpu), the kernel's (gpu) and the
    launch delay (kernel start - launch call end, clipped at 0).
Steps are the trace's ProfilerStep#N annotations; without them the whole trace is one step.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from . import thresholds as T
from .findings import bound
from .trace_breakdown import merge, subtract

CPU_OP_CATS = ("cpu_op", "Operator", "operator")
KERNEL_CATS = ("kernel", "Kernel", "mtia_ccp_events")
GPU_EVENT_CATS = KERNEL_CATS + ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
# Runtime calls HTA correlates with device work (cudaLaunchKernel…; MTIA's job submit; async memcpy/memset).
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution")
MEMORY_CALLS = ("cudaMemcpyAsync", "cudaMemsetAsync")
PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
DATALOADER = re.compile(r"^enumerate\(DataLoader\)#")
# a collective on the host (gloo's threads run the transfer; trace_phases.HOST_COLLECTIVE_PREFIXES): the training
# thread waits for it outside any op (DDP's reducer at the end of backward), which is no framework overhead
COLLECTIVE = re.compile(r"^(?:gloo:|c10d::|nccl:|record_param_comms)")
# Ops whose self time is arithmetic, not dispatch, when they are not tiny.
HEAVY_OP = re.compile(
    r"^(aten::)?_*(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|einsum|addmv|mv|dot|conv\w*|convolution\w*|"
    r"\w*_convolution\w*|\w*attention\w*|_?flash\w*|_?efficient\w*|\w*lstm\w*|\w*gru\w*|rnn\w*|cudnn_\w*|"
    r"mkldnn_\w*|_?scaled_mm|_?int_mm|gemm\w*)$", re.IGNORECASE)
HIST_EDGES_US = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 100_000, float("inf"))
TOP_OPS = 15


def _q(values, q: float):
    return float(np.quantile(values, q)) if len(values) else None


def _matches(names, pattern: re.Pattern) -> np.ndarray:
    """`pattern.match` of each name as a bool array, tried once per distinct name: a trace repeats a few hundred
    names tens of thousands of times (matching every row took ~0.2 s of a report)."""
    codes, uniques = pd.factorize(names)
    # the last entry answers code -1 (a missing name): no match, as str.match counts it
    hit = np.array([isinstance(u, str) and pattern.match(u) is not None for u in uniques] + [False], dtype=bool)
    return hit[codes]


# -- steps and self time -----------------------------------------------------------------------------------
def profiler_steps(ev: pd.DataFrame, whole_steps: int | None = None) -> pd.DataFrame:
    """Host-side ProfilerStep#N annotations as (step, ts_us, end_us), sorted; the device copies are skipped.
    `whole_steps`: keep only the first N (a window cut short ends in an unfinished step)."""
    host = ev[(ev["cat"] != "gpu_user_annotation") & _matches(ev["name"], PROFILER_STEP)]
    if "stream" in host:
        host = host[host["stream"] < 0]
    out = pd.DataFrame({"step": host["name"].str.extract(PROFILER_STEP.pattern)[0].astype(int),
                        "ts_us": host["ts_us"], "end_us": host["ts_us"] + host["dur_us"]})
    out = out.drop_duplicates("step").sort_values("ts_us").reset_index(drop=True)
    return out if whole_steps is None else out.head(whole_steps)


def self_times(ops: pd.DataFrame) -> np.ndarray:
    """Each op's duration minus its direct children's on the same thread (a nesting sweep per thread)."""
    n = len(ops)
    ts, dur = ops["ts_us"].to_numpy(float), ops["dur_us"].to_numpy(float)
    end = ts + dur
    child = np.zeros(n)
    threads = pd.factorize(ops["pid"].astype(str) + ":" + ops["tid"].astype(str))[0] if n else []
    order = np.lexsort((-dur, ts, threads)) if n else []
    stack: list[int] = []
    current = None
    for i in order:
        if threads[i] != current:
            stack, current = [], threads[i]
        while stack and end[stack[-1]] <= ts[i]:
            stack.pop()
        if stack:
            child[stack[-1]] += dur[i]
        stack.append(i)
    return np.clip(dur - child, 0.0, None)


def _assign_steps(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Index of the step each timestamp falls in, -1 outside every step."""
    starts, ends = steps["ts_us"].to_numpy(float), steps["end_us"].to_numpy(float)
    idx = np.searchsorted(starts, ts, side="right") - 1
    ok = (idx >= 0) & (ts < ends[np.clip(idx, 0, None)])
    return np.where(ok, idx, -1)


def _steps_or_span(ev: pd.DataFrame, ops: pd.DataFrame, whole_steps=None) -> tuple[pd.DataFrame, str]:
    steps = profiler_steps(ev, whole_steps)
    if len(steps):
        return steps, "ProfilerStep"
    span = pd.DataFrame({"step": [0], "ts_us": [ops["ts_us"].min()],
                         "end_us": [(ops["ts_us"] + ops["dur_us"]).max()]})
    return span, "trace span"


def _histogram(values: np.ndarray) -> list[dict]:
    edges = np.array(HIST_EDGES_US)
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        sel = values[idx == b]
        out.append({"lo_us": float(edges[b]), "hi_us": None if np.isinf(edges[b + 1]) else float(edges[b + 1]),
                    "count": int(len(sel)), "total_us": float(sel.sum())})
    return out


# -- CPU: framework dispatch ------------------------------------------------------------------------------
def _loader_intervals(ev: pd.DataFrame) -> pd.DataFrame:
    """Time inside DataLoader.__next__ (torch.profiler annotates it): input wait, not framework overhead."""
    dl = ev[_matches(ev["name"], DATALOADER)]
    return pd.DataFrame({"ts_us": dl["ts_us"], "end_us": dl["ts_us"] + dl["dur_us"]}).sort_values("ts_us")


def _in_steps(intervals, steps: pd.DataFrame) -> np.ndarray:
    """The time each step overlaps the (start, end) intervals."""
    starts, ends = steps["ts_us"].to_numpy(float), steps["end_us"].to_numpy(float)
    out = np.zeros(len(steps))
    for a, b in intervals:
        out += np.clip(np.minimum(b, ends) - np.maximum(a, starts), 0, None)
    return out


def _collective_wait(ev: pd.DataFrame, ops: pd.DataFrame) -> list[tuple[float, float]]:
    """Time a host collective runs while no op does: the training thread waiting for the transfer between ops."""
    coll = ev[_matches(ev["name"], COLLECTIVE) & ev["dur_us"].notna().to_numpy()]
    if coll.empty:
        return []
    coll = coll.sort_values("ts_us")
    busy = ops.sort_values("ts_us")
    cs, ce = merge(coll["ts_us"].to_numpy(float), (coll["ts_us"] + coll["dur_us"]).to_numpy(float))
    bs, be = merge(busy["ts_us"].to_numpy(float), (busy["ts_us"] + busy["dur_us"].fillna(0)).to_numpy(float))
    return subtract(cs, ce, bs, be)


def cpu_op_stats(ev: pd.DataFrame, whole_steps: int | None = None) -> dict | None:
    """Op counts and self times per step, and how the step divides: heavy ops, other substantial ops, input wait,
    a collective's wait outside ops, and the rest, framework overhead (tiny ops plus the Python and dispatch
    between ops)."""
    ops = ev[ev["cat"].isin(CPU_OP_CATS)].reset_index(drop=True)
    if ops.empty:
        return None
    selft = self_times(ops)
    steps, source = _steps_or_span(ev, ops, whole_steps)
    ts = ops["ts_us"].to_numpy(float)
    where = _assign_steps(ts, steps)
    loader = _loader_intervals(ev)
    in_loader = _assign_steps(ts, loader) >= 0 if len(loader) else np.zeros(len(ops), dtype=bool)
    inside = where >= 0
    names, selft, where, in_loader = ops["name"].to_numpy()[inside], selft[inside], where[inside], in_loader[inside]
    if not len(names):
        return None
    heavy_name = _matches(names, HEAVY_OP)
    tiny = selft < T.TINY_OP_SELF_US
    heavy = heavy_name & ~tiny & ~in_loader
    other = ~tiny & ~heavy_name & ~in_loader
    step_us = (steps["end_us"] - steps["ts_us"]).to_numpy(float)
    total_step = float(step_us.sum())
    loader_us = _in_steps(zip(loader["ts_us"], loader["end_us"]), steps)
    comm_us = _in_steps(_collective_wait(ev, ops), steps)

    def per_step(mask) -> np.ndarray:
        return np.bincount(where[mask], weights=selft[mask], minlength=len(steps))

    def share(us: np.ndarray) -> float:
        # Median over steps of the per-step share: one step stretched by the OS (a busy machine) cannot swing it.
        return float(np.median(np.clip(us / np.where(step_us > 0, step_us, np.inf), 0.0, 1.0)))

    heavy_us, other_us = per_step(heavy), per_step(other)
    framework_us = np.clip(step_us - heavy_us - other_us - loader_us - comm_us, 0.0, None)
    counts = np.bincount(where, minlength=len(steps))
    frame = pd.DataFrame({"name": names, "self_us": selft, "heavy": heavy})
    grouped = frame.groupby("name").agg(count=("self_us", "size"), total_us=("self_us", "sum"),
                                        median_us=("self_us", "median"), heavy=("heavy", "mean"))
    top = grouped.sort_values("total_us", ascending=False).head(TOP_OPS)
    top_ops = [{"name": name, "count": int(r["count"]), "per_step": float(r["count"]) / len(steps),
                "total_ms": float(r["total_us"]) / 1e3, "median_self_us": float(r["median_us"]),
                "share": float(r["total_us"]) / total_step if total_step > 0 else 0.0,
                "kind": "heavy" if r["heavy"] >= 0.5 else ("tiny" if r["median_us"] < T.TINY_OP_SELF_US
                                                           else "other")}
               for name, r in top.iterrows()]
    return {
        "steps": int(len(steps)), "step_source": source,
        "step_ms_median": float(np.median(step_us)) / 1e3,
        "ops_per_step": float(np.median(counts)), "ops_per_step_by_step": [int(c) for c in counts],
        "op_self_us_median": float(np.median(selft)), "op_self_us_p90": _q(selft, 0.9),
        "tiny_op_fraction": float(tiny.mean()),
        "tiny_share": share(per_step(tiny & ~in_loader)),
        "heavy_share": share(heavy_us), "other_op_share": share(other_us), "dataloader_share": share(loader_us),
        "collective_wait_share": share(comm_us),
        # Everything that is neither substantial op work nor input wait: the dispatch cost of tiny ops and the
        # Python / autograd glue between ops. (A tiny op the OS preempted lands in other_op_share, not here.)
        "framework_share": share(framework_us),
        "self_time_histogram": _histogram(selft), "top_ops": top_ops,
    }


# -- GPU: kernels, idle time, launch -----------------------------------------------------------------------
def _runtime_by_correlation(ev: pd.DataFrame) -> pd.DataFrame:
    host = ev[(ev["stream"] < 0) & (ev["correlation"] > 0)]
    return host.drop_duplicates("correlation").set_index("correlation")[["name", "ts_us", "dur_us"]]


def idle_time_breakdown(ev: pd.DataFrame, delay_us: float = T.CONSECUTIVE_KERNEL_DELAY_US) -> list[dict]:
    """HTA's idle-time breakdown per stream: host_wait / kernel_wait / other (µs and ratio of the stream's idle)."""
    gpu = ev[ev["cat"].isin(GPU_EVENT_CATS) & (ev["stream"] >= 0)]
    runtime_ts = _runtime_by_correlation(ev)["ts_us"]
    out = []
    for stream, k in gpu.groupby("stream", sort=False):
        k = k.sort_values("ts_us", kind="stable")
        prev_end = (k["ts_us"] + k["dur_us"]).shift(1)
        gap = k["ts_us"] - prev_end
        launched = k["correlation"].map(runtime_ts)
        host_wait = launched > prev_end
        kernel_wait = ~host_wait & (gap < delay_us)
        sums = {"host_wait": float(gap[host_wait].sum()), "kernel_wait": float(gap[kernel_wait].sum()),
                "other": float(gap[~host_wait & ~kernel_wait].sum())}
        total = sum(sums.values())
        for cat, v in sums.items():
            out.append({"stream": int(stream), "idle_category": cat, "idle_time_us": v,
                        "idle_time_ratio": v / total if total else 0.0})
    return out


def kernel_launch_stats(ev: pd.DataFrame) -> pd.DataFrame:
    """HTA's per-launch table: cpu_duration, gpu_duration, launch_delay (µs) for each correlated launch."""
    host = ev[(ev["stream"] < 0) & ev["name"].isin(LAUNCH_CALLS + MEMORY_CALLS)]
    gpu = ev[(ev["stream"] >= 0) & ev["correlation"].isin(host["correlation"])]
    j = host[["correlation", "ts_us", "dur_us"]].merge(gpu[["correlation", "ts_us", "dur_us"]], on="correlation",
                                                      suffixes=("_cpu", "_gpu"))
    return pd.DataFrame({"correlation": j["correlation"], "cpu_duration": j["dur_us_cpu"],
                         "gpu_duration": j["dur_us_gpu"],
                         "launch_delay": (j["ts_us_gpu"] - j["ts_us_cpu"] - j["dur_us_cpu"]).clip(lower=0)})


def _union_us(starts: np.ndarray, ends: np.ndarray) -> float:
    order = np.argsort(starts, kind="stable")
    total, cur_s, cur_e = 0.0, None, None
    for s, e in zip(starts[order], ends[order]):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def gpu_stats(ev: pd.DataFrame, whole_steps: int | None = None) -> dict | None:
    if "stream" not in ev or "correlation" not in ev:
        return None
    gpu = ev[ev["cat"].isin(GPU_EVENT_CATS) & (ev["stream"] >= 0)]
    kernels = gpu[gpu["cat"].isin(KERNEL_CATS)]
    if kernels.empty:
        return None
    starts, ends = gpu["ts_us"].to_numpy(float), (gpu["ts_us"] + gpu["dur_us"]).to_numpy(float)
    span = float(ends.max() - starts.min())
    busy = _union_us(starts, ends)
    idle_share = max(0.0, span - busy) / span if span > 0 else 0.0
    idle = idle_time_breakdown(ev)
    by_cat = {c: sum(r["idle_time_us"] for r in idle if r["idle_category"] == c)
              for c in ("host_wait", "kernel_wait", "other")}
    idle_total = sum(by_cat.values())
    host_wait_fraction = by_cat["host_wait"] / idle_total if idle_total > 0 else 0.0
    launches = kernel_launch_stats(ev)
    kdur = kernels["dur_us"].to_numpy(float)
    kl = launches[launches["correlation"].isin(kernels["correlation"])]
    short_fraction = float((kl["gpu_duration"] < kl["cpu_duration"]).mean()) if len(kl) else None
    runtime = _runtime_by_correlation(ev)
    launch_ts = kernels["correlation"].map(runtime["ts_us"]).fillna(kernels["ts_us"]).to_numpy(float)
    steps, source = _steps_or_span(ev, kernels, whole_steps)
    where = _assign_steps(launch_ts, steps)
    inside = where >= 0
    per_step = np.bincount(where[inside], minlength=len(steps)) if inside.any() else np.zeros(len(steps))
    # Kernel time of the whole steps only (a partial step at either end would skew a per-step figure).
    kernel_per_step = (float(kdur[inside].sum()) / len(steps)) if inside.any() and len(steps) else None
    host_launch = ev[(ev["stream"] < 0) & ev["name"].isin(LAUNCH_CALLS + MEMORY_CALLS)]
    return {
        "kernels": int(len(kernels)), "steps": int(len(steps)), "step_source": source,
        "kernels_per_step": float(np.median(per_step)),
        "kernel_us_median": float(np.median(kdur)), "kernel_us_p90": _q(kdur, 0.9),
        "kernel_us_mean": float(kdur.mean()), "kernel_duration_histogram": _histogram(kdur),
        "short_kernel_fraction": short_fraction,
        "cpu_launch_us": float(host_launch["dur_us"].sum()), "gpu_kernel_us": float(kdur.sum()),
        "kernel_us_per_step": kernel_per_step,
        "span_us": span, "busy_us": busy, "idle_share": idle_share,
        "idle_us": by_cat, "host_wait_fraction": host_wait_fraction,
        "launch_share": idle_share * host_wait_fraction,
        "idle_by_stream": idle,
        "launch_stats": {"n": int(len(launches)),
                         "mean_cpu_duration": float(launches["cpu_duration"].mean()) if len(launches) else None,
                         "mean_gpu_duration": float(launches["gpu_duration"].mean()) if len(launches) else None,
                         "mean_launch_delay": float(launches["launch_delay"].mean()) if len(launches) else None},
    }


# -- findings -----------------------------------------------------------------------------------------------
def _grade(value: float, moderate: float, high: float) -> str | None:
    return "high" if value >= high else "moderate" if value >= moderate else None


def launch_findings(stats: dict) -> list[dict]:
    """A `launch` finding when the device (GPU) or the framework (CPU) spends the step on launch overhead."""
    findings = []
    g = stats.get("gpu")
    if g and g.get("short_kernel_fraction") is not None and g["short_kernel_fraction"] >= T.SHORT_KERNEL_FRACTION:
        sev = _grade(g["launch_share"], T.GPU_LAUNCH_MODERATE, T.GPU_LAUNCH_HIGH)
        if sev:
            findings.append(bound(
                "launch", sev, g["launch_share"],
                f"the GPU waits on the host for {100 * g['launch_share']:.0f}% of its kernel span "
                f"({g['kernels_per_step']:.0f} kernels per step, median kernel "
                f"{g['kernel_us_median']:.1f} µs, {100 * g['short_kernel_fraction']:.0f}% of kernels "
                f"shorter than their launch call)",
                {k: g[k] for k in ("kernels_per_step", "kernel_us_median", "short_kernel_fraction",
                                   "idle_share", "host_wait_fraction", "launch_share",
                                   "cpu_launch_us", "gpu_kernel_us")}
                | {"thresholds": {"moderate": T.GPU_LAUNCH_MODERATE, "high": T.GPU_LAUNCH_HIGH,
                                  "short_kernel_fraction": T.SHORT_KERNEL_FRACTION}}))
        return findings
    c = stats.get("cpu")
    if g is None and c and c["ops_per_step"] >= T.LAUNCH_MIN_OPS_PER_STEP:
        sev = _grade(c["framework_share"], T.LAUNCH_MODERATE, T.LAUNCH_HIGH)
        if sev == "high" and c["framework_share"] <= c["heavy_share"]:
            sev = "moderate"   # launch-bound means the overhead outweighs the real compute
        if sev:
            findings.append(bound(
                "launch", sev, c["framework_share"],
                f"{100 * c['framework_share']:.0f}% of step time is framework overhead (dispatching "
                f"tiny ops and the Python between them): "
                f"{c['ops_per_step']:.0f} ops per step, median op self time "
                f"{c['op_self_us_median']:.1f} µs; compute-heavy ops (matmul/conv/attention) take "
                f"{100 * c['heavy_share']:.0f}% (over {c['steps']} traced steps)",
                {k: c[k] for k in ("ops_per_step", "op_self_us_median", "framework_share", "tiny_share",
                                   "heavy_share", "other_op_share", "dataloader_share", "steps",
                                   "step_ms_median")}
                | {"thresholds": {"moderate": T.LAUNCH_MODERATE, "high": T.LAUNCH_HIGH,
                                  "tiny_op_self_us": T.TINY_OP_SELF_US,
                                  "min_ops_per_step": T.LAUNCH_MIN_OPS_PER_STEP}}))
    return findings


def analyze_events(ev: pd.DataFrame, whole_steps: int | None = None) -> dict:
    """Everything above for one trace: {"cpu": …, "gpu": …, "findings": […]}; the stats are JSON-ready.
    `whole_steps`: how many ProfilerSteps are complete (haiprof's trace metadata), None for all."""
    stats = {"cpu": cpu_op_stats(ev, whole_steps), "gpu": gpu_stats(ev, whole_steps)}
    stats["findings"] = launch_findings(stats)
    # the traced steps and their median time, at the top: what the run's analysis weighs the trace's copies
    # against (analysis/summary.py: the pageable copies' share of the traced time)
    stats.update({k: (stats["cpu"] or {}).get(k) for k in ("steps", "step_ms_median")})
    return stats


def complete_events(events):
    """The trace reader's frame (kineto_reader.read_trace) as this module reads it: duration ("X") events only,
    with plain-string name/cat/ph."""
    out = events[events["ph"] == "X"].copy()
    for col in ("name", "cat", "ph"):
        out[col] = out[col].astype(str)
    return out
