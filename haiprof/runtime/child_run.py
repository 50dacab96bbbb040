"""`haiprof run SCRIPT`: start the script's own python, `python SCRIPT ARGS` (or `-m MODULE`), with haiprof's
recorder loaded at its start-up (runtime/boot/sitecustomize.py, runtime/child_boot.py); wait for it; write the
report from its exit status, whichever way it ended (a segfault and a SIGKILL included); end as it ended.

The script's python is python's own: argv, sys.path, `__main__`, its tracebacks and stack, /proc/self/cmdline.
It shares this process's stdin, stdout, stderr and process group. Signals:
- the terminal's (Ctrl-C, Ctrl-\\, sent by the kernel to the whole foreground group) reach it directly: not sent
  again;
- one sent to this process by another (kill PID, a scheduler's SIGTERM) is passed on to it;
- one ignored when haiprof started stays ignored in both (python's children inherit SIG_IGN);
- if this process is killed outright, the kernel kills the script's python too (PR_SET_PDEATHSIG): the
  training never outlives `haiprof run`, as it would not outlive a killed `python`.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..errors import LINE_OPEN, say
from ..rundir import RunDir
from . import child_boot, launcher
from .session import die_of
from .teardown import finishing_report

BOOT_DIR = Path(__file__).resolve().parent / "boot"
# What a launcher passes on: those that end a process by default, and the two a script may handle itself
FORWARDED = tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                              signal.SIGUSR2, signal.SIGALRM))
SI_KERNEL = 0x80   # siginfo si_code of a signal the kernel sent (the terminal's keys), not a process
_PR_SET_PDEATHSIG = 1


def script_argv(opts) -> list:
    target = ["-m", opts.module] if opts.module else [opts.script]
    return [sys.executable, *interpreter_options(sys.orig_argv), *target, *opts.args]


_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def interpreter_options(orig_argv: list) -> list:
    """The options given to the interpreter that runs haiprof (`python -X dev -m haiprof run ...`): the script's
    python gets them too. Not those the environment gave (the environment is passed on as it is), and not -i
    (an interactive prompt after the script is for the script's own `python -i`)."""
    out, i = [], 1
    while i < len(orig_argv):
        tok = orig_argv[i]
        if tok in ("-m", "-c", "-", "--") or not tok.startswith("-"):
            break
        if tok in _WITH_VALUE:
            out += orig_argv[i:i + 2]
            i += 2
            continue
        if not tok.startswith(("-W", "-X", "--")):
            tok = "-" + tok[1:].replace("i", "")
            if tok == "-":
                i += 1
                continue
        out.append(tok)
        i += 1
    return out


def _child_env(boot: Path, end_fd: int) -> dict:
    env = dict(os.environ)
    env[child_boot.END_FD_ENV] = str(end_fd)
    before = env.get("PYTHONPATH")
    if before is not None:
        env[child_boot.PYTHONPATH_ENV] = before
    env["PYTHONPATH"] = str(BOOT_DIR) + (os.pathsep + before if before else "")
    env[child_boot.BOOT_ENV] = str(boot)
    return env


def _in_child(mask):
    """Between fork and exec: the signals as they were, and the kernel's SIGKILL once this process is gone."""
    def setup():
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    return setup


def block_signals() -> tuple:
    """Hold the forwarded signals (and SIGCHLD) for sigtimedwait, before any thread of ours starts (a thread that
    did not block them would take one under its default action). Returns (held, previous mask)."""
    held = {s for s in FORWARDED if signal.getsignal(s) != signal.SIG_IGN}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held | {signal.SIGCHLD})
    return held, previous


def run(run_dir: RunDir, opts, fix_plan, on_exit: Callable) -> int:
    """Run the script's python to its end and the report after it; the exit code python would give (or this
    process ends by the signal that ended the script)."""
    signals, previous = block_signals()
    boot = run_dir.file(child_boot.BOOT_FILE)
    with open(boot, "wb") as f:
        pickle.dump({"run_dir": str(run_dir.path), "opts": replace(opts, job_store=None), "fix_plan": fix_plan}, f)
    end_r, end_w = os.pipe()   # how the script's python ended, told without the disk (a full one included)
    try:
        proc = subprocess.Popen(script_argv(opts), env=_child_env(boot, end_w), preexec_fn=_in_child(previous),
                                close_fds=True, pass_fds=(end_w,))
    except OSError as e:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        boot.unlink(missing_ok=True)
        os.close(end_r)
        os.close(end_w)
        say(f"haiprof: could not start {sys.executable}: {e.strerror or e}")
        return 1
    os.close(end_w)
    got = _wait(proc, signals, run_dir)
    status = proc.returncode
    late = None
    for signum in _drain(signals):   # sent after the script ended, before the report: as during it
        if signum == signal.SIGINT:
            got.presses += 1
        elif signum in (signal.SIGTERM, signal.SIGHUP):
            late = late or signum
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    boot.unlink(missing_ok=True)
    outcome = _outcome(run_dir, status, _end_record(end_r))
    with finishing_report(run_dir, presses=got.presses) as finishing:
        finishing.guard_sigterm()
        if late is not None:   # this process ends by it once the report is written
            finishing.on_term(late)
        elif got.term is not None:   # the job's end (torchrun, slurm, kubernetes) passed on to the script: the
            finishing.say_rebuild()  # rebuild command is said in case a SIGKILL follows; the status is the script's
        on_exit(run_dir, outcome)
    if finishing.signum is not None and outcome.reraise_signal is None:
        outcome.reraise_signal = finishing.signum
    if outcome.reraise_signal is not None:
        _no_core()
        die_of(outcome.reraise_signal)
    return outcome.exit_code


