"""Device-first step partition for CUDA runs: what the GPU did in each step, and what the host did while it idled.

CUDA is asynchronous: while the host collates the next batch the GPU may still be computing the last step, so
host time alone misattributes the step. Here every nanosecond of a step *on the device timeline* goes to exactly
one bucket, by the priority the PyTorch TensorBoard plugin uses (kernel > memcpy > memset > runtime > DataLoader >
CPU exec > other):
  busy[phase]   device work: the CUDA-event span of a host phase (`gpu:<phase>` records; copies are `h2d`,
                exposed collectives `allreduce`), innermost span first, as the host partition does;
  idle[cause]   the device ran nothing of ours; the cause is what the host was doing at that instant:
                `dataloader` (waiting for a batch), `h2d` (a synchronous copy), `forward`/`backward`/`optimizer`
                (dispatching: launch overhead), `other` (Python between phases, logging, syncs).
A step on the device runs from the device end of the previous step's work to the device end of its own
(`@gpu-step` marks where the source knows them, e.g. a Kineto trace; otherwise the `gpu:optimizer` span that
closes each optimizer step, aligned with the host's optimizer intervals).

A CUDA-event span covers its phase from the moment the GPU reached its start to the moment it reached its end,
gaps between kernels included. Inside a tracing window the kernels themselves say how much of that span the GPU
computed (`kernel_density`); the rest is the device waiting for the host to launch work.
Pure functions: records in, numbers out.
"""
from __future__ import annotations

import numpy as np

from .step_columns import (ALL_PHASES, CODE, PHASES, STEP_MARK, TRACE_BEGIN, TRACE_END, Split, split_of_records,
                           steady_rows, trace_windows, traced_mask)
from .timeline_owner import K, Intervals, device_partition

from haiprof.rundir.vocabulary import GPU_STEP_MARK

COMPUTE = ("forward", "backward", "optimizer")
# A device span cannot start before the host enqueued it; allow this much clock-mapping error (ns).
ENQUEUE_SLACK_NS = 50_000
BUSY = PHASES + ("unrecorded",)    # device work by phase; "unrecorded": assumed for an unresolved step
_COMPUTE_COLS = [CODE[p] for p in COMPUTE]


class DeviceSteps:
    """The device steps as columns: index (the host step), start_ns, end_ns, busy (n x BUSY ns), idle (n x
    ALL_PHASES ns), traced (the host step overlapped the tracing window), estimated (end estimated: the closing
    CUDA event never resolved; in the step time, not the shares)."""

    def __init__(self, index, start_ns, end_ns, busy, idle, traced, estimated):
        self.index, self.start_ns, self.end_ns = index, start_ns, end_ns
        self.busy, self.idle, self.traced, self.estimated = busy, idle, traced, estimated

    @classmethod
    def empty(cls) -> "DeviceSteps":
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, np.zeros((0, len(BUSY)), np.int64), np.zeros((0, len(ALL_PHASES)), np.int64),
                   np.zeros(0, bool), np.zeros(0, bool))

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def busy_of(self, phase: str) -> np.ndarray:
        return self.busy[:, BUSY.index(phase)]

    def select(self, mask: np.ndarray) -> "DeviceSteps":
        """The steps a mask keeps: views when they are one run of rows (all of them, or all after the warm-up and
        the tracing window), a copy only otherwise."""
        kept = np.flatnonzero(mask)
        if len(kept) and kept[-1] - kept[0] + 1 == len(kept):
            return self.take(slice(int(kept[0]), int(kept[-1]) + 1))
        return self.take(kept)

    def take(self, which) -> "DeviceSteps":
        return DeviceSteps(self.index[which], self.start_ns[which], self.end_ns[which], self.busy[which],
                           self.idle[which], self.traced[which], self.estimated[which])

    def concat(self, other: "DeviceSteps") -> "DeviceSteps":
        return DeviceSteps(*(np.concatenate([getattr(self, c), getattr(other, c)]) for c in
                             ("index", "start_ns", "end_ns", "busy", "idle", "traced", "estimated")))

    def __len__(self) -> int:
        return len(self.index)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return f"DeviceSteps({len(self)} steps)"


