"""`haiprof run`: wire the collectors around the user's script, then analyse and render.

Order matters for overhead and safety: the side sampler starts first (it runs in its own process), the hooks are
installed just before the script runs and removed right after, and every failure of ours is reported on one line
without touching the script's exit code.
"""
from __future__ import annotations

import os
import platform
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..analysis.report import finish
from ..errors import UserError, keep_stderr, say, stderr_retaken
from ..rundir import PHASES_BIN, RunDir
from ..version import __version__
from . import launcher
from .conditions import CpuWait, setup_conditions
from .teardown import SigtermDeferred, Unwritten, exit_forked_child, finishing_report

SAMPLE_INTERVAL_S = 0.5


@dataclass
class RunOptions:
    script: str | None
    module: str | None
    args: list
    out: str | None = None
    steps: int | None = None
    quiet: bool = False
    sample_interval_s: float = SAMPLE_INTERVAL_S
    haiprof_argv: list = field(default_factory=list)
    trace_steps: int = 3          # op-level tracing window (torch.profiler); 0 disables it
    trace_at: tuple = ()          # more windows: at these steps (--trace-at) ...
    trace_every_min: float | None = None   # ... and every so many minutes (--trace-every)
    fix: str | None = None        # --fix spec ("prefetch,amp" or "auto"), see fixrun.py
    interleave: int = 0           # --interleave N: N baseline/fixed pass pairs before a --fix run (fixrun.py)
    # a snapshot report of the run so far every so many minutes (--snapshot-every; 0: none); a distributed job's
    # ranks get it through the environment
    snapshot_every_min: float = field(default_factory=lambda: _env_minutes(SNAPSHOT_ENV, SNAPSHOT_EVERY_MIN))


SNAPSHOT_ENV, SNAPSHOT_EVERY_MIN = "HAIPROF_SNAPSHOT_EVERY_MIN", 5.0


