"""Which fixes `--fix auto` applies: those of the verdict's own finding, ranked by expected gain, each with its
reason; fixes that earlier fixed runs of the same command showed to slow the step are left out. Pure functions.

Expected gain is Amdahl's law on the diagnosis' phase shares: a fix acts on part of the step (the input wait, the
optimizer, the launch gaps, the compute) and removes a typical fraction of it (REMOVES, a deliberately modest
guess: the measured before/after, not this estimate, is what the run reports). A fix expected to gain less than
MIN_EXPECTED, or that cannot act here (CUDA graphs without CUDA), is left out with its reason.
"""
from __future__ import annotations

# Fraction of the part of the step a fix acts on that it typically removes.
REMOVES = {
    "prefetch": 0.9,        # input wait hidden behind compute by workers / side-stream copies
    "fused-optim": 0.6,     # per-parameter optimizer loop -> one or a few kernels
    "amp": {"cuda": 0.5, "cpu": 0.3},   # tensor cores / bf16 on matmul-heavy forward+backward
    "compile": {"launch": 0.5, "compute": 0.15},   # fewer, fused kernels
    "cuda-graphs": 0.8,     # launch gaps replayed as one graph
    "compress": 0.5,        # fewer bytes on the wire
    "bucket": 0.2,          # better overlap of buckets with backward
}
MIN_EXPECTED = 1.02


def _share(summary: dict, *phases: str) -> float:
    ps = summary.get("phase_share") or {}
    return sum(float(ps.get(p) or 0.0) for p in phases)


def _finding(summary: dict) -> dict:
    kind = summary.get("bottleneck")
    return next((f for f in summary.get("findings") or [] if f.get("kind") == kind), {})


def expected_gain(fix_id: str, summary: dict) -> tuple[float | None, str]:
    """(expected speedup, why) of one fix on the diagnosed run; None when it cannot act here."""
    cuda = bool(summary.get("device"))
    kind = summary.get("bottleneck")
    bound = float(_finding(summary).get("share") or 0.0)

    def amdahl(part: float, removes: float, what: str) -> tuple[float, str]:
        part = max(0.0, min(1.0, part))
        gain = 1.0 / max(1e-6, 1.0 - part * removes)
        return gain, f"{what} is {100 * part:.0f}% of the step; removing ~{100 * removes:.0f}% of it"

    if fix_id == "prefetch":
        part = bound if kind == "io" and bound else _share(summary, "dataloader", "h2d")
        return amdahl(part, REMOVES["prefetch"], "waiting for input (DataLoader + host-to-device copy)")
    if fix_id == "fused-optim":
        return amdahl(_share(summary, "optimizer"), REMOVES["fused-optim"], "the optimizer step")
    if fix_id == "amp":
        dev = "cuda" if cuda else "cpu"
        return amdahl(_share(summary, "forward", "backward"), REMOVES["amp"][dev],
                      f"forward + backward ({dev.upper()}, lower precision matmuls)")
    if fix_id == "compile":
        if kind == "launch":
            return amdahl(bound, REMOVES["compile"]["launch"], "launch overhead (many small ops)")
        return amdahl(_share(summary, "forward", "backward"), REMOVES["compile"]["compute"],
                      "forward + backward (fused kernels)")
    if fix_id == "cuda-graphs":
        if not cuda:
            return None, "CUDA graphs need a CUDA run"
        return amdahl(bound if kind == "launch" else 0.0, REMOVES["cuda-graphs"],
                      "the GPU waiting on kernel launches")
    if fix_id in ("compress", "bucket"):
        return amdahl(_share(summary, "allreduce"), REMOVES[fix_id], "exposed communication")
    return None, "no estimate for this fix"


def regressed(history: list[dict]) -> dict[str, str]:
    """Fix id -> why it is left out, from earlier fixed runs of the same command, newest first:
    [{"run": path, "applied": [ids], "gain": fix_gain dict, "crashed": exit code when the script failed}]. A
    fix's newest run decides (a later run that did not regress clears an older regression or failure)."""
    decided: dict[str, str | None] = {}
    for h in history:
        gain = h.get("gain") or {}
        for fix_id in h.get("applied") or []:
            if fix_id in decided:
                continue
            if h.get("crashed") is not None:
                decided[fix_id] = f"the script failed (exit {h['crashed']}) with it applied in {h.get('run')}"
                continue
            decided[fix_id] = (f"made this command's step {gain.get('slower_pct', 0):.0f}% slower in "
                               f"{h.get('run')}" if gain.get("regression") else None)
    return {k: v for k, v in decided.items() if v}


def rank(summary: dict, candidates: list[str], history: list[dict] | None = None) -> tuple[list, list]:
    """(chosen, left out): chosen = [{"id", "expected_speedup", "reason"}] best first; left out = [{"id", "reason"}]."""
    slow = regressed(history or [])
    chosen, excluded = [], []
    for fix_id in candidates:
        if fix_id in slow:
            excluded.append({"id": fix_id, "reason": slow[fix_id]})
            continue
        gain, why = expected_gain(fix_id, summary)
        if gain is None:
            excluded.append({"id": fix_id, "reason": why})
        elif gain < MIN_EXPECTED:
            excluded.append({"id": fix_id, "reason": f"expected {gain:.2f}x only: {why}"})
        else:
            chosen.append({"id": fix_id, "expected_speedup": round(gain, 3), "reason": why})
    chosen.sort(key=lambda c: -c["expected_speedup"])
    return chosen, excluded
