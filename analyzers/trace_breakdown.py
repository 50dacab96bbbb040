"""Device-time breakdowns of Kineto traces, with Holistic Trace Analysis's definitions so the numbers agree.

Definitions (HTA, github.com/facebookresearch/HolisticTraceAnalysis, breakdown/communication analyzers):
  device event   an event with a numeric `stream` arg (kernels, memcpy, memset); with two or more ProfilerStep
                 annotations in the trace, only events launched (same correlation id) by host events that start
                 before the last ProfilerStep, so the last, possibly incomplete step is left out
  span           first device-event start to last device-event end, per rank
  idle           span minus the union of all device events
  compute        union of COMPUTATION events (names that are not communication, memory, sync or launch)
  non-compute    span - idle - compute (communication, memcpy/memset, other device events)
  kernel types   time in which each combination of COMPUTATION / COMMUNICATION / MEMORY runs (sweep over the
                 per-type unions), summed over ranks
  overlap        |communication ∩ computation| / |communication|
Timestamps written with a fraction (ns-resolution traces) are rounded as HTA does: start up, end down.
All times are microseconds; every column and key says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

COMMUNICATION, MEMORY, COMPUTATION, OTHER = "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"
# Kernel-name classes, as HTA defines them (hta/common/types.py), so both tools sort a kernel the same way.
_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)"
    r"|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)")
DEVICE_SYNC_NAMES = ("Event Sync", "Context Sync")
KIND_CODES = {COMPUTATION: 1, COMMUNICATION: 2, MEMORY: 4, OTHER: 0}   # bits for the overlap sweep
KIND_ORDER = (COMPUTATION, COMMUNICATION, MEMORY)


def kernel_kind(name: str) -> str:
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


@dataclass
class DeviceEvents:
    """One rank's device events, sorted by start: numpy columns, µs."""
    rank: int
    ts_us: np.ndarray
    end_us: np.ndarray
    kind: np.ndarray          # KIND_CODES values
    stream: np.ndarray
    correlation: np.ndarray
    name: np.ndarray          # object array of kernel names
    launch_ts_us: np.ndarray  # start of the host event with the same correlation id; NaN when none
    host_cutoff_us: float = np.inf   # host events from here on were left out (the last ProfilerStep)
    launch_tid: np.ndarray | None = None   # thread of the launching host event; -1 when none

    def __len__(self) -> int:
        return len(self.ts_us)


def _times(td) -> tuple[np.ndarray, np.ndarray]:
    ts, dur = td.columns.arrays["ts_us"], td.columns.arrays["dur_us"]
    if td.ts_float:
        end = np.floor(ts + dur)
        ts = np.ceil(ts)
    else:
        end = ts + dur
    return ts, end


def profiler_step_names(traces) -> set:
    names = set()
    for td in traces:
        names.update(c for c in td.columns.categories["name"] if PROFILER_STEP.match(c))
    return names


