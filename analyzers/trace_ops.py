"""Per-rank host and launch statistics from a Kineto trace: kernel launch pairs (HTA's launch statistics),
kernel-duration distribution, and host operator counts / self time (what is left to say on GPU-less traces).
All times in microseconds."""
from __future__ import annotations

import numpy as np
import pandas as pd

# Host calls that put work on a device queue (HTA's list, plus HIP's so AMD traces get numbers too).
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
                "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtLaunchKernel",
                "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync")
HOST_OP_CATS = ("cpu_op", "user_annotation")


def _pct(values: np.ndarray, q: float):
    return float(np.percentile(values, q)) if len(values) else None


def launch_stats(td, dev, short_kernel_us: float) -> dict:
    """Pair each launch call with the device event it queued (same correlation id)."""
    ev = td.events
    names = ev["name"]
    is_launch = names.isin(LAUNCH_NAMES).to_numpy() & (ev["stream"].to_numpy() == -1)
    launch_ts = ev["ts_us"].to_numpy()[is_launch]
    keep = launch_ts < dev.host_cutoff_us
    launch = pd.DataFrame({"correlation": ev["correlation"].to_numpy()[is_launch][keep],
                           "cpu_ts": launch_ts[keep], "cpu_dur": ev["dur_us"].to_numpy()[is_launch][keep]})
    launch = launch.drop_duplicates("correlation")
    gpu = pd.DataFrame({"correlation": dev.correlation, "gpu_ts": dev.ts_us, "gpu_dur": dev.end_us - dev.ts_us})
    pairs = gpu.merge(launch, on="correlation", how="inner")
    kdur = dev.end_us - dev.ts_us
    out = {"kernels": int(len(dev)), "launches_paired": int(len(pairs)),
           "kernel_dur_us": {"p10": _pct(kdur, 10), "p50": _pct(kdur, 50), "p90": _pct(kdur, 90),
                             "mean": float(kdur.mean()) if len(kdur) else None},
           "short_kernel_share": float((kdur < short_kernel_us).mean()) if len(kdur) else None,
           "short_kernel_threshold_us": short_kernel_us}
    if len(pairs):
        delay = (pairs["gpu_ts"] - pairs["cpu_ts"] - pairs["cpu_dur"]).clip(lower=0)
        out.update(mean_cpu_launch_us=float(pairs["cpu_dur"].mean()), mean_gpu_duration_us=float(pairs["gpu_dur"].mean()),
                   mean_launch_delay_us=float(delay.mean()),
                   kernel_shorter_than_launch_share=float((pairs["gpu_dur"] < pairs["cpu_dur"]).mean()),
                   cpu_launch_total_us=float(pairs["cpu_dur"].sum()), gpu_kernel_total_us=float(pairs["gpu_dur"].sum()))
    else:
        out.update(mean_cpu_launch_us=None, mean_gpu_duration_us=None, mean_launch_delay_us=None,
                   kernel_shorter_than_launch_share=None, cpu_launch_total_us=0.0, gpu_kernel_total_us=0.0)
    return out


def self_times(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Self time of nested intervals on one thread (sorted by start, longer first on ties): duration minus
    the durations of direct children."""
    self_t = end - ts
    stack: list[int] = []
    for i in range(len(ts)):
        while stack and end[stack[-1]] <= ts[i]:
            stack.pop()
        if stack:
            parent = stack[-1]
            self_t[parent] -= min(end[i], end[parent]) - ts[i]
        stack.append(i)
    return np.maximum(self_t, 0.0)


def host_op_stats(td, top: int = 15) -> dict:
    """Operator counts and self time on the host (cpu_op and user_annotation events)."""
    ev = td.events
    m = ev["cat"].isin(HOST_OP_CATS).to_numpy() & ev["dur_us"].notna().to_numpy()
    ops = pd.DataFrame({"name": ev["name"].to_numpy()[m], "tid": ev["tid"].to_numpy()[m],
                        "pid": ev["pid"].to_numpy()[m], "ts": ev["ts_us"].to_numpy()[m],
                        "end": (ev["ts_us"] + ev["dur_us"]).to_numpy()[m]})
    if ops.empty:
        return {"ops": 0, "threads": 0, "busy_us": 0.0, "top_ops": []}
    ops["neg_dur"] = ops["ts"] - ops["end"]
    ops = ops.sort_values(["pid", "tid", "ts", "neg_dur"], kind="stable")
    selfs = np.empty(len(ops))
    pos = 0
    for _, g in ops.groupby(["pid", "tid"], sort=False):
        n = len(g)
        selfs[pos:pos + n] = self_times(g["ts"].to_numpy(), g["end"].to_numpy().copy())
        pos += n
    ops["self_us"] = selfs
    annotation = ops["name"].astype(str).str.startswith(("ProfilerStep#", "enumerate(DataLoader)", "Optimizer."))
    by = ops[~annotation].groupby("name", observed=True).agg(count=("self_us", "size"), self_us=("self_us", "sum"))
    total_self = float(by["self_us"].sum())
    by = by.sort_values("self_us", ascending=False).head(top)
    rows = [{"name": str(n), "count": int(r["count"]), "self_us": float(r["self_us"]),
             "self_share": float(r["self_us"] / total_self) if total_self else 0.0} for n, r in by.iterrows()]
    return {"ops": int((~annotation).sum()), "threads": int(ops.groupby(["pid", "tid"]).ngroups),
            "busy_us": total_self, "median_self_us": float(np.median(ops.loc[~annotation, "self_us"]))
            if (~annotation).any() else None, "top_ops": rows}