class _Received:
    """What reached this process while the script's python ran: a SIGTERM or SIGHUP passed on to it (the job's
    end: the report then names its rebuild command), and Ctrl-C presses once its end had begun (its data being
    written: not passed on, they count as presses during the report, as python has nothing left to interrupt)."""

    def __init__(self):
        self.term, self.presses = None, 0


def _wait(proc: subprocess.Popen, signals: set, run_dir: RunDir) -> _Received:
    """Until the script's python ends, pass on the signals another process sent here."""
    waited = signals | {signal.SIGCHLD}
    got = _Received()
    while proc.poll() is None:
        info = signal.sigtimedwait(waited, 0.5)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        signum = info.si_signo
        if signum == signal.SIGINT and _ending(run_dir):
            got.presses += 1
            continue
        if info.si_code == SI_KERNEL or info.si_pid == proc.pid:
            continue   # the terminal's, which the script's python got too; or its own, to its parent
        if signum in (signal.SIGTERM, signal.SIGHUP):
            got.term = got.term or signum
        try:
            os.kill(proc.pid, signum)
        except ProcessLookupError:
            pass
    return got


def _ending(run_dir: RunDir) -> bool:
    """The script is over and its python writes its data (child_boot's atexit handler has begun)."""
    try:
        return run_dir.read_meta().get("end_time") is not None
    except (OSError, ValueError):
        return False


def _drain(signals: set) -> list:
    out = []
    while True:
        info = signal.sigtimedwait(signals | {signal.SIGCHLD}, 0)
        if info is None:
            return out
        if info.si_signo != signal.SIGCHLD and info.si_code != SI_KERNEL:
            out.append(info.si_signo)


def _end_record(fd: int) -> dict:
    """What the script's python wrote on the end pipe at its end (child_boot._Child.tell); {} if nothing (it died
    first, or the script closed the pipe). Never waits: a process the script left running may hold the pipe."""
    import json
    try:
        os.set_blocking(fd, False)
        data = os.read(fd, 1 << 16)
        record = json.loads(data.decode()) if data else {}
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)


def _outcome(run_dir: RunDir, status: int, told: dict) -> launcher.Outcome:
    """How the script ended: its exit status, with what its python recorded (child_boot): on the end pipe, else
    in meta.json."""
    try:
        meta = run_dir.read_meta()
    except (OSError, ValueError):
        meta = {}
    meta.update(told)
    started = child_boot.STARTED_KEY in meta or bool(told)
    LINE_OPEN[0] = bool(told.get("stderr_open"))   # the script left its stderr mid-line: our line starts its own
    if status < 0:
        sig = signal.Signals(-status)
        outcome = launcher.Outcome(128 + sig.value, sig.name.lower(), reraise_signal=sig.value,
                                   error=meta.get("error") or sig.name)
    else:
        outcome = launcher.Outcome(status, meta.get("how") or "exit", error=meta.get("error"))
    fields = dict(exit_code=outcome.exit_code, how=outcome.how, error=outcome.error)
    if meta.get("unwritten"):   # a full disk: the script's python said what it could not write, and how to
        run_dir.unwritten = meta["unwritten"]   # rebuild the report later; none is attempted now
    if meta.get("end_time") is None and not told:   # its python ended before its end was written (a crash, os._exit)
        fields.update(end_time=time.time(), end_monotonic_ns=time.monotonic_ns())
        if started:
            why = (f"the script's python ended by {outcome.how.upper()}" if status < 0
                   else f"the script's python ended (exit {status}) without python's own exit (os._exit?)")
            run_dir.record_status("phases", True, why + ": the steps after haiprof's last flush are missing")
    if not started:
        run_dir.record_status("phases", False, "the script's python did not load haiprof's recorder (started with "
                                               "-S, -I or -E?): nothing was recorded")
        say("haiprof: the script ran without haiprof's recorder (its python did not load haiprof's start-up hook)")
    try:
        run_dir.update_meta(**fields)
    except OSError:
        pass
    return outcome


def _no_core() -> None:
    """This process only reports the signal that ended the script: no core file of ours for a SIGSEGV or SIGABRT."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