def _env_minutes(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


DEFAULT_PARENT = "haiprof-runs"


def claim_out_dir(out: str | None, target_name: str) -> RunDir:
    """The run's own new directory, absolute (see RunDir.claim / claim_new); OutDirError if it cannot be."""
    return RunDir.claim(out) if out else RunDir.claim_new(DEFAULT_PARENT, target_name)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> list[str]:
    # The driver's procfs lists GPUs without creating a CUDA context in the training process.
    out = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    out.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return out


def collect_meta(opts: RunOptions, target_name: str, run_dir: RunDir) -> dict:
    import torch
    meta = {
        "run_dir": str(run_dir.path),   # where this run (a rank: on its own node) wrote its data
        "haiprof_version": __version__, "haiprof_argv": opts.haiprof_argv,
        "target_argv": ([sys.executable, "-m", opts.module] if opts.module else [sys.executable, opts.script])
        + list(opts.args),
        "command": " ".join(["haiprof", "run", *opts.haiprof_argv]) if opts.haiprof_argv else None,
        "target_name": target_name, "script": opts.script, "module": opts.module, "argv": list(opts.args),
        "cwd": os.getcwd(), "host": socket.gethostname(), "pid": os.getpid(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "gpus": _gpus(), "start_time": time.time(), "start_monotonic_ns": time.monotonic_ns(),
        "end_time": None, "exit_code": None,
    }
    meta["conditions"] = setup_conditions(meta)   # what a --fix comparison checks (runtime/conditions.py)
    return meta


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


def run(opts: RunOptions) -> int:
    """Run the target under the collectors; return the exit code python would have returned."""
    t_setup = time.perf_counter()
    target = opts.module or opts.script
    target_name = Path(target.rstrip("/")).stem if opts.script else opts.module.split(".")[-1]
    try:
        launcher._check_target(opts.script, opts.module)   # bad target: fail before creating anything
    except launcher.ScriptSyntaxError as e:   # the user's own error: python's caret display, exit 1
        sys.stderr.write(e.text)
        return 1
    keep_stderr()   # before the script can replace or close sys.stderr: our messages go to fd 2 as it is now
    run_dir = claim_out_dir(opts.out, target_name)   # a bad --out fails here, before the script starts
    out_dir = run_dir.path
    t_torch = time.perf_counter()
    import torch  # noqa: F401  (the script imports it anyway; timed apart from our own set-up)
    t_torch = time.perf_counter() - t_torch
    meta = collect_meta(opts, target_name, run_dir)
    if os.environ.get("RANK", "").isdigit():   # a rank's baseline is the same rank's earlier run
        meta.setdefault("rank", int(os.environ["RANK"]))
    # --- fixes (haiprof run --fix): choose them (may run a diagnosis pass) before our run dir exists ---
    from . import fixrun
    try:
        fix_plan = fixrun.plan(opts, out_dir, target_name, fixrun.target_key(meta),
                                  meta.get("conditions")) if opts.fix else None
    except fixrun.ScriptFailedInDiagnosis as e:   # the script's own failure, shown above: its exit code, as python
        _remove_if_empty(run_dir)
        if e.label == "diagnosis":
            _say(f"haiprof: --fix auto: the script failed during the diagnosis pass (exit {e.code}; its output is "
                 f"above and in {e.run}): nothing to diagnose, nothing applied")
        else:   # a baseline or an interleaved pass: the real run would fail alike
            _say(f"haiprof: --fix: the script failed during a {e.label} pass (exit {e.code}; its output is above "
                 f"and in {e.run}): the run is not started")
        return e.code
    except BaseException:
        _remove_if_empty(run_dir)
        raise
    if fix_plan is not None:
        # the run starts now: a baseline or interleaved passes run above are not its wall time
        meta.update(start_time=time.time(), start_monotonic_ns=time.monotonic_ns())
        meta.update(fixes_requested=fixrun.format_requested(fix_plan), fix_source=fix_plan.source,
                    baseline_run=fix_plan.baseline_run, diagnosis_run=fix_plan.diagnosis_run)
    # --- end fixes ---
    try:
        run_dir.write_meta(meta)
    except OSError as e:   # a full (or read-only) disk at start: one line, nothing left behind, no script run
        _remove_new_run_dir(run_dir)
        raise UserError(f"cannot write the run directory {run_dir.path}: {e.strerror or e}") from None
    setup_s = time.perf_counter() - t_setup - t_torch

    # Live status line on stderr, only on a terminal (runtime/progress.py). Here, not in profile_target: the
    # ranks of a distributed job share one terminal and must not each draw a line.
    from .progress import LiveStatus
    live = LiveStatus.start_if_tty(run_dir.file(PHASES_BIN), quiet=opts.quiet)

    def on_exit(run_dir: RunDir, outcome) -> None:
        t_teardown = time.perf_counter()
        if live is not None:
            live.stop()
        if getattr(run_dir, "unwritten", None):   # the disk is full: said once, with the command for later
            return
        finish(run_dir, quiet=opts.quiet)
        # haiprof's own cost, for the overhead benchmark: set-up (torch import excluded) and teardown.
        try:
            run_dir.update_meta(overhead_s={"setup": round(setup_s, 4), "torch_import": round(t_torch, 4),
                                            "teardown": round(time.perf_counter() - t_teardown, 4)})
        except OSError:
            pass   # a full disk: said once already (profile_target); the exit code stays the script's

    return profile_target(run_dir, opts, on_exit, fix_plan)


def _remove_new_run_dir(run_dir: RunDir) -> None:
    """Take back the directory claim_out_dir just made (new or empty, so nothing of the user's is in it)."""
    import shutil
    shutil.rmtree(run_dir.path, ignore_errors=True)


def _remove_if_empty(run_dir: RunDir) -> None:
    try:
        (run_dir.path / "samples").rmdir()
        run_dir.path.rmdir()
    except OSError:
        pass


def _install(run_dir: RunDir, name: str, collector) -> bool:
    try:
        collector.install()
        return True
    except Exception as e:  # hooks unavailable in this torch: still run the script, say why
        run_dir.record_status(name, False, f"hooks could not be installed: {type(e).__name__}: {e}")
        return False


def profile_target(run_dir: RunDir, opts: RunOptions, on_exit: Callable, fix_plan=None) -> int:
    """Run opts' target under every in-process collector and the side sampler, then `on_exit(run_dir, outcome)`.

    Shared by `haiprof run` and each rank of a distributed job (runtime/worker.py). Whatever happens to the
    script, the collectors are removed, the data flushed and the outcome recorded in meta.json before on_exit.
    """
    from haiprof.collectors.ddp_comm import DDPCommObserver
    from haiprof.collectors.phases import PhaseRecorder, StepLimitReached
    from haiprof.collectors.sharded_comm import ShardedCommObserver
    from haiprof.collectors.trace_requests import TraceRequests
    from haiprof.collectors.trace_window import TraceWindow

    from . import fixrun

    # no snapshots for --fix auto's short diagnosis pass
    snapshot_s = 0.0 if os.environ.get(fixrun.DIAGNOSIS_ENV) == "1" else opts.snapshot_every_min * 60
    sidecar = start_sidecar(run_dir, opts.sample_interval_s, snapshot_s)
    appender = run_dir.phase_appender().start()
    recorder = PhaseRecorder(appender.append, max_steps=opts.steps)
    recorder.drain_from(appender.before_flush)   # CUDA events resolved on the flush thread
    ddp = DDPCommObserver(appender.append)     # DDP gradient sync, read-only (no comm hook)
    sharded = ShardedCommObserver(appender.append)   # FSDP's all-gathers and reduce-scatters, issue to completion
    fix_session = fixrun.FixSession(run_dir, fix_plan)   # fixes and loss capture, installed before the recorder
    fix_session.start()
    if fix_session.losses is not None:   # CPU losses to floats on disk as the run goes (a SIGKILL keeps them)
        appender.before_flush.append(fix_session.losses.drain)
    hooks_ok = _install(run_dir, "phases", recorder)
    _install(run_dir, "ddp", ddp)
    _install(run_dir, "sharded", sharded)   # after the recorder: its wrappers go around the recorder's
    # Op-level tracing window: a few steps after warm-up. Windows asked for later: --trace-at, --trace-every,
    # `haiprof trace RUN_DIR` (its request file is looked for on the flush thread, never on the training thread).
    # TraceRequests drives them all from the optimizer-step hook, one at a time (two profilers crash torch).
    window = TraceWindow(run_dir.path, appender.append, run_dir.record_status, active_steps=opts.trace_steps)
    requests = TraceRequests(run_dir.path, appender.append, run_dir.record_status, window, at_steps=opts.trace_at,
                             every_s=opts.trace_every_min * 60 if opts.trace_every_min else None,
                             steps=opts.trace_steps or 3)
    recorder.step_callbacks.append(requests.on_step)
    appender.before_flush.append(requests.poll)
    outcome = None
    owner_pid = os.getpid()
    term = SigtermDeferred()
    if opts.steps:
        def stop_here(swallowed: bool = False) -> None:
            """The data is written and the process ends, without unwinding the script: at --fix auto's
            diagnosis pass's last step (its finally blocks and atexit handlers, a final checkpoint or a log line,
            never run for a pass the user did not ask for), or when the script swallowed the --steps stop."""
            if os.getpid() != owner_pid:
                return
            if swallowed:
                _say(f"haiprof: --steps {opts.steps}: the script caught the stop (a bare except:?) and went on; "
                     f"the run is written and the process ends here (exit 0, the script's finally blocks not run)")
            outcome_ = launcher.Outcome(0, "step-limit")
            sharded.uninstall()
            ddp.uninstall()
            recorder.uninstall()
            window.close()
            requests.close()
            fix_session.finish()
            appender.close()
            stop_sidecar(sidecar)
            run_dir.update_meta(end_time=time.time(), end_monotonic_ns=time.monotonic_ns(), exit_code=0,
                                how="step-limit", error=None, steps_limit=opts.steps, cleanup_skipped=True,
                                cpu_wait_share=wait.share())
            on_exit(run_dir, outcome_)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, OSError, ValueError):
                    pass
            os._exit(0)
        if os.environ.get(fixrun.DIAGNOSIS_ENV) == "1":
            recorder.on_limit = stop_here
        recorder.on_swallowed = lambda: stop_here(swallowed=True)
    wait = CpuWait()   # how long the training thread waits for a CPU while the script runs (a condition)
    try:
        outcome = launcher.run(opts.script, opts.args, opts.module, step_limit_exc=StepLimitReached,
                               sigterm_after=term if term.original == signal.SIG_DFL else None)
    finally:
        if os.getpid() != owner_pid:   # a child the script forked ended here: it must not finalize our run
            exit_forked_child(outcome)
        with finishing_report(run_dir) as finishing:
            with term:   # until the data is on disk a SIGTERM is only noted (see SigtermDeferred)
                sharded.uninstall()
                ddp.uninstall()
                recorder.uninstall()
                window.close()      # before appender.close(): it writes the window's end mark
                requests.close()
                unwritten = Unwritten(run_dir)   # a full disk: the script's exit stays its own (see there)
                unwritten.attempt("losses.json", fix_session.finish)
                unwritten.attempt("phases.bin", appender.close)
                unwritten.note("phases.bin", appender.failed)
                note_reopened(run_dir, appender, sidecar)
                if hooks_ok:
                    roots = recorder.narrowed_to
                    run_dir.record_status("phases", True, "" if roots is None else
                                          f"forward timed on {roots} root module(s) after step 2")
                stop_sidecar(sidecar)
                if outcome is None:  # we are being torn down by something we did not catch
                    outcome = launcher.Outcome(1, "exception", error="haiprof interrupted")
                unwritten.attempt("meta.json", lambda: run_dir.update_meta(
                    end_time=time.time(), end_monotonic_ns=time.monotonic_ns(), exit_code=outcome.exit_code,
                    how=outcome.how, error=outcome.error, steps_limit=opts.steps,
                    script_uses=dict(recorder.script_uses), cpu_wait_share=wait.share()))
                unwritten.say()
            if term.signum is not None and outcome.reraise_signal is None:
                outcome.reraise_signal = term.signum   # end of it after on_exit, with the status it would give
            finishing.guard_sigterm(term.signum)   # a SIGTERM while the report is written: noted, report finished
            on_exit(run_dir, outcome)
        if finishing.signum is not None and outcome.reraise_signal is None:
            outcome.reraise_signal = finishing.signum
    if outcome.reraise_signal is not None:
        # Die of the same signal, as python would, so the parent sees the same status.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):   # closed or set to None by the script
                pass
        signal.signal(outcome.reraise_signal, signal.SIG_DFL)
        os.kill(os.getpid(), outcome.reraise_signal)
    return outcome.exit_code


def _say(line: str) -> None:
    say(line)   # the process's own stderr (errors.keep_stderr), never the script's replacement


_SigtermDeferred = SigtermDeferred   # its name before it moved to teardown.py, still importable from here
