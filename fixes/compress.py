"""compress: a DDP communication hook that all-reduces gradients in fewer bytes.

Variants (`--fix compress` or `--fix compress=VARIANT`):
  fp16 (default): gradients cast to float16 for the all-reduce, half the bytes;
  bf16: same size as fp16 but float32's range; used by default where the backend supports it (NCCL >= 2.10
        with a bf16-capable GPU), since it cannot overflow;
  powersgd: low-rank (rank 1) PowerSGD with error feedback, far fewer bytes, approximate gradients.
The hook is registered at the model's first forward, so a script that registers its own hook (DDP allows only one)
keeps it and this fix reports itself skipped.
"""
from __future__ import annotations

from .base import FixContext
from . import _ddp

ID = "compress"
NOT_TRIGGERED = "the script constructed no DistributedDataParallel model"
VARIANTS = ("fp16", "bf16", "powersgd")
POWERSGD_RANK = 1
POWERSGD_START_ITER = 2     # plain all-reduce for the first steps only (PowerSGD's own default waits 1000)


def choose_variant(requested: str | None, backend: str, torch) -> tuple[str, str]:
    if requested:
        return requested, "as requested"
    if backend == "nccl" and torch.cuda.is_available() and torch.cuda.is_bf16_supported() and \
            getattr(torch.cuda.nccl, "version", lambda: (0,))() >= (2, 10):
        return "bf16", "bf16 on NCCL >= 2.10 (fp16's size, float32's range)"
    return "fp16", f"fp16 ({backend} backend)"


def make_hook(variant: str, process_group, torch):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if variant == "fp16":
        return process_group, default_hooks.fp16_compress_hook
    if variant == "bf16":
        return process_group, default_hooks.bf16_compress_hook
    state = powerSGD_hook.PowerSGDState(process_group=process_group, matrix_approximation_rank=POWERSGD_RANK,
                                        start_powerSGD_iter=POWERSGD_START_ITER)
    return state, powerSGD_hook.powerSGD_hook


def install(ctx: FixContext) -> None:
    import torch

    state = ctx.state
    if ctx.variant is not None and ctx.variant not in VARIANTS:
        state.skipped(f"unknown variant {ctx.variant!r} (known: {', '.join(VARIANTS)})")
        return
    cls = _ddp.ddp_class()
    if cls is None:
        state.skipped("torch.distributed is not available in this build")
        return
    user_hooked: set = set()
    original_register = cls.register_comm_hook

    def register_comm_hook(self, *args, **kwargs):
        user_hooked.add(id(self))
        return original_register(self, *args, **kwargs)

    def after(ddp) -> None:
        handle: dict = {}

        def first_forward(module, args):
            handle.pop("h").remove()   # once: the hook is registered before the first backward, or not at all
            target = "DistributedDataParallel"
            if id(module) in user_hooked:
                state.skipped("the script registers its own communication hook", target)
                return None
            backend = torch.distributed.get_backend(module.process_group)
            variant, why = choose_variant(ctx.variant, backend, torch)
            hook_state, hook = make_hook(variant, module.process_group, torch)
            original_register(module, hook_state, hook)
            state.applied(target, f"{variant} communication hook: {why}", variant=variant, backend=backend,
                          hook=hook.__name__)
            return None

        handle["h"] = ddp.register_forward_pre_hook(ctx.safely(first_forward))

    ctx.patch(cls, "register_comm_hook", register_comm_hook)
    _ddp.wrap_init(ctx, after=after)
