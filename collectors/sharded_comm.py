"""Collective timing for sharded data parallel (FSDP2's fully_shard, the FullyShardedDataParallel wrapper): how
long its all-gathers and reduce-scatters take, and how much of that the training thread spent waiting.

FSDP launches its collectives from Python (torch.distributed.all_gather_single / reduce_scatter_single in FSDP2 and
the wrapper, which on CPU all-gathers into a list with all_gather), so every call is seen by wrapping those
functions. The phase collector already times each call on the training thread as an "allreduce" interval (exposed
communication, like DDP's sync at the end of backward); this adds, read-only:

  * each collective's span from issue to completion. A blocking call completes when it returns; an async one
    (async_op=True: FSDP2's prefetching unshard) completes when its Work's future does, noted by a callback on
    the backend's own thread, not the training thread. On a device (NCCL) a collective returns once queued on
    its stream: its time is the device timeline's (the phase collector's CUDA events), and the step's
    statistics say so (device_calls);
  * the training thread's wait inside Work.wait() on an async collective: exposed too, written as an "allreduce"
    interval so the step analyzer counts it;
  * per optimizer step, one ["@ddp", t, t, {...}] record (the gradient-sync statistics channel the job merge
    reads, also used for DDP's reducer timers) with source "fsdp": the summed span, the exposed part, split by
    kind. Only steps that ran a sharded collective (all-gather into one tensor, reduce-scatter; SHARDED) write
    it: DDP never calls those from Python, so a DDP job's statistics stay DDP's own.

Nothing here changes what the collectives do, their process group or their order.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from collections import deque
from typing import Callable

from haiprof.rundir.vocabulary import DDP_MARK as STATS_MARK

from .undo import StepHooked

SOURCE = "fsdp"
# Python-level collectives by the kind they are counted as: the ones sharded data parallel uses, and the rest of
# those the phase collector times, so that a wait inside any of them belongs to it (not counted twice).
KINDS = {
    "all_gather_single": "all_gather", "all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather",
    "reduce_scatter_single": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "all_reduce": "all_reduce",
    "all_gather": "all_gather",   # the FullyShardedDataParallel wrapper's all-gather on CPU (a list of chunks)
    **dict.fromkeys(("broadcast", "reduce", "reduce_scatter", "all_to_all", "all_to_all_single", "barrier",
                     "gather", "scatter", "all_gather_object", "broadcast_object_list"), "other"),
}
# A step that calls one of these is a sharded step; all_gather into a list and all_reduce alone are what any
# script may call (metrics, a DDP job's loss), so they count only beside them.
SHARDED = {"all_gather_single", "all_gather_into_tensor", "_all_gather_base", "reduce_scatter_single",
           "reduce_scatter_tensor", "_reduce_scatter_base"}
PENDING_MAX = 1 << 16


class ShardedCommObserver(StepHooked):
    """Installs the wrappers; `append(record)` is the sink shared with the phase collector (thread-safe)."""

    def __init__(self, append: Callable, clock=time.monotonic_ns):
        self._append = append
        self._clock = clock
        # bounded: a script with no optimizer step never sums them (its records stay the phase recorder's)
        self._pending: deque = deque(maxlen=PENDING_MAX)
        self._undo: list[Callable] = []
        self._owner_pid = os.getpid()
        self._inside = threading.local()   # in one of our collectives: its own internal wait is not counted twice
        self._reset()

    def _reset(self) -> None:
        self._span = dict.fromkeys(KINDS.values(), 0)
        self._calls = dict.fromkeys(KINDS.values(), 0)
        self._bytes = 0
        self._exposed = 0          # ns the training thread blocked: blocking calls and waits on async ones
        self._async = 0
        self._sharded = 0
        self._on_device = 0        # sharded collectives on device tensors: timed on the device timeline instead

    # -- records ------------------------------------------------------------------------------------------------
    # Each collective and each wait is one deque.append (atomic, from any thread: completions arrive on the
    # backend's); they are summed once per optimizer step.
    def _after_step(self, *_args) -> None:
        done = self._pending
        if not done:   # no collective this step (a single-process run): the counters are still zero
            return
        while done:
            kind, start, end, blocked, nbytes, is_async, sharded = done.popleft()
            if kind is not None:
                self._span[kind] += end - start
                self._calls[kind] += 1
                self._bytes += nbytes
                self._async += is_async
                if sharded < 0:
                    self._on_device += 1
                self._sharded += sharded != 0
            self._exposed += blocked
        if self._sharded:
            stats = {"source": SOURCE, "comm_ns": sum(self._span.values()), "exposed_ns": self._exposed,
                     "span_ns": {k: v for k, v in self._span.items() if self._calls[k]},
                     "calls": {k: v for k, v in self._calls.items() if v}, "bytes": self._bytes,
                     "async_calls": self._async, "device_calls": self._on_device}
            t = self._clock()
            self._append((STATS_MARK, t, t, stats))
        self._reset()

    # -- wrappers -------------------------------------------------------------------------------------------------
    def _wrap(self, name: str, fn: Callable) -> Callable:
        kind, clock, done, inside = KINDS[name], self._clock, self._pending.append, self._inside
        sharded = name in SHARDED

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if getattr(inside, "depth", 0):   # a collective made of others (all_gather_object): the outer is timed
                return fn(*args, **kwargs)
            start = clock()
            inside.depth = 1
            try:
                work = fn(*args, **kwargs)
            finally:
                inside.depth = 0
            end = clock()
            try:
                nbytes, on_device = _input(kind, args, kwargs)
                future = work.get_future() if work is not None and hasattr(work, "get_future") else None
                if on_device:   # NCCL & co. return once the collective is queued on a stream: its span is the
                    done((kind, 0, 0, 0, nbytes, False, -1 if sharded else 0))   # device timeline's, not ours
                elif future is None:
                    done((kind, start, end, end - start, nbytes, False, sharded))
                else:   # the span ends when the backend completes it; waiting on it is timed in Work.wait
                    future.add_done_callback(
                        lambda _f: done((kind, start, clock(), end - start, nbytes, True, sharded)))
            except Exception:   # a backend without futures: its span is unknown, the collective is untouched
                pass
            return work

        wrapper.__haiprof_sharded__ = fn
        return wrapper

    def _wrap_wait(self, fn: Callable) -> Callable:
        clock, append, done, inside = self._clock, self._append, self._pending.append, self._inside

        @functools.wraps(fn)
        def wait(work, *args, **kwargs):
            if getattr(inside, "depth", 0):   # a blocking collective waiting on itself: timed by its wrapper
                return fn(work, *args, **kwargs)
            start = clock()
            try:
                return fn(work, *args, **kwargs)
            finally:
                end = clock()
                append(("allreduce", start, end))
                done((None, start, end, end - start, 0, False, False))

        wait.__haiprof_sharded__ = fn
        return wait

    # -- install / uninstall ------------------------------------------------------------------------------------
    def _patch(self, owner, name: str, make: Callable) -> None:
        original = getattr(owner, name, None)
        if original is None or hasattr(original, "__haiprof_sharded__"):
            return
        setattr(owner, name, make(original))
        self._undo.append(lambda: setattr(owner, name, original))

    def install(self) -> "ShardedCommObserver":
        import torch
        import torch.optim.optimizer as optim_mod

        if not torch.distributed.is_available():
            return self
        dist = torch.distributed
        for name in KINDS:
            self._patch(dist, name, functools.partial(self._wrap, name))
        work_cls = getattr(dist, "Work", None)
        if work_cls is not None:
            self._patch(work_cls, "wait", self._wrap_wait)
        self._hook_steps_and_fork(optim_mod)
        return self


def _input(kind: str, args: tuple, kwargs: dict) -> tuple[int, bool]:
    """(bytes, on a device) of the collective's input tensor: all_reduce(tensor, ...), the others (output, input,
    ...)."""
    if kind == "other":
        return 0, False
    t = kwargs.get("tensor") if kind == "all_reduce" else kwargs.get("input_tensor", kwargs.get("input"))
    if t is None:
        i = 0 if kind == "all_reduce" else 1
        t = args[i] if len(args) > i else None
    try:
        return int(t.numel() * t.element_size()), t.device.type != "cpu"
    except Exception:   # not a tensor: its size is unknown, the collective is still timed
        return 0, False
