""""Do this next": the findings turned into one ranked list of actions, each with the fix to apply, the gain to
expect (an upper bound from the run's own shares: the time the fix can remove at most), and the reason in the
run's own numbers. Pure: a summary dict in, a list out; the report and the console show the first one on top.

Upper bounds, not promises: removing a wait can at best give back the wait (io, launch, communication); mixed
precision at best halves fp32 matmul/conv time on tensor-core GPUs: the same thresholds.REMOVABLE the verdict ranks
classes by, so the first action is always the verdict's fix.
"""
from __future__ import annotations

from . import thresholds as T
from .findings import Action
from .verdict import by_prediction, removable

PAGEABLE_NOTABLE = 0.05  # pageable host-to-device copies above this share of the step: say "pin memory"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _pageable_step_share(gpu: dict, dev: dict, ev: dict) -> float | None:
    """Pageable copies' share of the step: what pinning can act on. The copies' share of the step (the device
    timeline's, else the host's) times the pageable part of the traced HtoD copy time; the share of GPU time
    alone where the step's is not known (None). Not GPU time where it is: on a GPU idle 97% of the step, 19 µs
    of copies are 8% of its busy time and 0% of the step."""
    on_step = (dev.get("busy") or {}).get("h2d") if dev else ev.get("h2d_share")
    if on_step is None:
        return None
    pageable = gpu.get("pageable_h2d_share") or 0.0
    other = sum(c.get("share") or 0.0 for c in gpu.get("copies", [])
                if str(c.get("kind")).startswith("HtoD") and c.get("kind") != "HtoD pageable")
    return on_step * pageable / (pageable + other) if pageable else 0.0


def _io(f: dict, s: dict) -> dict:
    gpu = s.get("gpu") or {}
    dev = s.get("device") or {}
    ev = f.get("evidence", {})
    of_step = _pageable_step_share(gpu, dev, ev)
    of_gpu = gpu.get("pageable_h2d_share") or 0.0
    pageable = of_gpu if of_step is None else of_step
    waits = []
    if dev:
        idle = dev.get("idle_by_host", {})
        waits.append(f"the GPU sat idle {_pct(idle.get('dataloader', 0))} of the step waiting for the DataLoader")
        if dev.get("busy", {}).get("h2d"):
            waits.append(f"host-to-device copies filled {_pct(dev['busy']['h2d'])} of it")
    else:
        waits.append(f"{_pct(ev.get('dataloader_share', 0))} of the step waited for the DataLoader")
        if ev.get("h2d_share"):
            waits.append(f"{_pct(ev['h2d_share'])} copied batches to the device")
    title = "Load batches in DataLoader workers, ahead of the training loop"
    if pageable >= PAGEABLE_NOTABLE and not (s.get("script_uses") or {}).get("pin_memory"):
        bw = next((c.get("gb_per_s") for c in gpu.get("copies", []) if c["kind"] == "HtoD pageable"), None)
        waits.append("pageable host-to-device copies take "
                     + (f"{_pct(of_gpu)} of GPU time" if of_step is None else
                        f"{_pct(of_step)} of the step ({_pct(of_gpu)} of GPU time)")
                     + (f" at {bw:.1f} GB/s" if bw else ""))
        title = "Pin host memory (pin_memory=True) and load batches in DataLoader workers"
    reason = "; ".join(waits)
    if f.get("recommendation"):   # a sentence of its own: the input split's advice (workers, storage)
        reason += ". " + f["recommendation"].rstrip(".")
    return {"title": title, "reason": reason, "gain_share": removable(f)}


def _compute(f: dict, s: dict) -> dict:
    top = ((s.get("gpu") or {}).get("top_kernels") or [])
    on = "the GPU computes" if (f.get("evidence") or {}).get("timeline") == "device" else \
        "forward, backward and optimizer compute"   # a host clock: no GPU to speak of
    reason = f"{on} {_pct(f.get('share', 0))} of the step"
    if top:
        reason += f"; the top kernel, {top[0]['name']}, takes {_pct(top[0]['share'])} of GPU time"
    tc = (s.get("gpu") or {}).get("tensor_core_share")
    if tc is not None:
        reason += (f"; tensor cores run {_pct(tc)} of kernel time (by kernel name)"
                   + ("; fp32 math on the CUDA cores is what mixed precision moves to them" if tc < 0.5 else ""))
    return {"title": "Run matmuls and convolutions in bf16/fp16 (mixed precision)", "reason": reason,
            "gain_share": removable(f)}


