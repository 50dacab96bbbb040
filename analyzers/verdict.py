"""Findings and the one-sentence verdict, from phase shares (and findings other analyzers add, e.g. launch).

Decision (thresholds in thresholds.py):
  1. fewer than MIN_STEPS steps                         -> none ("no training steps detected" when zero)
  2. the classes that can be the verdict: io / communication / launch at or above its HIGH, compute when
     forward + backward + optimizer >= COMPUTE_DOMINANT (on the device timeline: any class graded high or
     filling DEVICE_VERDICT_MIN of the step)
  3. among them, the one with the most removable time (share x REMOVABLE: what its own fix can take off at
     most) -> the verdict; its severity is at least that of every class ranked below it, and the headline gives
     its share, its removable ms and the runner-up's
  4. none of them                                        -> none (nothing dominates)
"""
from __future__ import annotations

import re

from . import thresholds as T
from .device_timeline import kernel_busy
from .findings import FIXES_FOR, Finding, bound, edited

LABEL = {"io": "Input-bound", "communication": "Communication-bound", "compute": "Compute-bound",
         "launch": "Launch-bound", "none": "No clear bottleneck"}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _grade(value: float, moderate: float, high: float) -> str | None:
    if value >= high:
        return "high"
    if value >= moderate:
        return "moderate"
    return None


def _ms(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f} ms"


def phase_findings(share: dict, steps: int, median_s, steady_s=None) -> list[dict]:
    """Findings that follow from phase shares alone; messages quote the steady step time (median_s when absent)."""
    per_step = f"{_ms(steady_s if steady_s is not None else median_s)}/step over {steps} steps"
    findings = []
    io = share.get("dataloader", 0.0) + share.get("h2d", 0.0)
    sev = _grade(io, T.IO_MODERATE, T.IO_HIGH)
    if sev:
        what = "waits for the DataLoader" if share.get("dataloader", 0) >= share.get("h2d", 0) \
            else "is spent copying batches to the device"
        findings.append(bound(
            "io", sev, io,
            f"{_pct(io)} of step time {what} (dataloader {_pct(share.get('dataloader', 0))}, "
            f"h2d {_pct(share.get('h2d', 0))}; {per_step})",
            {"dataloader_share": share.get("dataloader", 0.0), "h2d_share": share.get("h2d", 0.0),
             "median_step_s": median_s, "steady_step_s": steady_s, "steps": steps,
             "thresholds": {"moderate": T.IO_MODERATE, "high": T.IO_HIGH}}))
    comm = share.get("allreduce", 0.0)
    sev = _grade(comm, T.COMM_MODERATE, T.COMM_HIGH)
    if sev:
        findings.append(bound(
            "communication", sev, comm,
            f"{_pct(comm)} of step time is exposed communication (collectives not hidden by compute)",
            {"allreduce_share": comm, "median_step_s": median_s, "steady_step_s": steady_s, "steps": steps,
             "thresholds": {"moderate": T.COMM_MODERATE, "high": T.COMM_HIGH}}))
    compute = share.get("forward", 0.0) + share.get("backward", 0.0) + share.get("optimizer", 0.0)
    if compute >= T.COMPUTE_DOMINANT:
        fixes = list(FIXES_FOR["compute"])
        if share.get("optimizer", 0.0) >= 0.10:
            fixes.append("fused-optim")
        findings.append(bound(
            "compute", "high" if compute >= 0.8 else "moderate", compute,
            f"{_pct(compute)} of step time is compute: forward {_pct(share.get('forward', 0))}, "
            f"backward {_pct(share.get('backward', 0))}, optimizer {_pct(share.get('optimizer', 0))} "
            f"({per_step})",
            {"forward_share": share.get("forward", 0.0), "backward_share": share.get("backward", 0.0),
             "optimizer_share": share.get("optimizer", 0.0), "median_step_s": median_s, "steady_step_s": steady_s,
             "steps": steps, "threshold": T.COMPUTE_DOMINANT}, fixes))
    other = share.get("other", 0.0)
    if other >= T.OTHER_MODERATE:
        findings.append(Finding(
            kind="other", severity="moderate", share=other,
            message=f"{_pct(other)} of step time is outside the measured phases (Python between phases, "
                    f"logging, host-device syncs such as .item())",
            evidence={"other_share": other, "threshold": T.OTHER_MODERATE}).as_dict())
    return findings


