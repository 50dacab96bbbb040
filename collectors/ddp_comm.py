"""Gradient-sync collector for DistributedDataParallel: what part of backward is waiting for communication.

DDP launches its bucket allreduces from C++ inside backward, so no Python collective is ever called. We observe
it without touching what DDP does:

  * a post-accumulate-grad hook on every parameter of each DDP model records only the clock: the moment the last
    gradient of a backward is ready. Whatever backward still spends after that is DDP finishing its gradient sync
    (waiting for the outstanding bucket allreduces, then copying the averaged buckets back): exposed
    communication. It is written as an "allreduce" interval [last grad ready, backward returned], which the step
    analyzer attributes ahead of the enclosing backward;
  * DDP's own reducer timers (`_get_ddp_logging_data()`: communication span and its overlap with backward
    compute, recorded by DDP on its sampled iterations) are read after optimizer steps as ["@ddp", t, t, {...}];
  * the size of each batch the DataLoader returns (elements over its tensors) as ["@batch", t, t, numel], so a
    slow rank can be told apart from a rank that simply got more data.

Nothing here registers a comm hook, changes bucket sizes or synchronizes: the user's own comm hook still works.
"""
from __future__ import annotations

import functools
import os
import time
import weakref
from typing import Callable

from haiprof.rundir.vocabulary import BATCH_MARK, DDP_MARK

from .undo import StepHooked

DDP_KEYS = ("avg_backward_comm_time", "avg_backward_compute_comm_overlap_time", "avg_backward_compute_time",
            "avg_forward_compute_time")
# DDP samples its timers on its first 10 iterations and every 100th after; reading more often finds nothing new.
_READ_FIRST, _READ_EVERY = 12, 50


def batch_numel(batch, _depth: int = 0) -> int:
    """Elements in the tensors of a batch (tuple/list/dict nesting, two levels deep is plenty)."""
    numel = getattr(batch, "numel", None)
    if callable(numel) and hasattr(batch, "dtype"):
        return int(numel())
    if _depth >= 2:
        return 0
    if isinstance(batch, dict):
        return sum(batch_numel(v, _depth + 1) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_numel(v, _depth + 1) for v in batch)
    return 0


class DDPCommObserver(StepHooked):
    """Installs the read-only observation; `append(record)` is the sink shared with the phase collector."""

    def __init__(self, append: Callable, clock=time.monotonic_ns):
        self._append = append
        self._clock = clock
        self._models: list = []          # weakrefs to DDP instances created under the profiler
        self._last_grad_ns = 0
        self._grads_seen = 0
        self._steps = 0
        self._undo: list[Callable] = []
        self._owner_pid = os.getpid()

    # -- hooks ------------------------------------------------------------------------------------------------
    def _on_grad(self, _param) -> None:
        self._last_grad_ns = self._clock()
        self._grads_seen += 1

    def _watch(self, ddp) -> None:
        handles = []
        for p in ddp.module.parameters():
            if p.requires_grad and hasattr(p, "register_post_accumulate_grad_hook"):
                handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
        self._models.append(weakref.ref(ddp))
        self._undo.extend(h.remove for h in handles)

    def _after_backward(self, end_ns: int) -> None:
        if self._grads_seen and self._last_grad_ns and end_ns > self._last_grad_ns:
            self._append(("allreduce", self._last_grad_ns, end_ns))
        self._grads_seen = 0
        self._last_grad_ns = 0

    def _after_step(self, *_args) -> None:
        self._steps += 1
        if self._steps > _READ_FIRST and self._steps % _READ_EVERY:
            return
        for i, ref in enumerate(self._models):
            ddp = ref()
            if ddp is None:
                continue
            try:
                data = ddp._get_ddp_logging_data()
            except Exception as e:  # private API: say why the numbers are missing, once
                self._append((DDP_MARK, self._clock(), 0, {"error": f"{type(e).__name__}: {e}"}))
                self._models[i] = lambda: None
                continue
            stats = {k: int(data[k]) for k in DDP_KEYS if k in data}
            if stats:
                stats.update(model=i, bucket_cap_mb=getattr(ddp, "bucket_bytes_cap", 0) / 2**20,
                             backend=str(data.get("backend_name", "")))
                t = self._clock()
                self._append((DDP_MARK, t, t, stats))

    # -- install / uninstall ----------------------------------------------------------------------------------
    def install(self) -> "DDPCommObserver":
        import torch
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        if torch.distributed.is_available():
            from torch.nn.parallel import distributed as ddp_mod
            cls = ddp_mod.DistributedDataParallel
            original_init = cls.__init__
            observer = self

            @functools.wraps(original_init)
            def init(ddp, *args, **kwargs):
                original_init(ddp, *args, **kwargs)
                if os.getpid() == observer._owner_pid:
                    observer._watch(ddp)

            cls.__init__ = init
            self._undo.append(lambda: setattr(cls, "__init__", original_init))

        original_backward = torch.autograd.backward

        @functools.wraps(original_backward)
        def backward(*args, **kwargs):
            try:
                return original_backward(*args, **kwargs)
            finally:
                self._after_backward(self._clock())

        torch.autograd.backward = backward
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))

        it = dl_mod._BaseDataLoaderIter
        original_next = it.__next__
        append, clock = self._append, self._clock

        @functools.wraps(original_next)
        def next_(loader_iter):
            batch = original_next(loader_iter)
            try:
                t = clock()
                append((BATCH_MARK, t, t, batch_numel(batch)))
            except Exception:  # an exotic batch type has no size we can read: skip the record, keep the batch
                pass
            return batch

        it.__next__ = next_
        self._undo.append(lambda: setattr(it, "__next__", original_next))
        self._hook_steps_and_fork(optim_mod)
        return self