def _launch(f: dict, s: dict) -> dict:
    fix = (f.get("fixes") or ["compile"])[0]
    title = {"fused-optim": "Use the fused optimizer (fewer, larger kernels per step)",
             "compile": "Compile the model (torch.compile) to fuse many small kernels",
             "cuda-graphs": "Capture the step in a CUDA graph"}.get(fix, "Reduce per-kernel launch overhead")
    return {"title": title, "reason": f["message"].split(" (")[0], "gain_share": removable(f)}


def _fsdp(f: dict) -> bool:
    return f.get("kind") == "communication" and ((f.get("evidence") or {}).get("ddp") or {}).get("framework") == "FSDP"


def _comm(f: dict, s: dict) -> dict:
    if _fsdp(f):
        title = ("Overlap FSDP's all-gathers with compute (forward/backward prefetch) and move fewer bytes "
                 "(bf16 parameters via MixedPrecisionPolicy, fewer, larger FSDP units)")
    else:
        title = "Compress gradients or enlarge DDP buckets"
    return {"title": title, "reason": f["message"], "gain_share": removable(f)}


def _handoff_slower(s: dict) -> dict | None:
    """The prefetch what-if where workers' hand-off of each batch would cost more than loading it on the training
    thread (analyzers/whatif_input.py: large batches); None otherwise."""
    p = (s.get("predictions") or {}).get("prefetch")
    return p if p and p.get("slower_by") == "hand-off" and p.get("batch_bytes") else None


def _fewer_bytes(f: dict, p: dict) -> dict:
    """Advice, no fix id: the bytes each batch carries are the wait, and workers cannot hide them (`p`: the
    prefetch what-if that found the hand-off slower, _handoff_slower)."""
    mb, step = p.get("batch_bytes", 0) / 1e6, p.get("step_s") or 0.0
    after = p.get("step_after_s") or 0.0
    return {"title": "Send fewer bytes per batch: uint8 or bf16 samples, converted and normalised on the GPU",
            "reason": f"each step moves {mb:.0f} MB of input from the loader to the GPU, collated on the training "
                      f"thread and copied from pageable memory ({_pct(f.get('share', 0.0))} of the step waits "
                      f"for it); DataLoader workers would take longer to hand each batch over than loading takes "
                      f"now (predicted {step * 1e3:.1f} → {after * 1e3:.1f} ms), so fewer bytes is what shrinks "
                      f"both the collation and the copy",
            "gain_share": 0.0}   # no what-if of its own: it names what to change, not what it gives


def _memory(f: dict, s: dict) -> dict:
    return {"title": "Free device memory: mixed precision or activation checkpointing", "reason": f["message"],
            "gain_share": 0.0}


def _culprit(f: dict, s: dict) -> dict:
    """The rank or node the job waits for (analyzers/culprit.py): its own cause's action, the gain the time the
    other ranks stop waiting for it."""
    a = (f.get("evidence") or {}).get("action") or {}
    return {"title": a.get("title"), "reason": a.get("reason"), "gain_share": f.get("share", 0.0)}


def _culprit_order(f: dict) -> float:
    order = (f.get("evidence") or {}).get("culprit_order") if f.get("kind") == "straggler" else None
    return float("inf") if order is None else order


def _threads(f: dict, s: dict) -> dict:
    """Tiny ops waiting on intra-op threads (analyzers/thread_waits.py): advice, no fix id."""
    ev = f.get("evidence") or {}
    return {"title": f"Use {ev.get('advised_threads')} torch thread(s): {ev.get('line')}",
            "reason": f["message"].split("; torch.set_num_threads")[0], "gain_share": f.get("share", 0.0)}


BUILDERS = {"io": _io, "compute": _compute, "launch": _launch, "communication": _comm, "memory": _memory,
            "straggler": _culprit, "threads": _threads}


