"""What-if per fix: the gain each fix can have on this run, predicted from the recorded run alone (the steady
step, the device timeline, the tracing window's kernels and ops, the input split, the set-up conditions). Each
prediction removes or shrinks only what that fix changes and re-times the step; it is a point and a range, with
what it assumed, and never more than the time of what the fix touches (`touches_share`). Pure: a summary in, dicts
out. The page, summary.json and the console quote these; `--fix auto` and "do this next" rank by them;
benchmarks/prediction_error.py checks them against what the fixes measured (docs/predictions.md).

The factors below are assumptions about how a fix acts, stated in each prediction's `assumed`, not fitted to runs:
- prefetch: workers hide the loading, but the step stays at least what the workers produce (time per fetch over
  the workers the fix starts) and what the main process still does with each batch (the hand-off from a worker,
  measured by the run's probe or assumed in copies at the traced copy rate, then the copy to the device); its
  range may end slower than now. An existing worker pool is left alone: only the copy to the device is hidden.
- amp: the fp32 matmul/conv kernels (not on tensor cores) run TC_RATIO times faster; the step cannot drop below
  the host's own work per step (the loader on the training thread, synchronous pageable copies).
- cuda-graphs: the launch gaps inside the captured forward/backward spans go; the optimizer stays eager.
- compile (default mode): fuses elementwise work in forward/backward (half of its time), not the launch gaps.
- fused-optim: the optimizer's launch gaps / per-parameter dispatch, never more than the optimizer phase.
- compress / bucket: the exposed transfer, never the wait for a slower rank.
"""
from __future__ import annotations

import math
import re

from .whatif_common import _device, _finding, _none, _out, _share, step_s
# the prefetch predictor and its input-side helpers (amp's host floor reads the loader too); the hand-off
# constants stay importable from here
from .whatif_input import (HANDOFF_COPIES, PINNED_SPEEDUP, _fetch_s, _loader, handoff_bytes, prefetch,  # noqa: F401
                           read_probe_readers)

# Sustained speed of bf16/tf32 tensor-core matmuls over fp32 CUDA-core ones: an H100's peaks are 989 vs 67 TFLOPS
# (15x) and an A100's 312 vs 19.5 (16x); real kernels reach about half of that, some a quarter.
TC_RATIO = {"point": 8.0, "low": 4.0, "high": 16.0}
# bf16 on a CPU with AMX/AVX512-BF16 matrix units: about 2x on matmuls (1.3x-4x).
CPU_BF16_RATIO = {"point": 2.0, "low": 1.3, "high": 4.0}
# torch.compile's one-time cost (the first compile of a small model): 10 s, 3-60 s.
COMPILE_COST_S = {"point": 10.0, "low": 3.0, "high": 60.0}
# The part of the fused elementwise time compile removes, and of the gaps a graph replay removes.
FUSION_REMOVES = 0.5
REPLAY_REMOVES = 0.9
# Gradient compression (fp16/PowerSGD) and larger buckets on the exposed transfer.
COMM_REMOVES = {"compress": (0.5, 0.25, 0.75), "bucket": (0.2, 0.0, 0.5)}
# Below this predicted share of the step a fix is not worth proposing (as `--fix auto`'s 1.02x).
MIN_GAIN = 0.02

_MATMUL_OP = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|_?convolution|cudnn_convolution|conv\w*|"
                        r"_scaled_dot_product\w*|einsum)", re.I)
_OPTIMIZER_OP = re.compile(r"aten::(_foreach_\w+|lerp_|addcdiv_|addcmul_|_fused_\w+)", re.I)
_ELEMENTWISE = re.compile(r"elementwise|vectorized|reduce_kernel|layer_norm|softmax|dropout|activation", re.I)


# -- compute: amp --------------------------------------------------------------------------------------------------
def _host_floor_s(s: dict) -> tuple[float, str]:
    """The host's own work per step that no device speed-up removes: the loader on the training thread and the
    synchronous pageable copies (seconds, and what it is)."""
    ld = _loader(s)
    out, what = 0.0, []
    fetch, _ = _fetch_s(ld)
    if fetch and not ld["workers"]:
        out += fetch
        what.append(f"loading on the training thread {fetch * 1e3:.1f} ms")
    gpu = s.get("gpu") or {}
    pageable = sum(c.get("total_us") or 0 for c in gpu.get("copies") or [] if c.get("kind") == "HtoD pageable")
    if pageable and gpu.get("steps"):
        out += pageable / gpu["steps"] / 1e6
        what.append(f"pageable copies {pageable / gpu['steps'] / 1e3:.1f} ms")
    return out, " + ".join(what)


