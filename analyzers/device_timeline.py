"""Device-first step partition for CUDA runs: what the GPU did in each step, and what the host did while it idled.

CUDA is asynchronous: while the host collates the next batch the GPU may still be computing the last step, so
host time alone misattributes the step. Here every nanosecond of a step *on the device timeline* goes to exactly
one bucket, by the priority the PyTorch TensorBoard plugin uses (kernel > memcpy > memset > runtime > DataLoader >
CPU exec > other):
  busy[phase]   device work: the CUDA-event span of a host phase (`gpu:<phase>` records; copies are `h2d`,
                exposed collectives `allreduce`), innermost span first, as steps.attribute does for the host;
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

from dataclasses import dataclass, field

from .steps import ALL_PHASES, STEP_MARK, attribute, clip_eval, eval_blocks, split_records, trace_windows

COMPUTE = ("forward", "backward", "optimizer")
GPU_STEP_MARK = "@gpu-step"
# A device span cannot start before the host enqueued it; allow this much clock-mapping error (ns).
ENQUEUE_SLACK_NS = 50_000


@dataclass
class DeviceStep:
    index: int                 # the host step it belongs to (steps.Step.index)
    start_ns: int
    end_ns: int
    busy: dict = field(default_factory=dict)     # phase -> ns of device work
    idle: dict = field(default_factory=dict)     # host phase at the time -> ns the device sat idle
    traced: bool = False
    estimated: bool = False    # end estimated (closing CUDA event never resolved): in the step time, not the shares

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _aligned_ends(host: list, gpu: list, step_marks: list) -> list:
    """Device end of each host step: the `gpu:optimizer` span of the optimizer interval that ends at the step mark.

    Spans are emitted in issue order, but the first ones (before the script initialised CUDA) and the last ones
    (never resolved) may be missing. The offset between the two sequences is the largest one under which no span
    starts before its host interval did (the GPU cannot run what was not yet enqueued)."""
    host_opt = sorted((s, e) for p, s, e in host if p == "optimizer")
    gpu_opt = sorted((s, e) for p, s, e in gpu if p == "optimizer")
    n_host, n_gpu = len(host_opt), len(gpu_opt)
    if not n_gpu or not n_host:
        return [None] * len(step_marks)
    offset = next((o for o in range(max(0, n_host - n_gpu), -1, -1)
                   if all(gpu_opt[i][0] >= host_opt[i + o][0] - ENQUEUE_SLACK_NS
                          for i in range(n_gpu) if i + o < n_host)), 0)
    by_end = {e: j for j, (_, e) in enumerate(host_opt)}
    out = []
    for mark in step_marks:
        j = by_end.get(mark)
        g = None if j is None else j - offset
        out.append(gpu_opt[g][1] if g is not None and 0 <= g < n_gpu else None)
    return out


def _idle_segments(gpu: list, a: int, b: int) -> list[tuple[int, int]]:
    spans = sorted((max(s, a), min(e, b)) for _, s, e in gpu)
    out, cur = [], a
    for s, e in spans:
        if s > cur:
            out.append((cur, s))
        cur = max(cur, e)
    if cur < b:
        out.append((cur, b))
    return out


def partition(gpu: list, host: list, a: int, b: int) -> tuple[dict, dict]:
    """(busy, idle) nanoseconds of the device window [a, b); together they sum to b - a."""
    g = [iv for iv in gpu if iv[2] > a and iv[1] < b]
    busy = attribute(g, a, b)
    busy.pop("other")
    h = [iv for iv in host if iv[2] > a and iv[1] < b]
    idle = dict.fromkeys(ALL_PHASES, 0)
    for s, e in _idle_segments(g, a, b):
        for phase, ns in attribute(h, s, e).items():
            idle[phase] += ns
    return busy, idle


def device_steps(records, split: tuple | None = None) -> list[DeviceStep]:
    """One DeviceStep per host step whose device boundaries are known; [] when the run has no device spans."""
    records = records if isinstance(records, list) else list(records)
    columns = hasattr(split, "legacy")   # a step_columns.Split: its tuples for the sweeps below
    host, gpu, marks = split.legacy() if columns else split if split is not None else split_records(records)
    if not gpu:
        return []
    step_marks = sorted(t for name, t in marks if name == STEP_MARK)
    gpu_marks = sorted(t for name, t in marks if name == GPU_STEP_MARK)
    ends = gpu_marks if gpu_marks and len(gpu_marks) == len(step_marks) else _aligned_ends(host, gpu, step_marks)
    ends = _never_earlier(ends)
    windows = trace_windows(marks)
    # evaluation between steps is no step's time
    blocks = split.eval_blocks(step_marks) if columns else eval_blocks(records, step_marks)
    out = []
    for k in range(1, len(step_marks)):
        a, b = ends[k - 1], ends[k]
        if a is None or b is None:
            continue
        a = clip_eval(a, b, blocks)
        busy, idle = partition(gpu, host, a, b)
        # Traced: the host step overlapped the profiler window (the profiler slowed the host, not the GPU's work).
        traced = any(step_marks[k] > wb and step_marks[k - 1] < we for wb, we in windows)
        out.append(DeviceStep(k, a, b, busy, idle, traced))
    return out + _unresolved_tail(out, ends, step_marks, host, gpu)


def _never_earlier(ends: list) -> list:
    """A step ends on the device no earlier than the one before it (spans on several streams can close out of
    order): the steps then tile the device timeline, none negative."""
    out, last = [], None
    for e in ends:
        if e is not None and last is not None and e < last:
            e = last
        out.append(e)
        last = e if e is not None else last
    return out


def _unresolved_tail(steps: list[DeviceStep], ends: list, step_marks: list, host: list, gpu: list) -> list:
    """The last steps of a run that ended before their closing CUDA events resolved (a kill, a script that never
    synchronized, recordings of haiprof 0.1.0). They happened, and a clock around the run counts them: leaving
    them out biases the step time towards the faster steps (a final step that waited 200 ms for its batch).

    Each ends, on the device, no earlier than its host end (the GPU cannot finish work before it is enqueued) and
    its last recorded span; the device work not recorded is taken as the usual one (median busy time of the
    resolved steps, less what was recorded). Flagged `estimated`: counted in the step time, not in the shares."""
    known = [k for k, e in enumerate(ends) if e is not None]
    resolved = [st for st in steps if not st.traced]
    if not known or not resolved or known[-1] == len(ends) - 1:
        return []
    busy_ns = sorted(sum(st.busy.values()) for st in resolved)
    usual = busy_ns[len(busy_ns) // 2]
    out, a = [], ends[known[-1]]
    for k in range(known[-1] + 1, len(step_marks)):
        mark = step_marks[k]
        mine = [iv for iv in gpu if a <= iv[1] < mark]     # enqueued before the host finished this step
        # the device is still on the previous step when the host marks this one (it runs ahead by the queue)
        lower = max([a, mark] + [e for _, _, e in mine])
        busy, idle = partition(gpu, host, a, lower)
        unrecorded = max(0, usual - sum(busy.values()))
        busy["unrecorded"] = unrecorded     # device work assumed, not seen: no phase of its own in the shares
        b = lower + unrecorded
        out.append(DeviceStep(k, a, b, busy, idle, estimated=True))
        a = b
    return out


def kernel_busy(busy: dict, density: float | None) -> float:
    """Busy in the one meaning the report uses on CUDA runs, kernels and copies: the compute spans (and work
    assumed for unresolved ones) scaled by the kernel density, copy and collective spans in full."""
    dens = 1.0 if density is None else density
    return sum(v * (dens if p in COMPUTE or p == "unrecorded" else 1.0) for p, v in busy.items())


def kernel_density(steps: list[DeviceStep], kernel_ns_per_step: float | None) -> float | None:
    """Share of the compute spans in which kernels ran: kernel time per step, from the tracing window's whole
    steps, over the mean CUDA-event compute span of `steps` (the steady ones: the profiler slows the host, and so
    the spans, of the traced steps, not the kernels). None without a trace."""
    if kernel_ns_per_step is None or not steps:
        return None
    spans = sum(st.busy.get(p, 0) for st in steps for p in COMPUTE) / len(steps)
    if spans <= 0:
        return None
    return max(0.0, min(1.0, kernel_ns_per_step / spans))


def shares(steps: list[DeviceStep], density: float | None) -> dict | None:
    """Everything on one denominator, the device step time of `steps`.

    phase_share: busy + idle per phase (the device timeline's answer to "where did the step go").
    bound: io (idle while the host waited for a batch or a synchronous copy, plus the copies themselves),
    compute (kernel time inside the compute spans), communication (exposed collectives) and launch: every other
    moment the GPU waited on the host, i.e. compute spans not filled by kernels, idle while the host dispatched
    forward/backward/optimizer, and idle while it ran Python outside every phase (clipping, logging, batches made
    outside a DataLoader); `launch_parts` keeps the three apart."""
    total = sum(st.duration_ns for st in steps)
    if total <= 0:
        return None
    busy = {p: sum(st.busy.get(p, 0) for st in steps) / total for p in ALL_PHASES if p != "other"}
    idle = {p: sum(st.idle.get(p, 0) for st in steps) / total for p in ALL_PHASES}
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


def steady(steps: list[DeviceStep], warmup: int) -> list[DeviceStep]:
    """Steps after warm-up (the first `warmup` host steps, and the slow start of a torch.compile or CUDA-graph
    run: leading steps longer than LEADING_SLOW x the median of the rest) and outside the tracing window."""
    kept = [st for st in steps if st.index > warmup and not st.traced]
    if len(kept) < 2:
        kept = [st for st in steps if not st.traced] or steps
    return _drop_slow_start(kept)


LEADING_SLOW = 3.0


def _drop_slow_start(steps: list[DeviceStep]) -> list[DeviceStep]:
    if len(steps) < 4:
        return steps
    durations = sorted(st.duration_ns for st in steps)
    median = durations[len(durations) // 2]
    i = 0
    while i < len(steps) // 2 and steps[i].duration_ns > LEADING_SLOW * median:
        i += 1
    return steps[i:]


def measured(steps: list[DeviceStep]) -> list[DeviceStep]:
    """The steps whose device time was observed end to end (what shares and kernel density are taken over)."""
    return [st for st in steps if not st.estimated] or steps


def seconds_per_step(steps: list[DeviceStep]) -> float | None:
    """Device time over steady steps / their count: what a synchronized clock around them reads."""
    if not steps:
        return None
    return sum(st.duration_ns for st in steps) / len(steps) / 1e9

