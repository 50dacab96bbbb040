"""compile: torch.compile of the model (inductor generates fused kernels), without touching the script.

The model is the root module (see _root.py) that a backward first runs through: whether it trains is decided at
its first backward, not at its first call, since scripts often evaluate first (nanoGPT's estimate_loss runs the
model in eval mode under no_grad before training). A grad hook on the output of each root call made with grad
enabled fires when backward reaches it; from the model's next call on its forward is the compiled one
(`module.forward = torch.compile(module.forward)`, an instance attribute, so the module object the script holds
is unchanged and the global hooks around it still run eagerly). Compilation happens inside the first compiled
steps; its time is taken from dynamo's own compile counters and reported separately, so it is not mistaken for
step time. With `cuda-graphs` also requested on CUDA, the mode is "reduce-overhead" (CUDA graphs).
"""
from __future__ import annotations

import time

from .base import FixContext, cuda_available
from ._root import RootForwardHooks

ID = "compile"
VARIANTS: tuple = ()   # takes no ID=VARIANT (checked by parse_spec before the run)
NOT_TRIGGERED = "no module with trainable parameters was called"
INFERENCE_ONLY = "the model never ran backward (inference only): nothing to train faster"


def dynamo_compile_seconds() -> float | None:
    """Seconds dynamo + inductor spent compiling so far in this process, from torch's own timers: the forward
    compiles (dynamo's compile_inner) plus the backward graphs inductor compiles lazily at the first backward."""
    try:
        from torch._dynamo.utils import compilation_time_metrics as m
    except ImportError:
        return None
    forward = sum(m.get("_compile.compile_inner", []))
    backward = max(0.0, sum(m.get("compile_fx_inner", [])) - sum(m.get("compile_fx.<locals>.fw_compiler_base", [])))
    return forward + backward


def keep_copies_eager(ctx: FixContext, torch) -> None:
    """A compiled forward is an instance attribute, and a compiled function does not pickle: the state that
    copy.deepcopy, pickle and torch.save(model) take leaves it out, so the copy is the eager model (it loads where
    haiprof is not) and the script's checkpoint or EMA copy works as without the fix."""
    from haiprof.module_state import leave_out_of_copies

    def eager(state: dict) -> dict:
        if getattr(state.get("forward"), "__haiprof_compiled__", False):
            state = dict(state)
            del state["forward"]
        return state
    ctx.on_undo(leave_out_of_copies(eager))


def compile_model(ctx: FixContext, module, mode: str | None, torch) -> str:
    """Compile module.forward in place; returns a description of what was done."""
    original_forward = module.__dict__.get("forward")
    compiled = torch.compile(module.forward, mode=mode)
    try:
        compiled.__haiprof_compiled__ = True
    except AttributeError:
        pass
    module.forward = compiled
    if original_forward is None:
        ctx.on_undo(lambda: module.__dict__.pop("forward", None))
    else:
        ctx.on_undo(lambda: setattr(module, "forward", original_forward))
    return f"torch.compile(mode={mode or 'default'!r})"


def _first_grad_tensor(obj, torch, depth: int = 0):
    """The first tensor in a module's output that backward can run through (outputs may be tuples, dicts, or
    objects such as Hugging Face's ModelOutput, which is a dict)."""
    if isinstance(obj, torch.Tensor):
        return obj if obj.requires_grad else None
    if depth > 3:
        return None
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for x in items:
        t = _first_grad_tensor(x, torch, depth + 1)
        if t is not None:
            return t
    return None


def when_model_trains(ctx: FixContext, torch, decide, done: dict) -> None:
    """Call decide(module) once, when a backward first runs through a root call of a model; done["seen"] is the
    first model called at all (for the "inference only" reason), done["compiled"] is set by decide."""
    safe_decide = ctx.safely(decide)

    def on_pre(module, args):
        done.setdefault("seen", module)
        return None

    def on_post(module, args, output):
        if id(module) in done.setdefault("compiled_ids", set()) or not torch.is_grad_enabled():
            return None
        t = _first_grad_tensor(output, torch)
        if t is None:     # an eval pass (no_grad, or nothing to differentiate): not a training call
            return None

        def on_grad(grad):
            safe_decide(module)
            return None

        t.register_hook(on_grad)
        return None

    RootForwardHooks(on_pre, on_post).install(ctx)


def install(ctx: FixContext, mode_for=None) -> None:
    import torch

    state = ctx.state
    done: dict = {}
    wants_graphs = "cuda-graphs" in ctx.requested

    if not hasattr(torch, "compile"):
        state.skipped("this torch has no torch.compile")
        return

    def decide(module):
        """Every model a backward runs through is compiled (a GAN's generator and discriminator both)."""
        ids = done.setdefault("compiled_ids", set())
        if id(module) in ids:
            return
        ids.add(id(module))
        if not done.get("compiled"):
            keep_copies_eager(ctx, torch)
            state.details["compile_s_before"] = dynamo_compile_seconds() or 0.0
            state.details["compiled_at"] = time.monotonic_ns()
        done["compiled"] = module
        mode = None
        on_cuda = next(module.parameters()).is_cuda
        if wants_graphs and on_cuda and cuda_available(torch):
            mode = "reduce-overhead"
        how = compile_model(ctx, module, mode, torch)
        state.applied(type(module).__name__, how + ", decided at its first backward, compiled from its next call "
                      "on" + ("" if module.training else " (the model trains in eval mode)"), mode=mode or "default")

    when_model_trains(ctx, torch, decide, done)

    def finish():
        after = dynamo_compile_seconds()
        if after is not None and "compiled_at" in state.details:
            state.details["compile_s"] = round(after - state.details.get("compile_s_before", 0.0), 3)
        if "compiled_at" in state.details:
            from torch._dynamo.utils import counters
            graphs = counters["stats"].get("unique_graphs", 0)
            state.details["graphs_compiled"] = graphs
            if not graphs:
                state.skipped("torch.compile produced no graph (compile errors fall back to eager)")
        state.details.pop("compiled_at", None)
        state.details.pop("compile_s_before", None)
        if "seen" in done and not done.get("compiled"):
            state.skipped(INFERENCE_ONLY, type(done["seen"]).__name__)

    # A compile failure (no C++ compiler, an unsupported op) must fall back to eager, not end the training run.
    import torch._dynamo
    saved = torch._dynamo.config.suppress_errors
    torch._dynamo.config.suppress_errors = True
    ctx.on_undo(lambda: setattr(torch._dynamo.config, "suppress_errors", saved))
    ctx.on_undo(finish)