def amp(s: dict) -> dict:
    step, dev = step_s(s), _device(s)
    uses = (s.get("script_uses") or {}).get("amp")
    touches = "fp32 matmuls and convolutions"
    if uses:
        return _none("amp", step, touches, f"the script already runs in reduced precision ({uses})")
    if not step:
        return _none("amp", step, touches, "no steady step")
    if dev:
        busy = float(dev.get("busy_share") or 0.0) * step
        tops = (s.get("gpu") or {}).get("top_kernels") or []
        mm = sum(k.get("share") or 0.0 for k in tops
                 if not k.get("tensor_cores") and _MATMUL_OP.match(str(k.get("launched_by") or "")))
        mm_s = mm * busy
        floor, floor_what = _host_floor_s(s)
        gain = {}
        for k, r in TC_RATIO.items():
            after = max(step - mm_s * (1 - 1 / r), floor)
            gain[k] = (step - after) / step
        why = (f"fp32 matmul/conv kernels off the tensor cores fill {100 * mm:.0f}% of GPU time "
               f"({mm_s * 1e3:.1f} ms of the step); run {TC_RATIO['point']:.0f}x faster "
               f"({TC_RATIO['low']:.0f}-{TC_RATIO['high']:.0f}x) in bf16/tf32")
        if floor > step - mm_s * (1 - 1 / TC_RATIO["point"]):   # the host's own work is the step's floor
            why += f"; the step stays at least the host's own work ({floor_what} = {floor * 1e3:.1f} ms)"
        return _out("amp", step, touches, mm_s / step, gain["point"], gain["low"], gain["high"], why)
    bf16 = (s.get("conditions") or {}).get("cpu_bf16")
    compute = _share(s, "forward", "backward")
    if not bf16:
        return _none("amp", step, touches, "this CPU has no native bf16 (no AMX or AVX512-BF16): bf16 autocast "
                     "emulates it and is not faster" if bf16 is False else
                     "not known whether this CPU has native bf16 (recorded before haiprof noted it): assumed not")
    cpu = (s.get("launch") or {}).get("cpu") or {}
    mm = sum(o.get("share") or 0.0 for o in cpu.get("top_ops") or [] if _MATMUL_OP.match(str(o.get("name"))))
    part = min(compute, mm * compute) if mm else compute * 0.5
    arith, headroom = _mfu_bound(s, part, "arithmetic")
    g = {k: arith * (1 - 1 / r) for k, r in CPU_BF16_RATIO.items()}
    return _out("amp", step, touches, part, g["point"], g["low"], g["high"],
                f"matmuls fill {100 * part:.0f}% of the step; bf16 on this CPU's matrix units "
                f"{CPU_BF16_RATIO['point']:.0f}x ({CPU_BF16_RATIO['low']}-{CPU_BF16_RATIO['high']:.0f}x) faster"
                + headroom)


def _mfu_bound(s: dict, part: float, what: str) -> tuple[float, str]:
    """A CPU run's compute headroom (no kernels to read): the MFU (haiprof/analysis/efficiency.py) is the share of
    the step the matmuls' arithmetic takes at this CPU's measured fp32 peak. Lower precision shortens only that
    arithmetic ("arithmetic": part bounded by the MFU); fusion acts only on the rest of the step ("rest": part
    bounded by 1 - MFU). (bounded part, what was said); the part unchanged without an MFU."""
    mfu = (s.get("efficiency") or {}).get("mfu")
    if not mfu:
        return part, ""
    bound = min(1.0, mfu) if what == "arithmetic" else max(0.0, 1.0 - mfu)
    if part <= bound:
        return part, ""
    return bound, (f"; MFU {100 * mfu:.0f}%: the matmuls' arithmetic at this CPU's measured fp32 peak is only "
                   f"{100 * mfu:.0f}% of the step, and bf16 shortens that, not the rest of their time"
                   if what == "arithmetic" else
                   f"; MFU {100 * mfu:.0f}%: the matmuls' arithmetic at this CPU's measured peak takes "
                   f"{100 * mfu:.0f}% of the step, which fusion cannot remove")


# -- launch: cuda-graphs, compile, fused-optim --------------------------------------------------------------------
def _spans(dev: dict) -> tuple[float, float, float]:
    busy = dev.get("busy") or {}
    fb = float(busy.get("forward") or 0) + float(busy.get("backward") or 0)
    opt = float(busy.get("optimizer") or 0)
    return fb, opt, fb + opt + float(busy.get("h2d") or 0) + float(busy.get("allreduce") or 0)