def clock_of(f: dict) -> str:
    """The clock a finding's share is of: "device" (the CUDA timeline) or "host"."""
    return "device" if (f.get("evidence") or {}).get("timeline") == "device" else "host"


def host_launch_on_the_step(findings: list[dict], share: dict) -> None:
    """The host launch finding is measured on the few traced steps (a trace's framework overhead over its steps'
    time less their input wait); every other host share is of the steady step. Quoted beside each other the two
    add past 100% when the traced steps did not wait for input the way the steady ones do (a fixed loader's
    queue full during the window: io 96% beside launch 83%). So the launch share is carried onto the steady step:
    the same fraction of the part of it that is not input wait."""
    at = next((i for i, f in enumerate(findings) if f.get("kind") == "launch" and clock_of(f) == "host"), None)
    if at is None:
        return
    launch = findings[at]
    ev = launch.get("evidence") or {}
    work = 1.0 - ev.get("dataloader_share", 0.0)                       # of the traced steps
    outside_input = max(0.0, 1.0 - share.get("dataloader", 0.0) - share.get("h2d", 0.0))   # of the steady step
    fraction = min(1.0, launch.get("share", 0.0) / work) if work > 0 else 0.0
    on_step = fraction * outside_input
    if abs(on_step - launch.get("share", 0.0)) < 0.005:
        return   # the traced steps are the steady ones' kind: nothing to carry
    heavy = min(1.0, ev.get("heavy_share", 0.0) / work) * outside_input if work > 0 else 0.0
    severity = _grade(on_step, T.LAUNCH_MODERATE, T.LAUNCH_HIGH) or "low"
    if severity == "high" and on_step <= heavy:
        severity = "moderate"   # as launch.launch_findings: the overhead must outweigh the real compute
    detail = launch["message"].split(": ", 1)[1] if ": " in launch["message"] else launch["message"]
    findings[at] = edited(
        launch, share=on_step, severity=severity,
        message=(f"{_pct(on_step)} of step time is framework overhead (dispatching tiny ops and the Python between "
                 f"them): {_pct(fraction)} of the traced steps' work (their time outside input waits), and the "
                 f"steady step waits for input {_pct(1 - outside_input)} of the time; {detail}"),
        evidence={**ev, "traced_framework_share": launch.get("share", 0.0), "framework_share_of_work": fraction,
                  "steady_outside_input_share": outside_input})


def split_host_compute(findings: list[dict]) -> None:
    """On the host clock the framework overhead a trace measures (the launch finding: dispatching tiny ops and the
    Python between them) runs inside the forward/backward/optimizer phases that the compute finding counts. Quoted
    side by side they would add past 100% of the step, so the compute finding keeps the rest: one partition."""
    launch = next((f for f in findings if f.get("kind") == "launch" and clock_of(f) == "host"), None)
    compute = next((f for f in findings if f.get("kind") == "compute" and clock_of(f) == "host"), None)
    if launch is None or compute is None:
        return
    phases, overhead = compute.get("share", 0.0), min(launch.get("share", 0.0), compute.get("share", 0.0))
    rest = phases - overhead
    message = (f"{_pct(rest)} of step time is the ops' own compute: the forward/backward/optimizer phases take "
               f"{_pct(phases)}, of which framework overhead (the launch finding) is {_pct(overhead)}"
               + (f" ({compute['message'].split(' (', 1)[1]}" if " (" in compute["message"] else ""))
    severity = compute["severity"] if rest >= T.COMPUTE_DOMINANT else \
        "moderate" if rest >= T.COMPUTE_DOMINANT / 2 else "low"
    at = next(i for i, f in enumerate(findings) if f is compute)
    findings[at] = edited(compute, share=rest, message=message, severity=severity,
                          evidence={**(compute.get("evidence") or {}), "phases_share": phases,
                                    "framework_overhead_share": overhead})


BOUND_KINDS = ("io", "compute", "launch", "communication")
_SEVERITY = {"info": 0, "low": 1, "moderate": 2, "high": 3}


