"""The patches PhaseRecorder (phases.py) puts on torch besides its hooks, each returning or queueing its undo.

- `install_h2d`: Tensor.to / Tensor.cuda wrapped, so a host-to-device copy is an "h2d" span (on the training
  thread, for every Tensor.to: the common cases leave after one attribute read and a type check);
- `final_grad`: whether an autograd.grad call ends a step (it then marks one, as a backward pass does);
- `watch_optimizers`: Optimizer.__init__ wrapped, so the recorder knows the script built an optimizer (its steps
  are then the training steps, not its backward passes);
- `hide_hooks_from_copies`: the recorder's hooks on the user's root modules left out of copies of the modules.

Kept apart from phases.py, which holds the recorder's state and hooks: these wrap torch's own classes.
"""
from __future__ import annotations

import functools
from typing import Callable

_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called")


def final_grad(args, kwargs) -> bool:
    """A torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, ...) call that builds no
    graph of its own: the gradients a step ends with. One with create_graph (a gradient penalty, a meta-learning
    inner loop) is inside a step, not its end."""
    return not (kwargs["create_graph"] if "create_graph" in kwargs else len(args) > 4 and args[4])


def hide_hooks_from_copies(hook_ids: set) -> Callable:
    """While our hooks sit on the user's root modules, a copy of a module (copy.deepcopy, pickle, torch.save) is
    made without them: the state nn.Module.__getstate__ returns leaves out the entries with our hook ids. So a
    checkpointed or EMA-copied model pickles (our hooks hold the recorder, its lock and queue), loads where haiprof
    is not installed, and a copy never records into the run. Returns the undo."""
    from haiprof.module_state import leave_out_of_copies

    def without_our_hooks(state: dict) -> dict:
        for key in _HOOK_DICTS:
            hooks = state.get(key)
            if hooks and not hook_ids.isdisjoint(hooks):
                state[key] = type(hooks)((k, v) for k, v in hooks.items() if k not in hook_ids)
        return state
    return leave_out_of_copies(without_our_hooks)


def watch_optimizers(optimizer_cls, recorder, undo: list) -> None:
    """Set `recorder.optimizer_made` when an `optimizer_cls` is built; the undo is appended to `undo`."""
    original = optimizer_cls.__init__
    if hasattr(original, "__haiprof_wrapped__"):
        return

    @functools.wraps(original)
    def __init__(opt, *args, **kwargs):
        recorder.optimizer_made = True
        return original(opt, *args, **kwargs)

    __init__.__haiprof_wrapped__ = original
    optimizer_cls.__init__ = __init__
    undo.append(lambda: setattr(optimizer_cls, "__init__", original))


def install_h2d(torch, clock: Callable, append: Callable, gpu_begin: Callable, gpu_end: Callable,
                undo: list) -> None:
    """Time host-to-device copies made with Tensor.to / Tensor.cuda as ("h2d", start_ns, end_ns) through
    `append`, with the recorder's CUDA-event pair (`gpu_begin`, `gpu_end`); the undos are appended to `undo`."""
    original_to, original_cuda = torch.Tensor.to, torch.Tensor.cuda

    Tensor = torch.Tensor

    # Called for every Tensor.to in the script and inside torch: the common cases (a GPU tensor, a dtype
    # cast) leave after one attribute read and a type check.
    def to(self, *args, **kwargs):
        if not self.is_cpu:
            return original_to(self, *args, **kwargs)
        target = args[0] if args else None
        if kwargs:
            target = kwargs.get("device", target)
        if target is None or target.__class__ is torch.dtype:
            return original_to(self, *args, **kwargs)
        if isinstance(target, Tensor):
            target = target.device
        if "cuda" not in str(target):
            return original_to(self, *args, **kwargs)
        start, event = clock(), gpu_begin()
        try:
            return original_to(self, *args, **kwargs)
        finally:
            append(("h2d", start, clock()))
            gpu_end("h2d", event)

    def cuda(self, *args, **kwargs):
        if not self.is_cpu:
            return original_cuda(self, *args, **kwargs)
        start, event = clock(), gpu_begin()
        try:
            return original_cuda(self, *args, **kwargs)
        finally:
            append(("h2d", start, clock()))
            gpu_end("h2d", event)

    torch.Tensor.to, torch.Tensor.cuda = to, cuda
    undo.append(lambda: setattr(torch.Tensor, "to", original_to))
    undo.append(lambda: setattr(torch.Tensor, "cuda", original_cuda))