def _gaps(dev: dict, phases: str) -> float:
    """Launch gaps inside the forward+backward ("fb") or optimizer ("opt") spans, as a share of the step: the
    unfilled spans split in proportion to the spans, plus the dispatch idle in those phases."""
    fb, opt, total = _spans(dev)
    part = fb if phases == "fb" else opt
    unfilled = float((dev.get("launch_parts") or {}).get("unfilled_spans") or 0.0)
    idle = dev.get("idle_by_host") or {}
    own = (float(idle.get("forward") or 0) + float(idle.get("backward") or 0)) if phases == "fb" else \
        float(idle.get("optimizer") or 0)
    return (unfilled * part / total if total else 0.0) + own


def cuda_graphs(s: dict) -> dict:
    step, dev = step_s(s), _device(s)
    touches = "launch gaps inside the captured forward/backward"
    if not dev:
        return _none("cuda-graphs", step, touches, "CUDA graphs need a CUDA run")
    gaps = _gaps(dev, "fb")
    return _out("cuda-graphs", step, touches, gaps, REPLAY_REMOVES * gaps, 0.5 * gaps, gaps,
                f"launch gaps inside the forward/backward spans are {100 * gaps:.0f}% of the step (the optimizer "
                f"stays eager); a graph replay removes {100 * REPLAY_REMOVES:.0f}% of them (50-100%)",
                cost_s=COMPILE_COST_S["point"])


def compile_(s: dict) -> dict:
    step, dev = step_s(s), _device(s)
    touches = "elementwise work in forward/backward (fused)"
    if not step:
        return _none("compile", step, touches, "no steady step")
    if dev:
        fb, _, total = _spans(dev)
        busy = float(dev.get("busy_share") or 0.0)
        tops = (s.get("gpu") or {}).get("top_kernels") or []
        ew = sum(k.get("share") or 0.0 for k in tops if _ELEMENTWISE.search(str(k.get("name")))
                 and not _OPTIMIZER_OP.match(str(k.get("launched_by") or "")))
        part = min(busy * fb / total if total else 0.0, ew * busy)
        what = f"elementwise kernels in forward/backward fill {100 * part:.1f}% of the step"
    else:
        cpu = (s.get("launch") or {}).get("cpu") or {}
        part = _share(s, "forward", "backward") * float(cpu.get("tiny_share") or 0.0)
        what = (f"tiny (dispatch-dominated) ops in forward/backward are {100 * part:.1f}% of the step"
                if cpu else "no op trace: nothing to fuse is known")
        part, headroom = _mfu_bound(s, part, "rest")
        what += headroom
    return _out("compile", step, touches, part, FUSION_REMOVES * part, 0.0, part,
                f"{what}; fusion removes about {100 * FUSION_REMOVES:.0f}% of it (0-100%), not the launch gaps",
                cost_s=COMPILE_COST_S["point"])


def fused_optim(s: dict) -> dict:
    step, dev = step_s(s), _device(s)
    touches = "the optimizer step"
    if dev:
        _, opt, _ = _spans(dev)
        opt_share = opt + float((dev.get("idle_by_host") or {}).get("optimizer") or 0)
        gaps = min(opt_share, _gaps(dev, "opt"))
        return _out("fused-optim", step, touches, opt_share, gaps, 0.5 * gaps, opt_share,
                    f"the optimizer is {100 * opt_share:.0f}% of the step, {100 * gaps:.0f}% of it launch gaps "
                    f"between per-parameter kernels; fused, they go (its kernels stay)")
    opt_share = _share(s, "optimizer")
    cpu = (s.get("launch") or {}).get("cpu") or {}
    over = min(1.0, float(cpu.get("framework_share") or 0.0) + float(cpu.get("tiny_share") or 0.0))
    return _out("fused-optim", step, touches, opt_share, opt_share * over, 0.0, opt_share * min(1.0, 2 * over),
                f"the optimizer is {100 * opt_share:.0f}% of the step; a fused/foreach step removes its "
                f"per-parameter dispatch ({100 * over:.0f}% of traced op time is framework overhead or tiny ops)")


# -- communication: compress, bucket -------------------------------------------------------------------------------
def comm(fix: str, s: dict) -> dict:
    step = step_s(s)
    f = _finding(s, "communication")
    ev = f.get("evidence") or {}
    transfer = ev.get("transfer_share")
    exposed = float(f.get("share") or _share(s, "allreduce"))
    part = float(transfer if transfer is not None else exposed)
    point, low, high = COMM_REMOVES[fix]
    wait = f"; the wait for a slower rank ({100 * (exposed - part):.0f}%) is not this fix's" if \
        transfer is not None and exposed > part else ""
    return _out(fix, step, "the exposed gradient transfer", part, point * part, low * part, high * part,
                f"the exposed transfer is {100 * part:.0f}% of the step{wait}; "
                f"{'fewer bytes' if fix == 'compress' else 'larger buckets overlap more'} remove "
                f"{100 * point:.0f}% of it ({100 * low:.0f}-{100 * high:.0f}%)")


