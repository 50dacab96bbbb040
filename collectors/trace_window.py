"""Bounded op-level tracing: torch.profiler (Kineto) on for a few optimizer steps after warm-up, off otherwise.

Driven from the phase recorder's step callback: after `warmup_steps` optimizer steps the profiler starts with one
Kineto warm-up step (CUPTI initialisation stays out of the recorded steps), records `active_steps` steps, each
annotated `ProfilerStep#k`, and stops. The window is bracketed in phases.jsonl by "@trace-begin" / "@trace-end"
marks taken around everything the profiler costs (start, export), so the step analysis can drop exactly the steps
it touched. The raw trace is written at the end of the window and compressed only when the run is over, so
compression never competes with training.

On CUDA runs the window must not tax the rest of the run: Kineto leaves CUPTI subscribed after torch.profiler
stops, and every later kernel launch pays for it (+40% per step on a launch-bound H100 run), unless
TEARDOWN_CUPTI=1 is in the environment when it stops (libkineto's CuptiActivityApi::teardownContext). The window
sets it for its stop when the user has not set it, and restores the user's environment when the run is over:
libkineto finishes the teardown asynchronously on a later CUDA call and reads the variable again then. Where the
teardown is off (the user's TEARDOWN_CUPTI, or torch.profiler turning it off for CUDA graphs, which crash on
CUPTI re-initialisation), the status line says so and what it costs.

Nothing here may break the run: every profiler error ends the window and leaves a reason in status.jsonl.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from haiprof.rundir.vocabulary import KINETO_TRACES, TRACE_BEGIN, TRACE_END  # noqa: F401 (TRACE_* re-exported)

from . import script_profile

TRACE_NAME, RAW_NAME = KINETO_TRACES
LOG_NAME = "kineto.log"
NAME = "trace"
STEPS_KEY = "haiprof_traced_steps"   # trace metadata: how many ProfilerSteps are whole steps
GZIP_LEVEL = 6   # ~10x smaller than the JSON at a fraction of level 9's time
TEARDOWN_ENV = "TEARDOWN_CUPTI"
_OWN_BUILDS = [0]   # > 0 while one of our windows builds its profiler: not the script's
_TEARDOWN_SET_BY_US = [False]   # a window of this run set TEARDOWN_CUPTI=1 (later windows keep it)


@contextlib.contextmanager
def _stderr_to(path: Path):
    """Kineto prints start/stop lines straight to fd 2: route them to a log file in the run directory while our
    own profiler calls run, so the script's stderr carries only the script's output."""
    try:
        if sys.stderr is not None:   # a script may set sys.stderr = None, or close it
            sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        os.close(saved)
        yield
        return
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def _inductor_left_unimported():
    """torch.profiler's start asks `hasattr(torch, "_inductor")` to read inductor's CUDA-graph setting, and torch's
    lazy attribute imports torch._inductor and torch._dynamo to answer: ~2 s on the training thread, mid-step, in a
    script that compiles nothing (a script with a torch.optim optimizer has imported them already). Not imported
    means nothing compiled, so nothing to read: on this thread, for this call, the attribute answers "absent"."""
    import torch
    lazy = torch.__dict__.get("__getattr__")
    if "torch._inductor" in sys.modules or not callable(lazy):
        yield
        return
    ours = threading.get_ident()

    def lazy_but_not_inductor_here(name):
        if name == "_inductor" and threading.get_ident() == ours:
            raise AttributeError(name)
        return lazy(name)

    torch.__getattr__ = lazy_but_not_inductor_here
    try:
        yield
    finally:
        if torch.__dict__.get("__getattr__") is lazy_but_not_inductor_here:
            torch.__getattr__ = lazy


class TraceWindow:
    """`on_step(n)` after every optimizer step (n = steps completed); `close()` once the script has ended."""

    def __init__(self, out_dir, append: Callable, record_status: Callable, warmup_steps: int = 2,
                 active_steps: int = 3, clock=time.monotonic_ns, name: str = "trace", watch: bool = True,
                 python_stacks: bool = False):
        self.out_dir = Path(out_dir)
        # file and status names: "trace" for the window after warm-up; "trace-step<N>" for one asked for later
        # (collectors/trace_requests.py), whose own trace file sits beside the first one's
        self.name, self.raw_name, self.trace_name = name, f"{name}.json", f"{name}.json.gz"
        self._append = append
        self._status = record_status
        # the flight recorder's windows: Python functions too (what a stall did outside torch ops); every window
        # records op shapes (the FLOPs of its steps, analyzers/flops.py)
        self.python_stacks = python_stacks
        self.stacks_note = ""        # why a window asked for Python functions has none (script_profile.py)
        self.warmup_steps = max(1, warmup_steps)
        self.active_steps = active_steps
        self._clock = clock
        self._prof = None
        self._start_step = None
        self._done = active_steps <= 0
        self._steps_seen = 0
        self.reason = None
        self._cuda = False
        self._set_teardown = False   # TEARDOWN_CUPTI=1 is ours (the user had not set it): removed at close()
        self._ours = False           # ... by this window or an earlier one of the run
        self.cupti_note = ""         # what became of CUPTI after a CUDA window (status line)
        self._unwatch = None
        if self._done:
            self._record(False, "op-level tracing disabled (--trace-steps 0)")
        elif watch:
            self._watch_script_profilers()

    def _watch_script_profilers(self) -> None:
        """Note any torch.profiler the script builds. A scheduled one is not enabled during its wait/warm-up steps,
        so the enabled check alone would start our window beside it: two Kineto sessions, and the script's
        profiler loses its own (torch's 'disableProfiler called but no active profiling session' warning)."""
        try:
            from torch.profiler import profiler as tp
        except Exception:
            return
        original = tp._KinetoProfile.__init__
        window = self

        def init(prof, *args, **kwargs):
            if not _OWN_BUILDS[0] and not window._done:
                window._script_profiler()
            return original(prof, *args, **kwargs)

        tp._KinetoProfile.__init__ = init
        self._unwatch = lambda: setattr(tp._KinetoProfile, "__init__", original)

    def _script_profiler(self) -> None:
        """The script profiles itself: our window stays out of its way (ended now if it had begun)."""
        try:
            if self._prof is not None:
                self._finish()
            self._done = True
            self.reason = "the script runs its own torch.profiler: haiprof's tracing window skipped"
            self._record(False, self.reason)
        except Exception as e:
            self._fail(e)

    # -- driven by the phase recorder ---------------------------------------------------------------------
    def saw_step(self, completed: int) -> None:
        """A step this window was not driven for (another window was open): counted for the end-of-run note."""
        if self._prof is None:
            self._steps_seen = completed

    def on_step(self, completed: int) -> None:
        self._steps_seen = completed
        if self._done:
            return
        try:
            if self._prof is None:
                if completed >= self.warmup_steps:
                    self._start(completed)
                return
            with _stderr_to(self.out_dir / LOG_NAME):
                self._prof.step()
            if completed >= self._start_step + 1 + self.active_steps:
                self._finish()
        except Exception as e:  # the profiler failing must never reach the training loop
            self._fail(e)

    def _start(self, completed: int) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        if torch._C._autograd._profiler_enabled():
            self._done = True
            self._record(False, "the script runs its own torch.profiler: haiprof's tracing window skipped")
            return
        if self.python_stacks and script_profile.installed() is not None:
            # torch's Python tracer would replace the script's own profiler (sys.setprofile, cProfile) and clear it
            # at the window's end: the window records ops without Python functions instead
            self.python_stacks = False
            self.stacks_note = ("Python functions left out: the script runs its own profiler (sys.setprofile), "
                                "which torch's Python tracer would replace")
        activities = [ProfilerActivity.CPU]
        # Trace the GPU only once the script has initialised CUDA itself: never create a context for it.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            activities.append(ProfilerActivity.CUDA)
            self._cuda = True
            self._arm_teardown()
        begin = self._clock()
        # The constructor too: on GPU builds it queries the supported activities, which can make Kineto talk.
        with _stderr_to(self.out_dir / LOG_NAME):
            _OWN_BUILDS[0] += 1
            try:
                prof = profile(activities=activities, on_trace_ready=self._export,
                               with_stack=self.python_stacks, record_shapes=True,   # shapes: FLOPs, MFU
                               schedule=schedule(wait=0, warmup=1, active=self.active_steps, repeat=1))
            finally:
                _OWN_BUILDS[0] -= 1
            with _inductor_left_unimported():
                prof.start()
        self._prof, self._start_step = prof, completed
        if self.python_stacks:
            self._watch_gc()
        self._append((TRACE_BEGIN, begin, begin))
        devices = "+".join(a.name for a in activities)
        self._record(True, f"tracing {self.active_steps} step(s) ({devices}) after {completed} step(s); "
                                 "window in progress")

    def _record(self, available: bool, reason: str) -> None:
        self._status(self.name, available, "; ".join(filter(None, (reason, self.stacks_note, self.cupti_note))))

    @property
    def active(self) -> bool:
        return self._prof is not None

    @property
    def finished(self) -> bool:
        return self._done and self._prof is None

    # -- CUPTI teardown (CUDA windows only) -----------------------------------------------------------------
    def _arm_teardown(self) -> None:
        """Ask Kineto to detach CUPTI when this window's profiler stops, unless the user decided otherwise.
        Set before the profiler starts: the schedule stops Kineto inside prof.step() at the end of the window."""
        if TEARDOWN_ENV in os.environ:
            # the user's choice (or torch.compile's, for CUDA graphs): respected, reported at the end; or an
            # earlier window of this run set it, and it stays set for every later window until the run ends
            self._ours = _TEARDOWN_SET_BY_US[0] and os.environ[TEARDOWN_ENV] == "1"
            return
        os.environ[TEARDOWN_ENV] = "1"
        self._set_teardown = self._ours = _TEARDOWN_SET_BY_US[0] = True

    def _note_teardown(self) -> None:
        """After the stop: say whether CUPTI was detached, and what it costs if not."""
        if not self._cuda:
            return
        value = os.environ.get(TEARDOWN_ENV)
        if value == "1":
            self.cupti_note = ("CUPTI detached at the window's end (TEARDOWN_CUPTI=1): later steps run without it"
                               if self._ours else
                               "CUPTI detached at the window's end (TEARDOWN_CUPTI=1, set by the user)")
            return
        who = ("torch.profiler turned CUPTI teardown off (the script uses CUDA graphs, which crash when CUPTI "
               "re-initialises)" if self._ours else f"the environment sets {TEARDOWN_ENV}="
               f"{value!r}")
        self.cupti_note = (f"CUPTI stays attached after the window ({who}): every later kernel launch pays its "
                           "callback (measured up to +40% per step on launch-bound GPU steps, ~0 on compute-bound "
                           "ones); --trace-steps 0 avoids it")

    def _restore_env(self) -> None:
        """The user's environment back as it was (once the run is over: see the module docstring)."""
        if not self._set_teardown:
            return
        self._set_teardown = _TEARDOWN_SET_BY_US[0] = False
        if os.environ.get(TEARDOWN_ENV) == "1":   # anything else was set after us (torch.compile): theirs now
            del os.environ[TEARDOWN_ENV]

    def _export(self, prof) -> None:
        # Called by torch.profiler when the recorded steps are over (or at stop()); raw JSON now, gzip at close.
        prof.add_metadata(STEPS_KEY, str(self.traced_steps()))
        raw = self.out_dir / self.raw_name
        try:
            prof.export_chrome_trace(str(raw))
        finally:
            # Kineto writes `trace.json.tmp` and renames it: a full disk leaves the half file behind
            self._remove_partial(raw)

    @staticmethod
    def _remove_partial(raw: Path) -> None:
        try:
            raw.with_name(raw.name + ".tmp").unlink(missing_ok=True)
        except OSError:
            pass

    def _watch_gc(self) -> None:
        """The flight recorder's windows: each garbage collection of the window is an annotation in its trace
        ("gc.collect (generation N)"): the Python tracer does not show the collector's own time. Removed when the
        window ends; a callback that fails stays silent (it runs inside the collector)."""
        import gc

        from torch.autograd.profiler import record_function
        open_ = []

        def on_gc(phase, info):
            try:
                if phase == "start":
                    rf = record_function(f"gc.collect (generation {info.get('generation')})")
                    rf.__enter__()
                    open_.append(rf)
                elif open_:
                    open_.pop().__exit__(None, None, None)
            except Exception:
                pass

        gc.callbacks.append(on_gc)

        def unwatch():
            if on_gc in gc.callbacks:
                gc.callbacks.remove(on_gc)
        self._unwatch_gc = unwatch

    def _finish(self) -> None:
        prof, self._prof, self._done = self._prof, None, True
        if getattr(self, "_unwatch_gc", None) is not None:
            self._unwatch_gc()
            self._unwatch_gc = None
        try:
            if prof is not None:
                # Inside the window this stops Kineto and exports what was recorded (a partial window); after
                # the last recorded step (already exported) it only closes the step annotation. A partial window
                # also holds the step the run ended in, unfinished: the metadata says how many are whole.
                prof.add_metadata(STEPS_KEY, str(self.traced_steps()))
                with _stderr_to(self.out_dir / LOG_NAME):
                    prof.__exit__(None, None, None)
        finally:
            end = self._clock()
            self._append((TRACE_END, end, end))
            self._note_teardown()

    def _fail(self, e: BaseException) -> None:
        self.reason = f"profiler failed: {type(e).__name__}: {e}"[:500]
        try:
            self._finish()
        except Exception as e2:  # stopping a broken profiler may fail too; the first error is the reason
            self.reason += f" (stop also failed: {type(e2).__name__})"
        self._record(False, self.reason)

    # -- end of run ---------------------------------------------------------------------------------------
    def traced_steps(self) -> int:
        """Optimizer steps recorded (the Kineto warm-up step is not)."""
        if self._start_step is None:
            return 0
        return max(0, min(self.active_steps, self._steps_seen - self._start_step - 1))

    def close(self) -> None:
        """Stop a window the run ended inside, compress the trace, record how it went. Never raises."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self.active_steps <= 0:
            return
        try:
            self._close()
        finally:
            self._restore_env()

    def _close(self) -> None:
        try:
            if self._prof is not None:
                self._finish()
            self._remove_partial(self.out_dir / self.raw_name)
            if self.reason is not None:
                return
            if self._start_step is None:
                if not self._done:
                    self._record(False, f"the run ended after {self._steps_seen} optimizer step(s), before "
                                              f"the tracing window (it starts after {self.warmup_steps})")
                return
            raw = self.out_dir / self.raw_name
            if not raw.is_file():
                why = ("the run ended during the profiler's warm-up step" if self.traced_steps() == 0
                       else f"torch.profiler wrote no {self.raw_name} (its messages are in {LOG_NAME})")
                self._record(False, f"no trace: {why}")
                return
            n = self.traced_steps()
            if n == 0:
                raw.unlink()
                self._record(False, "the run ended before a full step was traced (no trace kept)")
                return
            size = self._compress(raw)
            partial = "" if n >= self.active_steps else f" (partial: the run ended after {n} of {self.active_steps})"
            self._record(True, f"{n} step(s) traced after {self._start_step} step(s) + 1 profiler warm-up "
                                     f"step{partial}: {self.trace_name}, {size / 2**20:.1f} MiB")
        except Exception as e:
            self._record(False, f"trace could not be saved: {type(e).__name__}: {e}"[:500])

    def _compress(self, raw: Path) -> int:
        out = self.out_dir / self.trace_name
        tmp = out.with_name("." + out.name + ".tmp")
        try:
            with open(raw, "rb") as fin, gzip.open(tmp, "wb", compresslevel=GZIP_LEVEL) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            os.replace(tmp, out)
        finally:   # a full disk: the raw trace stays, readable as it is; no half-written .tmp beside it
            tmp.unlink(missing_ok=True)
        raw.unlink()
        return out.stat().st_size