def left_out(summary: dict) -> dict:
    """Fixes never to recommend for this run, each with why: what the script already does (seen in its first
    steps: autocast or half-precision weights, a compiled module, a fused/foreach optimizer) and the fixes this
    run applied, with what they were measured to do."""
    out = {fix: f"the script already does it: {how}" for fix, how in (summary.get("script_uses") or {}).items()
           if fix in ("amp", "compile", "fused-optim", "cuda-graphs", "prefetch")}
    fixes = summary.get("fixes") or {}
    for c in fixes.get("excluded") or []:   # --fix auto left it out: an earlier run measured it slower
        if c.get("id"):
            out.setdefault(c["id"], c.get("reason") or "measured slower in an earlier run")
    for fix, p in (summary.get("predictions") or {}).items():   # analyzers/whatif.py: pays less than noise or cost
        if not p.get("worth") and p.get("why_not"):
            out.setdefault(fix, f"not worth it here: {p['why_not']}")
    gain = fixes.get("gain") or {}
    for r in fixes.get("results") or []:
        if r.get("status") == "applied":
            measured = gain.get("speedup")
            why = gain.get("unreliable_why")
            out[r["id"]] = ("applied in this run" + (f": measured {measured:.2f}x on the steady step"
                                                     + (f", unreliable: {why}" if why else "")
                                                     if isinstance(measured, (int, float)) else ""))
    return out


def _expected(a: Action) -> float:
    """What an action is predicted to give (analyzers/whatif.py); its upper bound where nothing predicts it."""
    return a.predicted["gain_share"] if a.predicted else a.gain_share


def rank(summary: dict) -> list[dict]:
    """[{fix, title, reason, gain_share, gain_s, kind}] best first; each fix id appears once; none of left_out."""
    skip = left_out(summary)
    preds = summary.get("predictions") or {}
    step = (summary.get("step_time_s") or {}).get("steady") or (summary.get("step_time_s") or {}).get("median")
    if summary.get("steps_measured", summary.get("steps", 0)) < T.MIN_STEPS:
        return []    # too few measured steps: nothing to act on
    out, seen = [], set()
    slower = _handoff_slower(summary)   # workers would hand large batches over slower than they load now
    # a job's culprits first, slowest first: their action claims its fix before a job-wide finding's
    for f in sorted(summary.get("findings", []), key=_culprit_order):
        build = BUILDERS.get(f.get("kind"))
        culprit = _culprit_order(f) != float("inf")
        if f.get("kind") == "straggler" and not culprit:
            continue   # a slow rank named in the list, not one the job waits for first
        # advice with no haiprof fix to try: FSDP's own settings, a rank's cause, the torch threads
        fewer_bytes = f.get("kind") == "io" and slower is not None
        manual = _fsdp(f) or culprit or f.get("kind") == "threads" or fewer_bytes
        if build is None or f.get("severity") == "info" or not (f.get("fixes") or manual):
            continue
        fixes = by_prediction([x for x in f.get("fixes") or [] if x not in skip], preds)
        if not manual and (not fixes or fixes[0] in seen):
            continue
        a = _fewer_bytes(f, slower) if fewer_bytes and not fixes else build(f, summary)
        if f["kind"] == "launch" and fixes[0] != f["fixes"][0]:   # the title follows the fix it recommends
            a = build({**f, "fixes": fixes}, summary)
        if f["kind"] == "compute" and fixes[0] != "amp":
            a["title"] = "Compile the model (torch.compile): fuse elementwise work around the matmuls"
        fix = fixes[0] if fixes else None
        seen.add(fix)
        p = preds.get(fix) if fix else (f.get("evidence") or {}).get("predicted")   # advice: its own what-if
        share = p["touches_share"] if p else a["gain_share"]   # the most the fix can remove: the time it touches
        out.append(Action(title=a["title"], reason=a["reason"], gain_share=share, fix=fix, kind=f["kind"],
                          other_fixes=fixes[1:], gain_s=share * step if step else None, predicted=p))
    # the verdict's action first (one story: verdict, headline, first action), then by the gain each can give
    # (the verdict's culprit first: its action is the verdict's; culprits keep their order)
    lead = summary.get("culprit") is not None
    out.sort(key=lambda a: (not (lead and a.kind == "straggler"), a.kind != summary.get("bottleneck"),
                            0.0 if lead and a.kind == "straggler" else -_expected(a)))
    return [a.as_dict() for a in out]   # summary.json's next_steps and the pages read dicts
