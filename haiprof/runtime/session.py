"""Wire the collectors around the user's script: `Session`, started in the script's own python by `haiprof run`
(runtime/child_boot.py) and around launcher.run by each rank of a distributed job (`profile_target`, worker.py).

Order matters for overhead and safety: the side sampler starts first (it runs in its own process), the hooks are
installed just before the script runs and removed right after, and every failure of ours is reported on one line
without touching the script's exit code.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Callable

from ..errors import say, stderr_retaken
from ..rundir import PHASES_BIN, RunDir
from . import launcher
from .conditions import CpuWait
from .run_setup import RunOptions
from .teardown import SigtermDeferred, Unwritten, exit_forked_child, finishing_report


def start_sidecar(run_dir: RunDir, interval_s: float, snapshot_s: float = 0.0):
    from .sidecar import Sidecar
    try:
        return Sidecar.start(run_dir, os.getpid(), interval_s, snapshot_s)
    except OSError as e:
        run_dir.record_status("system", False, f"sampler process could not start: {e}")
        return None


def stop_sidecar(sidecar) -> None:
    if sidecar is not None:
        sidecar.stop()


def note_reopened(run_dir: RunDir, appender, sidecar) -> None:
    """Say in the run's status when the script closed descriptors haiprof held (a daemon's os.closerange):
    haiprof never wrote through them again, it reopened its files (rundir.appenders.OwnedFd)."""
    lost = []
    if appender.reopened:
        lost.append(f"{PHASES_BIN} reopened ({appender.reopened}x)")
    if sidecar is not None and not sidecar.check():
        lost.append("the sampler's pipe left to the script (the sampler is stopped by a signal)")
    if stderr_retaken():
        lost.append("haiprof's copy of stderr taken again from fd 2")
    if lost:
        run_dir.record_status("files", True, "the script closed file descriptors haiprof held (os.closerange?); "
                              "haiprof reopened its files and never wrote to the script's: " + "; ".join(lost))


def _install(run_dir: RunDir, name: str, collector) -> bool:
    try:
        collector.install()
        return True
    except Exception as e:  # hooks unavailable in this torch: still run the script, say why
        run_dir.record_status(name, False, f"hooks could not be installed: {type(e).__name__}: {e}")
        return False


def preload() -> None:
    """The modules Session.start imports, none of which loads torch: imported before the script's folder is on
    sys.path (child_boot starts the session later, at the script's own `import torch`), so a json.py or random.py
    beside the script is never haiprof's."""
    from haiprof.collectors import (anomaly, ddp_comm, job_share, phases, sharded_comm,  # noqa: F401
                                    trace_requests, trace_window)

    from . import fixrun, sidecar  # noqa: F401


class Session:
    """The collectors around one run of the script, in the process that runs it: `start()` before the script,
    `end(outcome)` after it, whichever way it ended. `haiprof run` starts it in the script's own python (the
    child it launches: runtime/child_boot.py), a rank of a distributed job around launcher.run (profile_target).

    `on_exit(run_dir, outcome)`: called by `stop_here` (the --steps stop the script swallowed, or --fix auto's
    diagnosis pass) before the process ends there; None where another process writes the report (the child)."""

    def __init__(self, run_dir: RunDir, opts: RunOptions, fix_plan=None, on_exit: Callable | None = None):
        self.run_dir, self.opts, self.fix_plan, self.on_exit = run_dir, opts, fix_plan, on_exit
        self.owner_pid = os.getpid()
        self.teardown = None
        self.recorder = None
        self.wait = None
        self.ended = False
        self.sidecar = None   # started ahead by start_sampler (from the script's first line)
        self.unwritten = Unwritten(run_dir)   # a full disk: the script's exit stays its own (see there)

    def start_sampler(self) -> None:
        """The side sampler alone, before the collectors (while start() waits for the script's `import torch`:
        runtime/torch_import.py); start() takes it over, end() stops it where start() never ran."""
        from . import fixrun
        snapshot_s = 0.0 if os.environ.get(fixrun.DIAGNOSIS_ENV) == "1" else self.opts.snapshot_every_min * 60
        self.sidecar = start_sidecar(self.run_dir, self.opts.sample_interval_s, snapshot_s)

    def stop_sampler(self) -> None:
        sidecar, self.sidecar = self.sidecar, None
        stop_sidecar(sidecar)

    def start(self, sampler: bool = True) -> None:
        """`sampler=False`: the in-process parts only (benchmarks/component_cost.py measures them apart)."""
        from haiprof.collectors.ddp_comm import DDPCommObserver
        from haiprof.collectors.phases import PhaseRecorder
        from haiprof.collectors.sharded_comm import ShardedCommObserver
        from haiprof.collectors.anomaly import AnomalyDetector
        from haiprof.collectors.job_share import JobShare
        from haiprof.collectors.trace_requests import TraceRequests
        from haiprof.collectors.trace_window import TraceWindow

        from . import fixrun

        run_dir, opts = self.run_dir, self.opts
        unwritten = self.unwritten
        hooks_ok = False
        # The run's end is one sequence, whichever way the run ends (the script's end, or stop_here below): each
        # thing started pushes its undo here, so the undos run in the reverse order of these pushes, and a failure
        # while starting undoes what had been started.
        with contextlib.ExitStack() as starting:
            if sampler and self.sidecar is None:
                self.start_sampler()
            sidecar, self.sidecar = self.sidecar, None   # ours to stop from here, with the rest
            starting.callback(stop_sidecar, sidecar)
            appender = run_dir.phase_appender().start()
            self.recorder = recorder = PhaseRecorder(appender.append, max_steps=opts.steps)
            recorder.drain_from(appender.before_flush)   # CUDA events resolved on the flush thread

            def data_written() -> None:
                unwritten.note("phases.bin", appender.failed)
                note_reopened(run_dir, appender, sidecar)
                if hooks_ok:
                    roots, kept = recorder.narrowed_to, recorder.kept_global
                    run_dir.record_status("phases", True, f"forward timed on {roots} root module(s) after step 2"
                                          if roots is not None else f"forward timed by global module hooks ({kept})"
                                          if kept else "")
            starting.callback(data_written)
            starting.callback(unwritten.attempt, "phases.bin", appender.close)
            ddp = DDPCommObserver(appender.append)     # DDP gradient sync, read-only (no comm hook)
            sharded = ShardedCommObserver(appender.append)   # FSDP's all-gathers and reduce-scatters
            fix_session = fixrun.FixSession(run_dir, self.fix_plan)   # fixes and loss capture, before the recorder
            fix_session.start()
            starting.callback(unwritten.attempt, "losses.json", fix_session.finish)
            if fix_session.losses is not None:   # CPU losses to floats on disk as the run goes (a SIGKILL keeps them)
                appender.before_flush.append(fix_session.losses.drain)
            # Op-level tracing window: a few steps after warm-up. Windows asked for later: --trace-at,
            # --trace-every, `haiprof trace RUN_DIR` (its request file is looked for on the flush thread, never on
            # the training thread). TraceRequests drives them all from the optimizer-step hook, one at a time (two
            # profilers crash torch).
            window = TraceWindow(run_dir.path, appender.append, run_dir.record_status, active_steps=opts.trace_steps)
            requests = TraceRequests(run_dir.path, appender.append, run_dir.record_status, window,
                                     at_steps=opts.trace_at,
                                     every_s=opts.trace_every_min * 60 if opts.trace_every_min else None,
                                     steps=opts.trace_steps or 3,
                                     anomaly=AnomalyDetector(opts.anomaly_factor) if opts.trace_on_anomaly else None,
                                     anomaly_windows=opts.anomaly_windows, anomaly_mb=opts.anomaly_mb,
                                     share=JobShare(opts.job_store, run_dir.record_status)
                                     if opts.job_store and opts.trace_on_anomaly else None)
            starting.callback(requests.close)
            starting.callback(window.close)      # before appender.close(): it writes the window's end mark
            for collector in (recorder, ddp, sharded):   # removed in the reverse order: sharded, ddp, recorder
                starting.callback(collector.uninstall)
            hooks_ok = _install(run_dir, "phases", recorder)
            _install(run_dir, "ddp", ddp)
            _install(run_dir, "sharded", sharded)   # after the recorder: its wrappers go around the recorder's
            recorder.step_callbacks.append(requests.on_step)
            appender.before_flush.append(requests.poll)
            self.teardown = starting.pop_all()
        if opts.steps:
            if os.environ.get(fixrun.DIAGNOSIS_ENV) == "1":
                recorder.on_limit = self.stop_here
            recorder.on_swallowed = lambda: self.stop_here(swallowed=True)
        self.wait = CpuWait()   # how long the training thread waits for a CPU while the script runs (a condition)

    def end(self, outcome_, **how) -> None:
        """Undo what was started, then write how the run ended; a write that fails is said once (Unwritten)."""
        if self.ended:
            return
        self.ended = True
        if self.teardown is not None:
            self.teardown.close()
        self.stop_sampler()   # started ahead and never taken over: the script never loaded torch
        if self.recorder is None and "torch" not in sys.modules:
            self.unwritten.attempt("status.jsonl", lambda: self.run_dir.record_status(
                "phases", False, "the script never imported torch: no training step to record"))
        # what the script already does, however the run ends: the advice leaves those fixes out (--fix auto's
        # diagnosis pass ends through stop_here too)
        fields = dict(end_time=time.time(), end_monotonic_ns=time.monotonic_ns(), steps_limit=self.opts.steps, **how,
                      cpu_wait_share=self.wait.share() if self.wait is not None else None,
                      script_uses=dict(self.recorder.script_uses) if self.recorder is not None else {},
                      **_torch_math())
        if outcome_ is not None:   # None: the process that waits for this one writes them (runtime/child_run.py)
            fields.update(exit_code=outcome_.exit_code, how=outcome_.how, error=outcome_.error)
        if self.unwritten.failed:   # said here (Unwritten.say): the launching process then leaves the report
            fields["unwritten"] = list(self.unwritten.failed)
        self.unwritten.attempt("meta.json", lambda: self.run_dir.update_meta(**fields))
        self.unwritten.say()

    def stop_here(self, swallowed: bool = False) -> None:
        """The data is written and the process ends, without unwinding the script: at --fix auto's diagnosis
        pass's last step (its finally blocks and atexit handlers, a final checkpoint or a log line, never run for a
        pass the user did not ask for), or when the script swallowed the --steps stop."""
        if os.getpid() != self.owner_pid:
            return
        if swallowed:
            _say(f"haiprof: --steps {self.opts.steps}: the script caught the stop (a bare except:?) and went on; "
                 f"the run is written and the process ends here (exit 0, the script's finally blocks not run)")
        outcome_ = launcher.Outcome(0, "step-limit")
        self.end(outcome_, cleanup_skipped=True)
        if self.on_exit is not None:
            self.on_exit(self.run_dir, outcome_)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(0)


def start_collectors(session: Session, before: tuple = ()) -> bool:
    """session.start() once torch is loaded (runtime/torch_import.py), torch's version and the set-up conditions
    (its threads, as the script set them) into meta.json first, then each of `before`; a failure is said and
    recorded, never raised into the script's import: the script runs on, unprofiled."""
    run_dir = session.run_dir
    try:
        import torch

        from .conditions import setup_conditions
        meta = run_dir.read_meta()
        extra = {"torch": torch.__version__}
        if not meta.get("conditions", {}).get("torch_threads"):
            extra["conditions"] = setup_conditions(meta)
        run_dir.update_meta(**extra)
        for call in before:
            call()
        session.start()
        return True
    except Exception as e:
        unprofiled(run_dir, e)
        return False


def unprofiled(run_dir: RunDir, e: Exception) -> None:
    """The recorder could not start: said, and recorded in the run's status; the script runs on without it."""
    _say(f"haiprof: the recorder could not start in {run_dir.path} ({type(e).__name__}: {e}); the script runs "
         f"unprofiled")
    try:
        run_dir.record_status("phases", False, f"the recorder could not start: {type(e).__name__}: {e}")
    except OSError:
        pass


def profile_target(run_dir: RunDir, opts: RunOptions, on_exit: Callable, fix_plan=None, at_torch: tuple = ()) -> int:
    """Run opts' target in this process under the side sampler and every in-process collector (in place from the
    script's own `import torch`: runtime/torch_import.py), then `on_exit(run_dir, outcome)`: each rank of a
    distributed job (runtime/worker.py).

    Whatever happens to the script, the collectors are removed, the data flushed and the outcome recorded in
    meta.json before on_exit.
    """
    from haiprof.collectors.phases import StepLimitReached

    from .torch_import import AfterTorchImport

    session = Session(run_dir, opts, fix_plan, on_exit)
    owner_pid = os.getpid()

    def begin() -> None:   # at the script's `import torch` (each of at_torch first), never in a child it forked
        if os.getpid() == owner_pid and session.recorder is None:
            with launcher.target_folder_hidden():
                start_collectors(session, at_torch)

    watch = None
    if "torch" in sys.modules:
        begin()
    else:
        session.start_sampler()
        watch = AfterTorchImport.install(begin)
    outcome = None
    term = SigtermDeferred()
    try:
        outcome = launcher.run(opts.script, opts.args, opts.module, step_limit_exc=StepLimitReached,
                               sigterm_after=term if term.original == signal.SIG_DFL else None)
    finally:
        if os.getpid() != owner_pid:   # a child the script forked ended here: it must not finalize our run
            exit_forked_child(outcome)
        if watch is not None:
            watch.remove()   # the script never imported torch: haiprof's report may (a rank's digest)
        with finishing_report(run_dir) as finishing:
            with term:   # until the data is on disk a SIGTERM is only noted (see SigtermDeferred)
                if outcome is None:  # we are being torn down by something we did not catch
                    outcome = launcher.Outcome(1, "exception", error="haiprof interrupted")
                session.end(outcome)
                # a SIGTERM while the report is written: noted, report finished; taken over from term with no
                # moment of the default action between
                finishing.guard_sigterm(term)
            if term.signum is not None and outcome.reraise_signal is None:
                outcome.reraise_signal = term.signum   # end of it after on_exit, with the status it would give
            on_exit(run_dir, outcome)
        if finishing.signum is not None and outcome.reraise_signal is None:
            outcome.reraise_signal = finishing.signum
    if outcome.reraise_signal is not None:
        die_of(outcome.reraise_signal)
    return outcome.exit_code


def die_of(signum: int) -> None:
    """End this process by the signal, as python would, so its parent sees the same status."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):   # closed or set to None by the script
            pass
    if signum not in (signal.SIGKILL, signal.SIGSTOP):   # those two have no handler to put back
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)


def _say(line: str) -> None:
    say(line)   # the process's own stderr (errors.keep_stderr), never the script's replacement


def _torch_math() -> dict:
    """The torch threads and fp32 matmul precision the script left set: the MFU's peak is measured (a CPU) or
    looked up (fp32 or TF32 on a GPU) for those (haiprof/analysis/efficiency.py)."""
    torch = sys.modules.get("torch")
    try:
        return {"torch_threads": torch.get_num_threads(),
                "float32_matmul_precision": torch.get_float32_matmul_precision()} if torch is not None else {}
    except Exception:   # a torch too old or half torn down: the figures are left out, the run is not
        return {}
