"""Find "the model" without code change: the outermost module call that owns trainable parameters.

A global forward pre-hook sees every module call; depth 0 is a root call (the user's `model(x)`; a loss module
such as CrossEntropyLoss is a root too, but owns no parameters, so it is not the model).
"""
from __future__ import annotations

from typing import Callable


def is_model(module) -> bool:
    return any(p.requires_grad for p in module.parameters())


class RootForwardHooks:
    """Calls on_pre(module, args) / on_post(module, args, output) for root calls of modules with parameters.

    on_post may return a replacement output (as a forward hook may); exceptions still reach on_post
    (always_call), so a context entered in on_pre is always left.
    """

    def __init__(self, on_pre: Callable, on_post: Callable | None = None):
        self._on_pre, self._on_post = on_pre, on_post
        self._depth = 0
        self._active: list = []   # stack of root modules whose on_pre ran

    def _pre(self, module, args):
        self._depth += 1
        if self._depth == 1 and is_model(module):
            self._active.append(module)
            return self._on_pre(module, args)
        return None

    def _post(self, module, args, output):
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self._active and self._active[-1] is module:
            self._active.pop()
            if self._on_post is not None:
                return self._on_post(module, args, output)
        return None

    def install(self, ctx) -> None:
        import torch.nn.modules.module as nn_module
        self._on_pre = ctx.safely(self._on_pre)
        if self._on_post is not None:
            self._on_post = ctx.safely(self._on_post)
        h1 = nn_module.register_module_forward_pre_hook(self._pre)
        h2 = nn_module.register_module_forward_hook(self._post, always_call=True)
        ctx.on_undo(h1.remove)
        ctx.on_undo(h2.remove)