def removable(f: dict) -> float:
    """Share of the step the finding's own fix can take off at most (0 for kinds that are no bound class).
    Compute on a host timeline (CPU runs) takes REMOVABLE_CPU_COMPUTE, on the device timeline REMOVABLE's."""
    kind = f.get("kind")
    if kind not in BOUND_KINDS:
        return 0.0
    factor = T.REMOVABLE[kind]
    if kind == "compute" and (f.get("evidence") or {}).get("timeline") != "device":
        factor = T.REMOVABLE_CPU_COMPUTE
    return f.get("share", 0.0) * factor


def fix_can_remove(top: dict, fix: str, predicted: dict | None = None) -> float:
    """The most one of the finding's fixes can take off the step: with a prediction the time of what it touches
    (analyzers/whatif.py), without one the class's `removable` share."""
    touches = ((predicted or {}).get(fix) or {}).get("touches_share")
    return removable(top) if touches is None else touches


def fixes_can_remove(top: dict, left_out: dict | None = None, predicted: dict | None = None) -> float:
    """The most the finding's open fixes (not left out) can take off the step, each as `headline` quotes it
    (fix_can_remove); 0 when none is open. What a periodic stall must outweigh to lead (analyzers/stall_verdict.py)."""
    return max((fix_can_remove(top, x, predicted) for x in top.get("fixes") or [] if x not in (left_out or {})),
               default=0.0)


def _step_s(f: dict) -> float | None:
    ev = f.get("evidence") or {}
    return ev.get("steady_step_s") or ev.get("median_step_s")


# The headline's subject, per class and clock: one phrase, one number after it (the finding's share). The detail
# (busy, density, the runner-up) is the finding's message, shown as evidence below the headline.
SUBJECT = {
    ("io", "device"): "the GPU waited for input",
    ("launch", "device"): "the GPU waited on the host",
    ("compute", "device"): "the GPU computed",
    ("communication", "device"): "the GPU waited on exposed communication",
    ("io", "host"): "the training loop waited for input",
    ("launch", "host"): "framework overhead took",
    ("compute", "host"): "forward, backward and optimizer computed",
    ("communication", "host"): "exposed communication took",
}




def headline(top: dict, step_s: float | None, left_out: dict | None = None, predicted: dict | None = None) -> str:
    """One sentence: the verdict, its share of the step, and what its first applicable fix can remove at most
    (ms of that same step) and is predicted to (analyzers/whatif.py: its fixes best predicted first, at most
    the time of what that fix touches). Fixes left out (in use, applied, not worth it) are named as such."""
    left_out, predicted = left_out or {}, predicted or {}
    share, gain = top.get("share", 0.0), removable(top)
    step = f" of the {step_s * 1e3:.1f} ms step" if step_s else " of the step"
    subject = SUBJECT.get((top["kind"], clock_of(top)), f"{top['kind']} took")
    exposed = (top.get("evidence") or {}).get("exposed_comm_share") if top["kind"] == "communication" else None
    waiting = ""
    if isinstance(exposed, (int, float)) and exposed > share + 0.005:   # graded on the transfer: say which part
        subject = "the exposed gradient transfer took"
        waiting = f" (exposed communication {_pct(exposed)}: the rest waits for the slowest rank)"
    sentence = f"{LABEL[top['kind']]} ({top['severity']}): {subject} {_pct(share)}{step}{waiting}"
    # an input-bound verdict names which (analyzers/input_split.py): storage, latency or preprocessing
    split = re.search(r"\b(storage|latency|preprocessing)-bound\b", top.get("message") or "")
    if top["kind"] == "io" and split:
        sentence += f" ({split.group(0)})"
    fixes = list(top.get("fixes") or [])
    open_ = by_prediction([x for x in fixes if x not in left_out], predicted)
    p = predicted.get(open_[0]) if open_ else None
    gain = fix_can_remove(top, open_[0], predicted) if open_ else gain   # the time of what that fix touches
    if open_ and gain > 0:
        ms = f"{gain * step_s * 1e3:.1f} ms of it ({_pct(gain)})" if step_s else f"{_pct(gain)} of it"
        sentence += f"; --fix {open_[0]} can remove at most {ms}"
        if p and step_s:
            sentence += f", predicted {p['gain_share'] * step_s * 1e3:.1f} ms ({_pct(p['gain_share'])})"
    elif fixes:
        sentence += "; its fixes are left out: " + "; ".join(f"{x} ({left_out[x]})" for x in fixes)
    return sentence + "."