def device_events(td, rank: int, filter_last_step: bool) -> DeviceEvents:
    """Select the rank's device events (module docstring) and link each to its launching host event."""
    cols = td.columns
    ts, end = _times(td)
    stream = cols.arrays["stream"]
    corr = cols.arrays["correlation"]
    name_codes = cols.arrays["name"]
    rows = ~np.isnan(cols.arrays["dur_us"]) & ~np.isin(cols.arrays["cat"], cols.codes_of("cat", ("", "Trace")))
    sync = np.isin(name_codes, cols.codes_of("name", DEVICE_SYNC_NAMES))
    device_like = ((stream >= 0) & (corr >= 0)) | sync
    host = rows & ~device_like
    last_start = np.inf
    if filter_last_step and host.any():
        step_codes = [i for i, c in enumerate(cols.categories["name"]) if PROFILER_STEP.match(c)]
        steps = host & np.isin(name_codes, step_codes)
        last_start = ts[steps].max() if steps.any() else ts[host].min()
        host = host & (ts < last_start)
        rows = host | (rows & device_like & np.isin(corr, corr[host]))
    sel = rows & (stream != -1)
    idx = np.flatnonzero(sel)
    order = idx[np.argsort(ts[idx], kind="stable")]
    cats = cols.categories["name"]
    kind_of_cat = np.array([KIND_CODES[kernel_kind(c)] for c in cats] or [0], dtype=np.int8)
    codes = name_codes[order]
    kind = kind_of_cat[codes] if len(codes) else np.empty(0, dtype=np.int8)
    names = np.array(cats, dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)
    # launching host event: same correlation id, not itself a device event (the first such row in file order)
    launch = np.full(len(order), np.nan)
    launch_tid = np.full(len(order), -1, dtype=np.int64)
    hosts = np.flatnonzero(host & (corr >= 0))
    if len(hosts) and len(order):
        uniq, first = np.unique(corr[hosts], return_index=True)
        want = corr[order]
        pos = np.minimum(np.searchsorted(uniq, want), len(uniq) - 1)
        hit = uniq[pos] == want
        launch[hit] = ts[hosts[first[pos[hit]]]]
        if "tid" in cols.arrays:
            launch_tid[hit] = cols.arrays["tid"][hosts[first[pos[hit]]]]
    return DeviceEvents(rank, ts[order], end[order], kind, stream[order], corr[order],
                        names, launch, float(last_start), launch_tid)