PREDICTORS = {"prefetch": prefetch, "amp": amp, "cuda-graphs": cuda_graphs, "compile": compile_,
              "fused-optim": fused_optim, "compress": lambda s: comm("compress", s),
              "bucket": lambda s: comm("bucket", s)}


def noise_share(s: dict) -> float:
    """The smallest gain a before/after of medians can resolve: the steady steps' p10-p90 spread over the median,
    over the square root of the steps measured."""
    st = s.get("step_time_s") or {}
    med, lo, hi = st.get("median"), st.get("p10"), st.get("p90")
    n = s.get("steps_analyzed") or s.get("steps") or 1
    return (hi - lo) / med / math.sqrt(max(1, n)) if med and lo is not None and hi is not None else 0.0


def predict(fix: str, s: dict) -> dict | None:
    """One fix's prediction on this run, with `worth` False and `why_not` when it pays less than its cost or the
    noise; None for a fix without a predictor."""
    fn = PREDICTORS.get(fix)
    if fn is None:
        return None
    p = fn(s)
    p["text"] = quote(p)
    if not p["worth"]:
        return p
    floor = max(MIN_GAIN, noise_share(s))
    step, steps = p["step_s"], s.get("steps") or 0
    if p["gain_share"] < floor:
        p["worth"], p["why_not"] = False, (f"predicted {100 * p['gain_share']:.1f}% of the step, below what this run "
                                           f"can resolve ({100 * floor:.1f}%)")
    elif p["cost_s"] and step and p["gain_share"] * step * steps < p["cost_s"]:
        saved = p["gain_share"] * step
        p["worth"], p["why_not"] = False, (f"predicted to save {saved * 1e3:.1f} ms a step, x {steps} steps = "
                                           f"{saved * steps:.2f} s, less than its compile time "
                                           f"(~{p['cost_s']:.0f} s assumed): it pays off only after "
                                           f"~{math.ceil(p['cost_s'] / saved)} steps")
    return p


def predict_all(s: dict, fixes=None) -> dict:
    """Fix id -> prediction, for the fixes named (default: every fix a finding offers)."""
    if fixes is None:
        fixes = []
        for f in s.get("findings") or []:
            fixes += [x for x in f.get("fixes") or [] if x not in fixes]
    return {x: p for x in fixes if (p := predict(x, s)) is not None}


# Fixes acting on the same part of the step do not add up (compile with cuda-graphs is one reduce-overhead
# compile); fixes on different parts do.
PART = {"prefetch": "input", "amp": "matmuls", "cuda-graphs": "gaps", "compile": "fusion", "fused-optim": "optimizer",
        "compress": "transfer", "bucket": "transfer"}


def combined(preds: dict, applied: list) -> dict | None:
    """The prediction for several applied fixes together: per part the largest, summed over parts, the step never
    below 0. None when none of them has a prediction."""
    got = [preds[x] for x in applied if x in preds]
    if not got:
        return None
    best: dict = {}
    for p in got:
        part = PART.get(p["fix"], p["fix"])
        if part not in best or p["gain_share"] > best[part]["gain_share"]:
            best[part] = p
    total = {k: min(0.99, sum(p[k] for p in best.values())) for k in ("gain_share", "low_share", "high_share")}
    step = got[0]["step_s"]
    out = {"fixes": [p["fix"] for p in best.values()], **total,
           "step_s": step, "step_after_s": None if step is None else step * (1 - total["gain_share"]),
           "assumed": "; ".join(f"{p['fix']}: {p['assumed']}" for p in best.values())}
    return {**out, "text": quote(out), "range": range_text(out)}


def range_text(p: dict) -> str:
    """A prediction's range; one that may end slower than now says so, one whose ends round to the same figure
    (nothing it assumes was given a spread) says that instead of "range 89-89%"."""
    if round(100 * p["low_share"]) == round(100 * p["high_share"]):
        return "no range: its assumptions give one figure"
    if p["low_share"] >= 0:
        return f"range {100 * p['low_share']:.0f}-{100 * p['high_share']:.0f}%"
    return f"range {100 * -p['low_share']:.0f}% slower to {100 * p['high_share']:.0f}% faster"


def quote(p: dict, step: float | None = None) -> str:
    """The one phrase every surface uses for a prediction."""
    step = step or p.get("step_s")
    rng = range_text(p)
    g = p["gain_share"]
    said = f"{100 * g:.0f}% of the step" if g >= 0 else f"{100 * -g:.0f}% slower"
    if step:
        return (f"predicted: step {step * 1e3:.1f} → {step * (1 - g) * 1e3:.1f} ms ({said}, {rng}), "
                f"assuming {p['assumed']}")
    return f"predicted: {said} ({rng})"