def by_prediction(fixes: list, predicted: dict) -> list:
    """Fixes best predicted gain first (stable: the analyzers' order among equals and unpredicted ones)."""
    return sorted(fixes, key=lambda x: -((predicted.get(x) or {}).get("gain_share") or 0.0))


def _choose(eligible: list[dict], ranked: list[dict], findings: list[dict]) -> tuple[str, str]:
    """The eligible class with the most removable time, its severity raised to the highest of the bound classes
    ranked below it (the order of the findings never contradicts the verdict), and its one-sentence headline. The
    chosen finding is replaced in `findings` by one that carries its removable share and the runner-up."""
    top = max(eligible, key=removable)
    others = sorted((f for f in ranked if f["kind"] in BOUND_KINDS and f is not top), key=removable, reverse=True)
    severity = max([top["severity"]] + [f["severity"] for f in others], key=lambda s: _SEVERITY.get(s, 0))
    evidence = dict(top.get("evidence") or {})
    runner = next((f for f in others if removable(f) > 0), None)
    if runner is not None:   # evidence, not headline: one number up there
        evidence["runner_up"] = {"kind": runner["kind"], "share": runner.get("share", 0.0),
                                 "removable_share": removable(runner)}
    chosen = edited(top, severity=severity, removable_share=removable(top), evidence=evidence)
    findings[next(i for i, f in enumerate(findings) if f is top)] = chosen
    return chosen["kind"], headline(chosen, _step_s(chosen))


def decide(findings: list[dict], steps: int) -> tuple[str, str]:
    """(bottleneck, headline sentence) from all findings."""
    if steps == 0:
        return "none", "No training steps detected (no optimizer step or backward pass ran)."
    if steps < T.MIN_STEPS:
        return "none", f"Too little data: only {steps} training step(s) measured (need {T.MIN_STEPS})."
    eligible = [f for f in findings if (f["kind"] in ("io", "communication", "launch") and f["severity"] == "high")
                or f["kind"] == "compute"]
    if eligible:
        return _choose(eligible, findings, findings)
    notable = sorted(findings, key=lambda f: f.get("share", 0.0), reverse=True)
    detail = f" Largest: {notable[0]['message']}." if notable else ""
    return "none", f"{LABEL['none']}: no phase dominates the step.{detail}"


def sort_findings(findings: list[dict]) -> list[dict]:
    """By severity, then the bound classes by removable time (the verdict first), then by share."""
    order = {"high": 0, "moderate": 1, "low": 2, "info": 3}
    return sorted(findings, key=lambda f: (order.get(f["severity"], 9), -removable(f), -f.get("share", 0.0)))


# -- CUDA runs: one denominator, the device step time (analyzers/device_timeline.py) ------------------------------
DEVICE_KINDS = ("io", "compute", "launch", "communication")