def merge(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals (ts must be sorted): disjoint (starts, ends)."""
    if len(ts) == 0:
        return ts, end
    reach = np.maximum.accumulate(end)
    new = np.empty(len(ts), dtype=bool)
    new[0] = True
    new[1:] = ts[1:] > reach[:-1]
    starts = ts[new]
    group = np.cumsum(new) - 1
    ends = np.full(len(starts), -np.inf)
    np.maximum.at(ends, group, end)
    return starts, ends


def subtract(s1, e1, s2, e2) -> list[tuple[float, float]]:
    """Parts of the disjoint sorted intervals (s1, e1) not covered by the disjoint sorted (s2, e2)."""
    out, j = [], 0
    for a, b in zip(s1, e1):
        cur = a
        while j < len(s2) and e2[j] <= cur:
            j += 1
        k = j
        while k < len(s2) and s2[k] < b:
            if s2[k] > cur:
                out.append((cur, s2[k]))
            cur = max(cur, e2[k])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def union_us(ts, end) -> float:
    order = np.argsort(ts, kind="stable")
    s, e = merge(ts[order], end[order])
    return float((e - s).sum())


def temporal_breakdown(d: DeviceEvents) -> dict | None:
    """Idle / compute / non-compute over the device span; None when the rank has no device events."""
    if len(d) == 0:
        return None
    s, e = merge(d.ts_us, d.end_us)
    span = float(e[-1] - s[0])
    idle = span - float((e - s).sum())
    comp = d.kind == KIND_CODES[COMPUTATION]
    compute = union_us(d.ts_us[comp], d.end_us[comp])
    non_compute = span - compute - idle

    def pct(x):
        return round(100 * x / span, 2) if span > 0 else 0.0

    return {"rank": d.rank, "idle_time_us": idle, "compute_time_us": compute, "non_compute_time_us": non_compute,
            "kernel_time_us": span, "idle_time_pct": pct(idle), "compute_time_pct": pct(compute),
            "non_compute_time_pct": pct(non_compute)}


def kind_overlap_us(d: DeviceEvents) -> dict:
    """µs during which each combination of kernel kinds runs ("COMPUTATION overlapping COMMUNICATION", ...)."""
    times, deltas = [], []
    for kind in KIND_ORDER:
        bit = KIND_CODES[kind]
        m = d.kind == bit
        s, e = merge(d.ts_us[m], d.end_us[m])
        times += [s, e]
        deltas += [np.full(len(s), bit), np.full(len(e), -bit)]
    t = np.concatenate(times) if times else np.empty(0)
    if len(t) == 0:
        return {}
    delta = np.concatenate(deltas)
    order = np.lexsort((delta, t))       # at equal times, ends (negative) before starts: no phantom overlap
    t, running = t[order], np.cumsum(delta[order])
    seg = np.diff(t)
    state = running[:-1]
    out: dict = {}
    for code in np.unique(state[(state > 0) & (seg > 0)]):
        label = " overlapping ".join(k for k in KIND_ORDER if code & KIND_CODES[k])
        out[label] = float(seg[(state == code)].sum())
    return out


def kernel_type_breakdown(devs: list[DeviceEvents]) -> list[dict]:
    """Across ranks, like HTA's gpu_kernel_type_breakdown with memory kernels included."""
    total: dict = {}
    for d in devs:
        for label, us in kind_overlap_us(d).items():
            total[label] = total.get(label, 0.0) + us
    grand = sum(total.values())
    rows = [{"kernel_type": k, "time_us": v, "percentage": round(100 * v / grand, 1) if grand else 0.0}
            for k, v in total.items()]
    return sorted(rows, key=lambda r: -r["time_us"])


def comm_comp_overlap_pct(d: DeviceEvents) -> float | None:
    """Share of communication time hidden under computation, in %; None without communication kernels."""
    comm = d.kind == KIND_CODES[COMMUNICATION]
    if not comm.any():
        return None
    cs, ce = merge(d.ts_us[comm], d.end_us[comm])
    comp = d.kind == KIND_CODES[COMPUTATION]
    ps, pe = merge(d.ts_us[comp], d.end_us[comp])
    comm_us = float((ce - cs).sum())
    if comm_us <= 0 or len(ps) == 0:
        return 0.0
    both = union_us(np.concatenate([cs, ps]), np.concatenate([ce, pe]))
    inter = comm_us + float((pe - ps).sum()) - both       # |A ∩ B| = |A| + |B| - |A ∪ B|
    return round(100 * inter / comm_us, 2)


def idle_breakdown(d: DeviceEvents, kernel_wait_us: float) -> dict:
    """Device idle gaps per stream split as HTA does: host wait (the next launch started after the previous
    kernel ended: the host was late), kernel wait (a gap shorter than kernel_wait_us: launch overhead), other."""
    out = {"host_wait_us": 0.0, "kernel_wait_us": 0.0, "other_us": 0.0}
    for s in np.unique(d.stream):
        m = d.stream == s
        ts, end, launch = d.ts_us[m], d.end_us[m], d.launch_ts_us[m]
        if len(ts) < 2:
            continue
        prev_end = end[:-1]
        gap = ts[1:] - prev_end
        host_wait = launch[1:] > prev_end               # NaN compares False, as in HTA
        kernel_wait = ~host_wait & (gap < kernel_wait_us)
        out["host_wait_us"] += float(gap[host_wait].sum())
        out["kernel_wait_us"] += float(gap[kernel_wait].sum())
        out["other_us"] += float(gap[~host_wait & ~kernel_wait].sum())
    return out


def device_idle_breakdown(d: DeviceEvents, kernel_wait_us: float) -> dict:
    """The same split on the whole device (all streams merged): each gap between busy periods is host wait when
    the work after it was launched after the gap began. Parts sum to the temporal breakdown's idle time."""
    out = {"host_wait_us": 0.0, "kernel_wait_us": 0.0, "other_us": 0.0}
    if len(d) < 2:
        return out
    reach = np.maximum.accumulate(d.end_us)
    first = np.flatnonzero(d.ts_us[1:] > reach[:-1]) + 1      # first event of each busy period after a gap
    if len(first) == 0:
        return out
    prev_end = reach[first - 1]
    gap = d.ts_us[first] - prev_end
    host_wait = d.launch_ts_us[first] > prev_end
    kernel_wait = ~host_wait & (gap < kernel_wait_us)
    out["host_wait_us"] = float(gap[host_wait].sum())
    out["kernel_wait_us"] = float(gap[kernel_wait].sum())
    out["other_us"] = float(gap[~host_wait & ~kernel_wait].sum())
    return out


def analyse_ranks(traces: dict) -> dict:
    """{rank: DeviceEvents} for {rank: TraceData}, with HTA's step filtering decided across all ranks."""
    filter_last = len(profiler_step_names(traces.values())) >= 2
    return {rank: device_events(td, rank, filter_last) for rank, td in traces.items()}
