"""Hooking DistributedDataParallel construction, shared by compress and bucket."""
from __future__ import annotations

import functools
import inspect


def ddp_class():
    import torch
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel


def wrap_init(ctx, before=None, after=None) -> bool:
    """Patch DDP.__init__: before(arguments) may edit the bound arguments; after(ddp) runs on the new instance."""
    cls = ddp_class()
    if cls is None:
        ctx.state.skipped("torch.distributed is not available in this build")
        return False
    original = cls.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)   # keeps the real signature visible to a fix stacked on top
    def patched(self, *args, **kwargs):
        if not ctx.in_main_process():
            return original(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return original(self, *args, **kwargs)
        if before is not None:
            ctx.safely(before)(bound.arguments)
        original(*bound.args, **bound.kwargs)
        if after is not None:
            ctx.safely(after)(self)

    ctx.patch(cls, "__init__", patched)
    return True


def gradient_bytes(module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