def _aligned_ends(host, gpu, step_marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device end, known) of each host step: the end of the `gpu:optimizer` span of the optimizer interval that
    ends at the step mark.

    Spans are emitted in issue order, but the first ones (before the script initialised CUDA) and the last ones
    (never resolved) may be missing. The offset between the two sequences is the largest one under which no span
    starts before its host interval did (the GPU cannot run what was not yet enqueued)."""
    def optimizer(part):
        m = part[0] == CODE["optimizer"]
        s, e = part[1][m], part[2][m]
        order = np.lexsort((e, s))
        return s[order], e[order]

    (hs, he), (gs, ge) = optimizer(host), optimizer(gpu)
    n_host, n_gpu = len(hs), len(gs)
    out, known = np.zeros(len(step_marks), dtype=np.int64), np.zeros(len(step_marks), dtype=bool)
    if not n_gpu or not n_host:
        return out, known
    offset = _offset(hs, gs)
    # the host optimizer interval ending at each mark (the last one, with equal ends)
    order = np.argsort(he, kind="stable")
    i = np.searchsorted(he[order], step_marks, side="right") - 1
    hit = (i >= 0) & (he[order][np.maximum(i, 0)] == step_marks)
    g = np.where(hit, order[np.maximum(i, 0)], -1) - offset
    known = hit & (g >= 0) & (g < n_gpu)
    out[known] = ge[g[known]]
    return out, known


def _offset(hs: np.ndarray, gs: np.ndarray) -> int:
    """The largest o <= len(hs) - len(gs) with gs[j] >= hs[o + j] - slack for every span j, else 0.

    hs is sorted, so span j allows every o up to (the last host start <= its start + slack) - j: one
    searchsorted instead of trying each o (an O(missing spans x spans) scan, minutes for a 10^6-step run that
    lost a span every few steps). With fewer host intervals than spans only o = 0 is possible."""
    top = len(hs) - len(gs)
    if top <= 0:
        return 0
    allowed = np.searchsorted(hs, gs + ENQUEUE_SLACK_NS, side="right") - 1 - np.arange(len(gs))
    return int(min(top, max(0, int(allowed.min()))))


def _never_earlier(ends: np.ndarray, known: np.ndarray) -> np.ndarray:
    """A step ends on the device no earlier than the one before it (spans on several streams can close out of
    order): the steps then tile the device timeline, none negative."""
    return np.maximum.accumulate(np.where(known, ends, np.iinfo(np.int64).min))


def _clip_eval(a: np.ndarray, b: np.ndarray, blocks: list) -> np.ndarray:
    """The start of each window once an evaluation block inside it is cut out (the evaluation block is no step's time)."""
    a = a.copy()
    for bs, be in blocks:   # the one window with a < be < b
        w = int(np.searchsorted(b, be, side="right"))
        if w < len(b) and bs < b[w] and a[w] < be < b[w]:
            a[w] = max(a[w], be)
    return a


def _rows(busy: np.ndarray, idle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """device_partition's (n, K + 1) ns as the BUSY and ALL_PHASES columns, in place: busy's last column ("no
    span ran", the idle total) becomes "unrecorded"."""
    busy[:, K] = 0
    return busy, idle


def device_steps(records=(), split: Split | None = None) -> DeviceSteps:
    """One device step per host step whose device boundaries are known; empty when the run has no device spans.
    `split`: the records' step_columns.Split when the caller has it."""
    if split is None:
        split = split_of_records(records)
    if not split.has_gpu:
        return DeviceSteps.empty()
    step_marks, gpu_marks = split.mark_times(STEP_MARK), split.mark_times(GPU_STEP_MARK)
    if len(gpu_marks) and len(gpu_marks) == len(step_marks):
        ends, known = gpu_marks.astype(np.int64), np.ones(len(gpu_marks), dtype=bool)
    else:
        ends, known = _aligned_ends(split.host, split.gpu, step_marks)
    ends = _never_earlier(ends, known)
    host, gpu = split.intervals("host"), split.intervals("gpu")
    k = np.arange(1, len(step_marks))
    k = k[known[k - 1] & known[k]]
    a, b = ends[k - 1], ends[k]
    a = _clip_eval(a, b, split.eval_blocks(step_marks))   # evaluation between steps is no step's time
    busy, idle = _rows(*device_partition(host, gpu, a, b))
    # Traced: the host step overlapped the profiler window (the profiler slowed the host, not the GPU's work).
    marks = [(TRACE_BEGIN, t) for t in split.mark_times(TRACE_BEGIN).tolist()]
    marks += [(TRACE_END, t) for t in split.mark_times(TRACE_END).tolist()]
    traced = traced_mask(step_marks[k - 1], step_marks[k], trace_windows(marks))
    steps = DeviceSteps(k, a, b, busy, idle, traced, np.zeros(len(k), dtype=bool))
    tail = _unresolved_tail(steps, ends, known, step_marks, host, gpu)
    return steps.concat(tail) if len(tail) else steps


def _unresolved_tail(steps: DeviceSteps, ends, known, step_marks, host: Intervals, gpu: Intervals) -> DeviceSteps:
    """The last steps of a run that ended before their closing CUDA events resolved (a kill, a script that never
    synchronized, recordings of haiprof 0.1.0). They happened, and a clock around the run counts them: leaving
    them out biases the step time towards the faster steps (a final step that waited 200 ms for its batch).

    Each ends, on the device, no earlier than its host end (the GPU cannot finish work before it is enqueued) and
    its last recorded span; the device work not recorded is taken as the usual one (median busy time of the
    resolved steps, less what was recorded). Flagged `estimated`: counted in the step time, not in the shares."""
    last = np.flatnonzero(known)
    resolved = steps.busy[~steps.traced, :K].sum(axis=1)
    if not len(last) or not len(resolved) or last[-1] == len(ends) - 1:
        return DeviceSteps.empty()
    usual = int(np.sort(resolved)[len(resolved) // 2])
    first, a = int(last[-1]) + 1, int(ends[last[-1]])
    gaps = gpu.union_gaps(after=a)
    covered = _covered(*gaps)
    # Each step starts where the one before ended, so the windows are found one after the other; the loop needs
    # only the time some span ran in each (prefix sums), the partition is one call for all of them after it
    # (a call a step took minutes where tens of thousands of steps at a run's end had no aligned span).
    starts, lowers, pads = [], [], []
    for mark in step_marks[first:].tolist():
        # spans enqueued before the host finished this step; the device is still on the previous step when the
        # host marks this one (it runs ahead by the queue)
        i0, i1 = np.searchsorted(gpu.start, [a, mark], side="left")
        lower = max(a, mark, int(gpu.end[i0:i1].max()) if i1 > i0 else a)
        pad = max(0, usual - covered(a, lower))   # device work assumed, not seen: no phase's share
        starts.append(a)
        lowers.append(lower)
        pads.append(pad)
        a = lower + pad
    a, lower, pad = (np.array(x, dtype=np.int64) for x in (starts, lowers, pads))
    busy, idle = _rows(*device_partition(host, gpu, a, lower, gaps=gaps))
    busy[:, -1] = pad
    n = len(a)
    return DeviceSteps(np.arange(first, first + n, dtype=np.int64), a, lower + pad, busy, idle,
                       np.zeros(n, bool), np.ones(n, bool))


def _covered(gap_a: np.ndarray, gap_b: np.ndarray):
    """covered(t0, t1): ns of [t0, t1) some span runs, from the union's gaps (Intervals.union_gaps; t0 at or
    after `after` where it was given); the sum of a device_partition window's busy columns."""
    seg_s, seg_e = gap_b[:-1], gap_a[1:]   # the union's runs, between the gaps
    before = np.concatenate([[0], np.cumsum(seg_e - seg_s)])

    def upto(t: int, i: int) -> int:      # ns covered before t; i: the last run starting at or before t
        return 0 if i < 0 else int(before[i]) + min(t, int(seg_e[i])) - int(seg_s[i])

    def covered(t0: int, t1: int) -> int:
        i0, i1 = np.searchsorted(seg_s, [t0, t1], side="right") - 1
        return upto(t1, i1) - upto(t0, i0)
    return covered


def kernel_busy(busy: dict, density: float | None) -> float:
    """Busy in the one meaning the report uses on CUDA runs, kernels and copies: the compute spans (and work
    assumed for unresolved ones) scaled by the kernel density, copy and collective spans in full."""
    dens = 1.0 if density is None else density
    return sum(v * (dens if p in COMPUTE or p == "unrecorded" else 1.0) for p, v in busy.items())


def kernel_busy_steps(steps: DeviceSteps, density: float | None) -> np.ndarray:
    """kernel_busy of every step (ns)."""
    dens = 1.0 if density is None else density
    scale = np.array([dens if p in COMPUTE or p == "unrecorded" else 1.0 for p in BUSY])
    return steps.busy @ scale


def kernel_density(steps: DeviceSteps, kernel_ns_per_step: float | None) -> float | None:
    """Share of the compute spans in which kernels ran: kernel time per step, from the tracing window's whole
    steps, over the mean CUDA-event compute span of `steps` (the steady ones: the profiler slows the host, and so
    the spans, of the traced steps, not the kernels). None without a trace."""
    if kernel_ns_per_step is None or not len(steps):
        return None
    spans = int(steps.busy[:, _COMPUTE_COLS].sum()) / len(steps)
    if spans <= 0:
        return None
    return max(0.0, min(1.0, kernel_ns_per_step / spans))


def shares(steps: DeviceSteps, density: float | None) -> dict | None:
    """Everything on one denominator, the device step time of `steps`.

    phase_share: busy + idle per phase (the device timeline's answer to "where did the step go").
    bound: io (idle while the host waited for a batch or a synchronous copy, plus the copies themselves),
    compute (kernel time inside the compute spans), communication (exposed collectives) and launch: every other
    moment the GPU waited on the host, i.e. compute spans not filled by kernels, idle while the host dispatched
    forward/backward/optimizer, and idle while it ran Python outside every phase (clipping, logging, batches made
    outside a DataLoader); `launch_parts` keeps the three apart."""
    total = int(steps.duration_ns.sum()) if len(steps) else 0
    if total <= 0:
        return None
    busy_sum, idle_sum = steps.busy.sum(axis=0).tolist(), steps.idle.sum(axis=0).tolist()
    busy = {p: busy_sum[CODE[p]] / total for p in PHASES}
    idle = {p: idle_sum[j] / total for j, p in enumerate(ALL_PHASES)}
    spans = sum(busy[p] for p in COMPUTE)
    dens = 1.0 if density is None else density
    phase_share = {p: busy.get(p, 0.0) + idle[p] for p in ALL_PHASES}
    parts = {"unfilled_spans": spans * (1.0 - dens), "dispatch_idle": sum(idle[p] for p in COMPUTE),
             "host_other_idle": idle["other"]}
    bound = {
        "io": idle["dataloader"] + idle["h2d"] + busy["h2d"],
        "compute": spans * dens,
        "launch": sum(parts.values()),
        "communication": busy["allreduce"] + idle["allreduce"],
    }
    return {"phase_share": phase_share, "bound": bound, "launch_parts": parts, "busy": busy, "idle": idle,
            "busy_share": sum(busy.values()), "idle_share": sum(idle.values()),
            "kernel_density": density, "steps": len(steps), "device_time_s": total / 1e9}


def steady(steps: DeviceSteps, warmup: int) -> DeviceSteps:
    """The device's steady steps: the one rule of every clock (step_columns.steady_rows: after the first
    `warmup` steps with device time, outside the tracing window, without a slow start)."""
    rows = steady_rows(steps.duration_ns, steps.traced, warmup)
    mask = np.zeros(len(steps), dtype=bool)
    mask[rows] = True
    return steps.select(mask)


def measured(steps: DeviceSteps) -> DeviceSteps:
    """The steps whose device time was observed end to end (what shares and kernel density are taken over)."""
    return steps.select(~steps.estimated) if (~steps.estimated).any() else steps


def seconds_per_step(steps: DeviceSteps) -> float | None:
    """Device time over steady steps / their count: what a synchronized clock around them reads."""
    if not len(steps):
        return None
    return int(steps.duration_ns.sum()) / len(steps) / 1e9
