"""cuda-graphs: replay the model's kernels as one CUDA graph per step (no per-kernel launch cost).

CUDA only, and only for static shapes: torch.compile's "reduce-overhead" mode records CUDA graphs and re-records
when a shape changes (dynamo guards), so a shape change costs a recompile rather than a wrong result. When
`compile` is requested too, the compile fix uses that mode itself; otherwise this fix compiles the model with it.
"""
from __future__ import annotations

from .base import FixContext, cuda_available
from .compile import INFERENCE_ONLY, compile_model, keep_copies_eager, when_model_trains

ID = "cuda-graphs"
VARIANTS: tuple = ()   # takes no ID=VARIANT (checked by parse_spec before the run)
NOT_TRIGGERED = "no module with trainable parameters was called"


def install(ctx: FixContext) -> None:
    import torch

    state = ctx.state
    if not cuda_available(torch):
        state.skipped("no CUDA device")
        return
    if "compile" in ctx.requested:
        state.details["via"] = "compile"
    done: dict = {}

    def decide(module):
        ids = done.setdefault("compiled_ids", set())
        if id(module) in ids:
            return
        ids.add(id(module))
        first = not done.get("compiled")
        done["compiled"] = module
        if not next(module.parameters()).is_cuda:
            state.skipped("the model's parameters are not on a CUDA device", type(module).__name__)
            return
        if "compile" in ctx.requested:
            state.applied(type(module).__name__, "through the compile fix, in mode 'reduce-overhead'")
            return
        if first:
            keep_copies_eager(ctx, torch)
        how = compile_model(ctx, module, "reduce-overhead", torch)
        state.applied(type(module).__name__, how + ", decided at its first backward, from its next call on")

    when_model_trains(ctx, torch, decide, done)
    ctx.on_undo(lambda: "seen" in done and not done.get("compiled") and state.skipped(INFERENCE_ONLY))
