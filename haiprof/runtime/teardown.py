"""The end of a run, which must hold whatever happens to the script: session.py's profile_target (a rank) and
child_run.py (`haiprof run`, the report after the script's python) use these.

`Unwritten`: writes at the end that failed (a full disk) are noted and said once; the exit code stays the script's.
`SigtermDeferred`, `finishing_report`: a SIGTERM, Ctrl-C or hang-up while the data and then the report are written
is noted and the writing finished first; then the process ends as the signal would have ended it.
`exit_forked_child`: a child the script forked ends as python would end it, without finalizing our run.
Kept apart from session.py, which wires the collectors around the script: this is signal and failure handling.
Messages go through errors.say, the process's own stderr, never the script's replacement.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Callable

from ..errors import say
from ..rundir import RunDir
from .warning_state import registries_kept


class Unwritten:
    """Writes at the run's end that failed (a full disk, a removed directory): the training and its exit code are
    the script's, so each failure is noted, the next write still tried, and one warning line says what was not
    written; what had reached the disk stays readable by `haiprof report`."""

    def __init__(self, run_dir: RunDir):
        self.run_dir, self.failed = run_dir, {}

    def note(self, what: str, error: OSError | None) -> None:
        if error is not None:
            self.failed.setdefault(what, error)

    def attempt(self, what: str, write: Callable) -> None:
        try:
            write()
        except OSError as e:
            self.note(what, e)

    def say(self) -> None:
        self.run_dir.unwritten = list(self.failed)   # on_exit then leaves the report for later
        if self.failed:
            why = next(iter(self.failed.values()))
            say(f"haiprof: warning: could not write {', '.join(self.failed)} in {self.run_dir.path} "
                f"({why.strerror or why}): recording stopped there; what reached the disk is kept "
                f"(haiprof report {self.run_dir.path} rebuilds the report once there is space)")


class SigtermDeferred:
    """The SIGTERM handler from the script's end until the run's data is on disk (profile_target).

    torch's elastic agent SIGTERMs the surviving ranks of a job as soon as one rank fails, while a survivor is still
    unwinding from the broken collective. During the script launcher.run turns SIGTERM into an orderly end; once it
    is over, the default action would kill the process before appender.close() writes the records queued since the
    last periodic flush, which in a short job can be every step it made. So launcher.run leaves this handler in
    place instead: the signal is noted, the data written, and the process ends of it after on_exit.
    """

    def __init__(self):
        self.original = signal.getsignal(signal.SIGTERM)
        self.signum = None

    def __call__(self, signum, frame):
        self.signum = signum

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if signal.getsignal(signal.SIGTERM) is self:   # put in place by launcher.run: from here, as before
            signal.signal(signal.SIGTERM, self.original)
        return False


def exit_forked_child(outcome) -> None:
    """End a child the script forked as python would end it (its atexit handlers, flushed output, its exit
    status), without our teardown and without C++ static destructors (libkineto's hang after a fork)."""
    import atexit
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if outcome is not None and outcome.reraise_signal is not None:
        signal.signal(outcome.reraise_signal, signal.SIG_DFL)
        os.kill(os.getpid(), outcome.reraise_signal)
    os._exit(1 if outcome is None else outcome.exit_code)


class Finishing:
    """What finishing_report hands its block: `guard_sigterm()` once the data is on disk (before that SigtermDeferred
    holds SIGTERM); `signum`, a SIGTERM noted while the report was written, which the process then dies of."""

    def __init__(self, run_dir: RunDir):
        self.run_dir, self.signum, self._previous = run_dir, None, None

    def guard_sigterm(self, deferred: SigtermDeferred | None = None) -> None:
        """From here a SIGTERM is noted and the report finished. `deferred`: the handler that held SIGTERM while
        the data was written, taken over directly (called inside its block): restoring the default in between
        left a moment in which a SIGTERM killed the process with no report; one it noted is said now, as if it
        came during the report."""
        try:
            current = signal.getsignal(signal.SIGTERM)
            if deferred is not None and current is deferred:
                current = deferred.original    # what was there before it, given back by release()
            if current == signal.SIG_DFL:      # a handler of the script's own stays
                signal.signal(signal.SIGTERM, self.on_term)
                self._previous = current
        except ValueError:   # not the main thread
            pass
        if deferred is not None and deferred.signum is not None:   # read after the swap: none is lost between
            self.on_term(deferred.signum, None)

    def on_term(self, signum, frame=None) -> None:
        if self.signum is None:
            self.say_rebuild()
        self.signum = signum

    def say_rebuild(self) -> None:
        say(f"haiprof: terminated while writing the report: finishing it first (if this process is killed "
            f"before it ends, rebuild it with: haiprof report {self.run_dir.path})")

    def release(self) -> None:
        if self._previous is not None and signal.getsignal(signal.SIGTERM) == self.on_term:
            signal.signal(signal.SIGTERM, self._previous)
        self._previous = None


@contextlib.contextmanager
def finishing_report(run_dir: RunDir, presses: int = 0):
    """While the report is written: a first Ctrl-C is noted and the report still finished; a second one stops,
    naming the command that rebuilds it (an ignored SIGINT stays ignored). A hang-up (the terminal is gone) no
    longer ends the process here, and a SIGTERM (once guard_sigterm() is called) is noted, the report finished,
    then the process ends by it. `presses`: Ctrl-C presses already made while the script's data was written."""
    state = Finishing(run_dir)

    def on_sigint(signum, frame):
        nonlocal presses
        presses += 1
        if presses > 1:
            raise KeyboardInterrupt
        say(f"haiprof: finishing the report in {run_dir.path} (Ctrl-C again to skip it)")

    previous = {}
    try:
        # SIGINT ignored (a shell's background job, nohup-like launchers, or the script's own SIG_IGN): python
        # would ignore a Ctrl-C here too, so it stays ignored and the run ends with the script's exit code.
        if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
        if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    except ValueError:   # not the main thread: signals cannot be handled here
        pass
    try:
        if presses:
            presses -= 1
            on_sigint(signal.SIGINT, None)
        with registries_kept():   # the script's atexit handlers come after: its warnings shown once stay so
            yield state
    except KeyboardInterrupt:
        say(f"haiprof: report not written; rebuild it with: haiprof report {run_dir.path}")
        raise
    finally:
        state.release()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