def device_findings(sh: dict, steady_s: float | None, kernel_source: str | None = None) -> list[dict]:
    """Findings from device_timeline.shares(): each share is of the same device step time. `kernel_source`:
    "kernels" when the device intervals are a trace's kernels, else CUDA-event spans (density from a trace)."""
    b, busy, idle = sh["bound"], sh["busy"], sh["idle"]
    dens = sh.get("kernel_density")
    # busy = kernels and copies, the one figure the GPU section, its chart and the kernel table also show
    busy_kc = kernel_busy(busy, dens)
    per_step = f"{_ms(steady_s)}/step on the device over {sh['steps']} steady steps, GPU busy {_pct(busy_kc)}"
    ev = {"timeline": "device", "bound_share": dict(b), "busy_share": busy_kc, "idle_share": 1.0 - busy_kc,
          "span_share": sh["busy_share"], "kernel_density": dens, "steady_step_s": steady_s, "steps": sh["steps"]}
    if kernel_source == "kernels":
        density = "device time read kernel by kernel from the trace"
    elif dens is not None:
        density = f"kernels fill {_pct(dens)} of the forward/backward/optimizer spans"
    else:
        density = "no kernel trace, so gaps between kernels inside a phase count as compute"
    out = []

    def add(kind, sev, message, fixes, **extra):
        out.append(bound(kind, sev, b[kind], message, {**ev, **extra}, fixes))

    sev = _grade(b["io"], T.IO_MODERATE, T.IO_HIGH)
    if sev:
        add("io", sev, f"the GPU waited for input {_pct(b['io'])} of the step: idle while the host waited for the "
            f"DataLoader {_pct(idle['dataloader'])}, on a synchronous copy {_pct(idle['h2d'])}, copying "
            f"{_pct(busy['h2d'])} ({per_step})", list(FIXES_FOR["io"]),
            dataloader_share=idle["dataloader"], h2d_share=idle["h2d"] + busy["h2d"], median_step_s=steady_s,
            thresholds={"moderate": T.IO_MODERATE, "high": T.IO_HIGH})
    sev = _grade(b["launch"], T.LAUNCH_MODERATE, T.LAUNCH_HIGH)
    if sev:
        parts = sh["launch_parts"]
        fixes = list(FIXES_FOR["launch"])
        if busy["optimizer"] + idle["optimizer"] >= 0.25:   # the optimizer's many small kernels: fuse them first
            fixes = ["fused-optim"] + [f for f in fixes if f != "fused-optim"]
        add("launch", sev, f"the GPU waited on the host {_pct(b['launch'])} of the step: {density} (gaps inside "
            f"the spans {_pct(parts['unfilled_spans'])}), idle while the host dispatched {_pct(parts['dispatch_idle'])}, "
            f"idle while it ran Python outside the training phases {_pct(parts['host_other_idle'])} ({per_step})",
            fixes, launch_parts=dict(parts), thresholds={"moderate": T.LAUNCH_MODERATE, "high": T.LAUNCH_HIGH})
    sev = _grade(b["communication"], T.COMM_MODERATE, T.COMM_HIGH)
    if sev:
        add("communication", sev, f"{_pct(b['communication'])} of the step is exposed communication on the GPU "
            f"(collectives not hidden by compute; {per_step})", list(FIXES_FOR["communication"]),
            allreduce_share=b["communication"], thresholds={"moderate": T.COMM_MODERATE, "high": T.COMM_HIGH})
    sev = _grade(b["compute"], T.DEVICE_COMPUTE_MODERATE, T.DEVICE_COMPUTE_HIGH)
    if sev:
        fixes = list(FIXES_FOR["compute"])
        add("compute", sev, f"the GPU computed {_pct(b['compute'])} of the step ({density}; forward "
            f"{_pct(busy['forward'])}, backward {_pct(busy['backward'])}, optimizer {_pct(busy['optimizer'])}; "
            f"{per_step})", fixes, forward_share=busy["forward"], backward_share=busy["backward"],
            optimizer_share=busy["optimizer"], median_step_s=steady_s,
            thresholds={"moderate": T.DEVICE_COMPUTE_MODERATE, "high": T.DEVICE_COMPUTE_HIGH})
    return out


def decide_device(findings: list[dict], steps: int) -> tuple[str, str]:
    """CUDA runs: the largest device-timeline share among io/compute/launch/communication, when it dominates."""
    if steps < T.MIN_STEPS:
        return decide(findings, steps)
    device = [f for f in findings if f["kind"] in DEVICE_KINDS and f.get("evidence", {}).get("timeline") == "device"]
    eligible = [f for f in device if f["severity"] == "high" or f.get("share", 0.0) >= T.DEVICE_VERDICT_MIN]
    if eligible:
        return _choose(eligible, device, findings)
    notable = sorted(findings, key=lambda f: f.get("share", 0.0), reverse=True)
    detail = f" Largest: {notable[0]['message']}." if notable else ""
    return "none", f"{LABEL['none']}: nothing fills {_pct(T.DEVICE_VERDICT_MIN)} of the device step.{detail}"
