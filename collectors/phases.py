"""Phase collector: times dataloader / h2d / forward / backward / optimizer / allreduce with no code change.

It uses PyTorch's global hooks (module forward hooks, optimizer step hooks) and wraps a handful of entry points
(DataLoader iteration, autograd.backward, Tensor.to on CUDA, torch.distributed collectives). Hooks only append
(phase, start_ns, end_ns) to a queue; a background thread writes them. Partitioning into steps happens later, in
the analyzers, so the hot path stays a clock read and an append. The wrappers put on torch's own classes
(Tensor.to/.cuda for h2d, Optimizer.__init__, hiding our hooks from module copies) are in phase_patches.py, the
module forward hooks (global, then narrowed to the root modules) in forward_hooks.py, and the probes of what the
script already does (amp, compile, a fused optimizer) in script_uses.py.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Callable

from .forward_hooks import NARROW_AFTER_STEPS, ForwardHooks
from .loader_cpu import ThreadBusyClock
from .optimizer_cycle import OptimizerCycle
from .phase_patches import final_grad, install_h2d, watch_optimizers
from .script_uses import probe_module, probe_optimizer
from .undo import undo_all

# LOADER_MARK: once per DataLoader iterator, the truth the system sampler can miss (workers that live for less
# than a sample) and whether batches arrive pinned. Analyzers that do not know it skip it like any other "@" mark.
# MEM_MARK: device memory counters at a step end (analyzers/gpu_kernels.memory_per_step).
from haiprof.rundir.vocabulary import BACKWARD_MARK, EVAL, LOADER_MARK, MEM_MARK, OPT_STEP_MARK, STEP_MARK  # noqa: F401

_NOTED = "_haiprof_noted"
MEM_EVERY_NS = 50_000_000

_DIST_COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter",
    "all_gather_object", "broadcast_object_list",
    # sharded data parallel (FSDP2 and the FSDP wrapper) and older releases' private names
    "all_gather_single", "reduce_scatter_single", "_all_gather_base", "_reduce_scatter_base",
)

RESOLVE_EVERY_STEPS = 64


class StepLimitReached(SystemExit):
    """Raised after `--steps N` when step N+1 begins (so step N's own iteration, its logging and eval, ran): a
    clean exit (code 0) the user's `except Exception` does not swallow."""

    def __init__(self, steps: int):
        super().__init__(0)
        self.steps = steps


END_WAIT_S = 2.0


class PhaseRecorder:
    """Installs the hooks; `append(record)` is the only sink (a JsonlAppender in practice)."""

    def __init__(self, append: Callable, max_steps: int | None = None, clock=time.monotonic_ns):
        self._append = append
        self._clock = clock
        self.max_steps = max_steps
        self.steps = 0
        self._depth = 0          # nesting of module forward calls; only the outermost is timed
        self._fwd_start = 0
        self._in_backward = 0
        self._undo: list[Callable] = []
        self._module_hooks = ForwardHooks(self._forward_pre, self._forward_post, self._undo)
        self._owner_pid = os.getpid()
        self.cuda_timer = None   # created lazily once the script has initialised CUDA
        self._torch_cuda = None
        self._fwd_event = self._opt_event = None
        self._opt_start = 0
        self._busy_clock = ThreadBusyClock()
        # Called with the number of completed optimizer steps after each one (e.g. the tracing window); a
        # callback must not raise.
        self.step_callbacks: list[Callable[[int], None]] = []
        self._opt_outer = None   # the optimizer whose step is being timed (wrappers nest inner steps)
        # several optimizers in one iteration: a step is their whole cycle, per thread (two threads training two
        # models step each on its own)
        self._cycles: dict[int, OptimizerCycle] = {}
        # CUDA event pairs are resolved in batches off the step: by whoever calls drain() (haiprof run: the phase
        # writer's flush thread, which then sets this to 0), else on the training thread every this many steps.
        self.resolve_every = RESOLVE_EVERY_STEPS
        self._mem_last = -MEM_EVERY_NS
        self._grad_enabled = lambda: True   # torch.is_grad_enabled once installed
        self.on_limit: Callable | None = None   # called at --steps N instead of unwinding the script (never returns)
        # --steps N: set at step N's end; the stop is raised where step N+1 begins (a training forward, backward,
        # optimizer step, or the next batch of a loader iterator made before the limit). If the script swallows
        # it (a bare `except:`) and goes on, on_swallowed ends the run (never returns).
        self.limit_hit_ns: int | None = None
        self._limit_raised = False
        self.on_swallowed: Callable | None = None
        # What the script already does, looked at during its first steps only (the advice leaves those fixes
        # out): mixed precision (autocast, or bf16/fp16 weights), a compiled root module, a fused or foreach
        # optimizer. One flag check per hook afterwards.
        self.script_uses: dict = {}
        self._probe = True
        # Inside the DataLoader's __next__ (num_workers=0): modules that run there are preprocessing (torchvision
        # transforms are nn.Modules), their time is loading, not the model's forward.
        self._in_loader = 0
        self._loader_thread = None   # the thread inside __next__: another thread's forward is still the model's
        self.optimizer_made = False   # any torch.optim.Optimizer built while installed: steps are its steps
        self._fwd_phase = "forward"

    @property
    def narrowed_to(self) -> int | None:
        """The number of root modules the forward hooks were narrowed to (None: still global)."""
        return self._module_hooks.narrowed_to

    @property
    def kept_global(self) -> str:
        """Why the forward hooks stayed global past step 2 ("": narrowed, or no forward seen)."""
        return self._module_hooks.kept_global

    # -- hooks ----------------------------------------------------------------------------------------
    def _gpu_begin(self):
        # CUDA events only once the script itself has initialised CUDA: never create a context for it.
        if self.cuda_timer is None:
            if self._torch_cuda is None or not self._torch_cuda.is_initialized():
                return None
            from .cuda_phases import CudaPhaseTimer
            import torch
            self.cuda_timer = CudaPhaseTimer(torch, self._append, self._clock)
        return self.cuda_timer.begin()

    def _gpu_end(self, phase: str, event) -> None:
        if event is not None:
            self.cuda_timer.end(phase, event)

    def drain_from(self, hooks: list) -> "PhaseRecorder":
        """Have another thread drive drain() (e.g. the phase writer's flush hooks): none on the training thread."""
        hooks.append(self.drain)
        self.resolve_every = 0
        return self

    def drain(self, wait_s: float = 0.0) -> None:
        """Emit the CUDA-event spans the GPU has finished (any thread; never raises; waits up to wait_s for the
        rest, only at the end of the run)."""
        timer = self.cuda_timer
        if timer is None or os.getpid() != self._owner_pid:   # a forked child must not touch CUDA
            return
        try:
            if wait_s > 0 and hasattr(timer, "resolve_all"):
                timer.resolve_all(wait_s)
            else:
                timer.resolve()
        except Exception:  # noqa: BLE001 (a broken CUDA context is the script's to report, not ours)
            pass

    def _stop_at_limit(self) -> None:
        if self._limit_raised and self.on_swallowed is not None:
            self.on_swallowed()
        self._limit_raised = True
        raise StepLimitReached(self.steps)

    def _forward_pre(self, module, args):
        if self._in_loader and threading.get_ident() == self._loader_thread:
            return
        if self._depth == 0:
            if self.limit_hit_ns is not None and module.training and self._grad_enabled():
                self._stop_at_limit()
            # A forward under no_grad/inference_mode or in eval() mode is "eval"; the analyzers decide whether it
            # is evaluation between steps or part of training (a frozen teacher), step_columns.eval_blocks_columns.
            self._fwd_phase = "forward" if self._grad_enabled() and module.training else EVAL
            self._fwd_start = self._clock()
            self._fwd_event = self._gpu_begin()
            if self._module_hooks.narrowed_to is None:
                self._module_hooks.roots.add(module)
            if self._probe:
                probe_module(module, self.script_uses)
        self._depth += 1

    def _forward_post(self, module, args, output):
        if self._in_loader and threading.get_ident() == self._loader_thread:
            return
        self._depth -= 1
        if self._depth <= 0:
            self._depth = 0
            self._append((self._fwd_phase, self._fwd_start, self._clock()))
            self._gpu_end(self._fwd_phase, self._fwd_event)

    def _opt_pre(self, optimizer, args, kwargs):
        # Wrapper optimizers (ZeroRedundancyOptimizer, any Optimizer subclass that delegates to an inner one)
        # fire the global hooks twice per step: only the outermost step is timed and counted. A step that
        # raised never reached its post hook; the same optimizer stepping again starts afresh.
        if self._opt_outer is not None and self._opt_outer is not optimizer:
            return
        if self.limit_hit_ns is not None:
            self._stop_at_limit()
        if self._probe:
            probe_optimizer(optimizer, self.script_uses)
        self._opt_outer = optimizer
        self._opt_start = self._clock()
        self._opt_event = self._gpu_begin()

    def _opt_post(self, optimizer, args, kwargs):
        if optimizer is not self._opt_outer:
            return
        self._opt_outer = None
        now = self._clock()
        self._append(("optimizer", self._opt_start, now))
        self._gpu_end("optimizer", self._opt_event)
        tid = threading.get_ident()
        cycle = self._cycles.get(tid)
        if cycle is None:
            if len(self._cycles) >= 64:   # threads come and go (a pool): the ones gone need no cycle kept
                self._cycles.clear()
            cycle = self._cycles[tid] = OptimizerCycle()
        if not cycle.ends_step(optimizer):
            self._append((OPT_STEP_MARK, now, now))
            return
        self._append((STEP_MARK, now, now))
        if self.cuda_timer is not None:
            self._memory_mark(now)
        self._step_done(now)

    def _backward_done(self, now: int) -> None:
        """A script that never made an optimizer (a hand-written update) steps at each backward: the tracing
        window, --steps and the other step callbacks follow its backward passes."""
        if not self.optimizer_made:
            self._step_done(now)

    def _step_done(self, now: int) -> None:
        self.steps += 1
        if self.resolve_every and self.cuda_timer is not None and self.steps % self.resolve_every == 0:
            self.drain()
        if self.steps > NARROW_AFTER_STEPS:
            self._probe = False
        if self.steps == NARROW_AFTER_STEPS and self._module_hooks.is_global:
            self._module_hooks.narrow()
        for callback in self.step_callbacks:
            callback(self.steps)
        if self.max_steps is not None and self.steps >= self.max_steps:
            if self.on_limit is not None:   # a diagnosis pass: ends here, the script's cleanup not run
                self.on_limit()
            if self.limit_hit_ns is None:
                self.limit_hit_ns = now

    def _memory_mark(self, now: int) -> None:
        """["@mem", t, t, allocated, peak allocated, reserved, peak reserved]: the caching allocator's host-side
        counters (no synchronize, no device call), at most every MEM_EVERY_NS so fast steps pay nothing."""
        if now - self._mem_last < MEM_EVERY_NS:
            return
        self._mem_last = now
        try:
            st = self._torch_cuda.memory_stats()
            self._append((MEM_MARK, now, now, st.get("allocated_bytes.all.current", 0),
                          st.get("allocated_bytes.all.peak", 0), st.get("reserved_bytes.all.current", 0),
                          st.get("reserved_bytes.all.peak", 0)))
        except Exception:
            self._mem_last = float("inf")   # counters unavailable (another allocator backend): stop asking

    def _timed(self, phase: str, fn: Callable, mark: str | None = None, marks_if=None) -> Callable:
        clock, append = self._clock, self._append
        gpu_begin, gpu_end = self._gpu_begin, self._gpu_end
        host_only = phase == "dataloader"  # waiting for a batch is host time by definition
        stops = phase in ("dataloader", "backward")   # where step N+1 can begin after --steps N
        recorder = self

        busy_clock = self._busy_clock

        def note_loader(it, t: int) -> None:
            try:
                setattr(it, _NOTED, t)   # when it was first used: the --steps stop knows the training loader
                append((LOADER_MARK, t, t, int(getattr(it, "_num_workers", 0) or 0),
                        bool(getattr(it, "_pin_memory", False))))
            except Exception:
                pass  # an iterator we cannot tag is only a missing hint, never a failed batch

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if stops and recorder.limit_hit_ns is not None and (
                    not host_only or (args and 0 < getattr(args[0], _NOTED, 0) < recorder.limit_hit_ns)):
                recorder._stop_at_limit()
            start = clock()
            if host_only and args and not getattr(args[0], _NOTED, False):
                note_loader(args[0], start)   # first batch of this iterator only
            # dataloader waits also record the thread's on-CPU and runqueue-wait ns (collectors/loader_cpu.py):
            # with num_workers=0 that separates decoding (busy) from waiting on storage (idle); fields 4 and 5,
            # which older readers ignore.
            busy0 = busy_clock() if host_only else None
            event = None if host_only else gpu_begin()
            if host_only:
                recorder._in_loader += 1
                recorder._loader_thread = threading.get_ident()
            try:
                return fn(*args, **kwargs)
            finally:
                end = clock()
                if host_only:
                    recorder._in_loader -= 1
                    run, wait = busy_clock()
                    append((phase, start, end, run - busy0[0], wait - busy0[1]))
                else:
                    append((phase, start, end))
                gpu_end(phase, event)
                if mark is not None and (marks_if is None or marks_if(args, kwargs)):
                    append((mark, end, end))
                    if mark == BACKWARD_MARK:
                        recorder._backward_done(end)

        wrapper.__haiprof_wrapped__ = fn
        return wrapper

    # -- install / uninstall --------------------------------------------------------------------------
    def _patch(self, owner, name: str, phase: str, mark: str | None = None, marks_if=None) -> None:
        original = getattr(owner, name, None)
        if original is None or hasattr(original, "__haiprof_wrapped__"):
            return
        setattr(owner, name, self._timed(phase, original, mark, marks_if))
        self._undo.append(lambda: setattr(owner, name, original))

    def install(self) -> "PhaseRecorder":
        import torch
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        self._grad_enabled = torch.is_grad_enabled
        self._module_hooks.install()
        h3 = optim_mod.register_optimizer_step_pre_hook(self._opt_pre)
        h4 = optim_mod.register_optimizer_step_post_hook(self._opt_post)
        for handle in (h3, h4):
            self._undo.append(handle.remove)

        watch_optimizers(torch.optim.Optimizer, self, self._undo)
        self._patch(dl_mod._BaseDataLoaderIter, "__next__", "dataloader")
        self._patch(torch.autograd, "backward", "backward", BACKWARD_MARK)
        # autograd.grad is a backward pass too (loops that set .grad themselves, or update by hand)
        self._patch(torch.autograd, "grad", "backward", BACKWARD_MARK, marks_if=final_grad)
        self._patch(torch.optim.Optimizer, "zero_grad", "optimizer")
        self._patch(torch.nn.Module, "zero_grad", "optimizer")
        if torch.distributed.is_available():
            for name in _DIST_COLLECTIVES:
                self._patch(torch.distributed, name, "allreduce")
        # Host-to-device copies exist only with a GPU: on a CPU-only run h2d is 0, measured, not guessed.
        if torch.cuda.is_available():
            self._torch_cuda = torch.cuda
            install_h2d(torch, self._clock, self._append, self._gpu_begin, self._gpu_end, self._undo)
        # DataLoader workers are forked copies: they must not record (nobody would flush them).
        os.register_at_fork(after_in_child=self._in_child)
        return self

    def _in_child(self) -> None:
        if os.getpid() != self._owner_pid:
            self.uninstall()

    def uninstall(self) -> None:
        self._busy_clock.close()
        undo_all(self._undo)
        # The training is over: give the GPU a bounded moment to finish the last steps, so their device ends are
        # recorded (a killed or wedged run still ends within END_WAIT_S).
        self.drain(wait_s=END_WAIT_S)
