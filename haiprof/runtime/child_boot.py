"""haiprof inside the script's own python: what `haiprof run` starts (runtime/child_run.py) loads this at
start-up (runtime/boot/sitecustomize.py), then python runs the script itself.

So the script is python's own `__main__`, at the bottom of the stack: a traceback, faulthandler's dump,
traceback.print_stack and the recursion limit see what they see under python, and /proc/self/cmdline is
`python SCRIPT ARGS`. `start` readies the run before the script's first line and puts the collectors in place
(session.Session) when the script's own `import torch` has loaded torch (runtime/torch_import.py says why); the
run's end is an atexit handler, which python calls after the script's own ones and after its threads are
joined, before the process ends. The exit status is the launching process's to read: it writes the report.

What the run's end must keep here as under launcher.run (the in-process launcher of a rank):
- SIGTERM and SIGHUP unwind the script (a SystemExit of ours, so no traceback and no `except Exception` stops
  it), the data is written, then the process ends by the signal;
- an uncaught exception is printed without haiprof's own frames (its wrappers of DataLoader or backward);
- the standard modules a file beside the script shadows are the user's while the script runs (shadowing.py);
- a child the script forks ends as python would end it (its status, its atexit handlers, its output), with
  nothing of ours finished there and no library's C++ destructors (_exit_before_static_destructors).
"""
from __future__ import annotations

import atexit
import os
import pickle
import signal
import sys
import time

from ..errors import keep_stderr, say

BOOT_ENV = "HAIPROF_BOOT"                       # the boot file (run directory, options, fix plan)
PYTHONPATH_ENV = "HAIPROF_BOOT_PYTHONPATH"      # PYTHONPATH as the user had it; absent when it was unset
BOOT_FILE = "boot.pickle"                       # in the run directory, removed once read
STARTED_KEY = "script_pid"                      # meta.json: the recorder started in this process
END_FD_ENV = "HAIPROF_BOOT_END_FD"              # the pipe to the launching process: how the run ended

_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """Raised in the main thread by our SIGTERM/SIGHUP handler: the stack unwinds as python's exit does (no
    traceback printed, no `except Exception` catches it), our atexit handler writes the data, and the process then
    ends by the signal."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


class _Child:
    def __init__(self, ready, run_dir, opts):
        self.ready = ready         # the session, its sampler running from start-up, its collectors not yet
        self.session, self.run_dir, self.opts = None, run_dir, opts   # the session once its collectors started
        self.folder = None         # the script's folder, first on its sys.path (its modules shadow the standard ones)
        self.pid = os.getpid()
        self.signum = None         # the terminating signal our handler turned into Terminated
        self.error = None          # the uncaught exception, one line (our excepthook saw it)
        self.shadowed = {}
        self.live = None           # the live status line (runtime/progress.py), on a terminal
        self.end_fd = (-1, None)   # the pipe to the launching process, and what it was (errors.fd_identity)
        self.script_over = False   # the main module has ended: python is joining the script's threads
        self.late = None           # a SIGTERM/SIGHUP while the data is written: noted, then the end by it
        self.tail = None           # the script's stderr, watched for a line it leaves open (stderr_tail.py)
        self.exec_seen = False     # the script called os.exec* (exec_watch.py)

    # -- the recorder, once the script has loaded torch ---------------------------------------------------------
    def begin(self) -> None:
        """Start the session: called at the end of the script's `import torch` (or at start-up, where torch was
        loaded before the script). haiprof's own imports here see python's standard modules, not the script's
        folder; the ones it loaded that the folder shadows leave the cache again for the script (shadowing.py)."""
        if self.session is not None or os.getpid() != self.pid:   # once; never in a child the script forked
            return
        from . import session, shadowing
        with shadowing.folder_hidden(self.folder, self.shadowed):
            if session.start_collectors(self.ready):
                self.session = self.ready

    # -- signals --------------------------------------------------------------------------------------
    def on_signal(self, signum, frame):
        if os.getpid() != self.pid:     # a forked child (DataLoader worker): behave as python would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.late is not None:
            self.late = self.late or signum
            return
        if self.signum is None:
            self.signum = signum
            if self.script_over:   # raised in python's thread join it would be printed as "Exception ignored"
                self.at_exit()     # the main thread is in python's shutdown, not in our hooks: end here
            raise Terminated(signum)

    def main_done(self) -> None:
        """Called by python (threading's exit hooks) once the main module is over, before it joins the threads."""
        self.script_over = True

    def excepthook(self, exc_type, exc, tb, _next=None):
        """The uncaught exception, printed by the hook that was in place, without haiprof's own frames."""
        from . import launcher
        self.error = f"{exc_type.__name__}: {exc}"[:500]
        try:
            if tb is not None:
                tb = launcher._without_our_frames(tb)
                exc.__traceback__ = tb
            launcher._strip_chain(exc, launcher._without_our_frames)   # python's own frames (runpy's) stay
        except Exception:
            pass
        (_next or sys.__excepthook__)(exc_type, exc, tb)

    # -- the end ---------------------------------------------------------------------------------------
    def at_exit(self) -> None:
        if os.getpid() != self.pid:   # a child the script forked: nothing of ours to finish there
            return
        if self.live is not None:
            self.live.stop()
        from . import shadowing
        shadowing.restore(self.shadowed)
        self.late = 0
        for signum in _TERMINATING:   # from here a SIGTERM is noted, the data written, then the end by it
            try:
                if signal.getsignal(signum) != signal.SIG_IGN:
                    signal.signal(signum, self.on_signal)
            except (ValueError, OSError):
                pass
        sigint = None
        try:   # a Ctrl-C now would break the data's writing: the launching process counts it (child_run)
            if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
                sigint = signal.signal(signal.SIGINT, lambda signum, frame: None)
        except (ValueError, OSError):
            pass
        limit = getattr(getattr(self.session, "recorder", None), "limit_hit_ns", None) is not None
        last = getattr(sys, "last_value", None)
        if self.signum is not None:
            how = signal.Signals(self.signum).name.lower()
        elif isinstance(last, KeyboardInterrupt):
            how = "sigint"
        elif self.error is not None or last is not None:
            how = "exception"
        else:
            how = "step-limit" if limit else "exit"
        error = self.error or (f"{type(last).__name__}: {last}"[:500] if last is not None else None)
        if self.signum is not None:
            error = signal.Signals(self.signum).name
        try:
            self.write_end(how, error)   # also where the collectors never started
            self.measure_peak()
        except Exception as e:   # ours: said, the script's exit status stays its own
            say(f"haiprof: could not finish recording in {self.run_dir.path}: {type(e).__name__}: {e}")
        if sigint is not None:
            signal.signal(signal.SIGINT, sigint)
        signum = self.signum or self.late
        if signum:
            from .session import die_of
            die_of(signum)

    def before_exec(self) -> int:
        """The script replaces its process (exec_watch.py): the data is written now, as at its end; returns the
        steps recorded. Nothing after the exec runs here: the sampler stops, the new program runs unprofiled."""
        if self.live is not None:
            self.live.stop()
        recorder = getattr(self.session, "recorder", None)
        self.write_end("exec", None)
        return getattr(recorder, "steps", 0)

    def write_end(self, how: str, error: str | None) -> None:
        """The data written and how the run ended told to the launching process: at the script's end or its exec."""
        self.ready.end(None, how=how, error=error)
        self.tell(how=how, error=error, end_time=time.time(), unwritten=list(self.ready.unwritten.failed) or None,
                  stderr_open=True if self.tail is not None and self.tail.line_open() else None)

    def tell(self, **record) -> None:
        """How the run ended, on the pipe to the launching process: it reads this even when the disk is full (a
        meta.json that could not be written). Written only through the descriptor as it was opened: a script
        that closed descriptors may hold the number for a file of its own."""
        from ..errors import fd_identity
        fd, ident = self.end_fd
        if fd < 0 or fd_identity(fd) != ident:
            return
        import json
        try:
            os.write(fd, json.dumps({k: v for k, v in record.items() if v is not None}).encode())
            os.close(fd)
        except (OSError, ValueError):
            pass
        self.end_fd = (-1, None)

    def measure_peak(self) -> None:
        """A CPU run with a traced window: its fp32 matmul peak (the MFU's denominator) measured here, where torch
        is loaded with the run's threads, so the launching process's report need not import torch for it (a
        bf16 run's peak is still measured there)."""
        torch = sys.modules.get("torch")
        if torch is None or torch.cuda.is_initialized() or getattr(self.run_dir, "unwritten", None):
            return
        if not any(self.run_dir.path.glob("trace*.json*")):
            return
        from haiprof.analysis.efficiency import cpu_peak
        cpu_peak(self.run_dir.path, self.run_dir.read_meta(), "fp32")


_child: _Child | None = None


def start(boot_path: str) -> None:
    """Start the recorder for the run the boot file names; never raises (the script runs regardless)."""
    global _child
    keep_stderr()   # before the script can replace or close sys.stderr: our lines go to fd 2 as it is now
    end_fd = _end_pipe()   # first: neither its number nor its variable is left to the script, whatever follows
    try:
        with open(boot_path, "rb") as f:
            boot = pickle.load(f)
        os.unlink(boot_path)
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError) as e:
        say(f"haiprof: the recorder could not start ({boot_path}: {e}); the script runs unprofiled")
        return
    from ..rundir import RunDir
    run_dir, opts = RunDir(boot["run_dir"]), boot["opts"]
    from . import conditions, session  # noqa: F401  what begin() needs, before the script's folder counts
    try:
        session.preload()
        run_dir.update_meta(**{STARTED_KEY: os.getpid()})
        ready = session.Session(run_dir, opts, boot.get("fix_plan"))
        ready.start_sampler()   # the machine from the script's first line, whether or not it ever loads torch
    except Exception as e:
        session.unprofiled(run_dir, e)
        return
    child = _child = _Child(ready, run_dir, opts)
    child.end_fd = end_fd
    try:
        from .stderr_tail import StderrTail
        tail = StderrTail()
        child.tail = tail if tail.install() else None
    except Exception:
        child.tail = None
    for signum in _TERMINATING:
        if signal.getsignal(signum) != signal.SIG_IGN:   # one the parent set to be ignored (nohup) stays so
            signal.signal(signum, child.on_signal)
    hook = sys.excepthook
    sys.excepthook = lambda t, e, tb: child.excepthook(t, e, tb, hook)
    try:   # the live status line on a terminal, drawn from this process: it sees the script's tqdm bar and gives
        from ..rundir import PHASES_BIN   # its row back before a traceback (its excepthook wraps ours)
        from .progress import LiveStatus
        child.live = LiveStatus.start_if_tty(run_dir.file(PHASES_BIN), quiet=opts.quiet,
                                             on_stop=lambda ok, why: run_dir.record_status("status-line", ok, why))
    except Exception:
        child.live = None
    atexit.register(child.at_exit)
    from . import exec_watch
    exec_watch.install(child)
    os.register_at_fork(after_in_child=_exit_before_static_destructors)
    try:
        import threading
        threading._register_atexit(child.main_done)
    except (AttributeError, RuntimeError):
        pass
    import ctypes, json, zipfile  # noqa: F401,E401  what our hooks import later: before the script's folder counts
    from . import launcher, shadowing, torch_import  # noqa: F401
    if "torch" in sys.modules:   # loaded before the script (a site's sitecustomize): the recorder starts now
        child.begin()
    else:
        torch_import.AfterTorchImport.install(child.begin)
    child.folder = _script_folder(opts)
    child.shadowed.update(shadowing.evict_shadowed(child.folder))   # an import of ours after it would cache the
    # standard one again: begin() hides the folder while it imports


def _end_pipe() -> tuple:
    """The launching process's pipe, moved high and close-on-exec (the script's own subprocesses do not get it)."""
    from ..errors import fd_identity, fd_kept_high
    try:
        fd = fd_kept_high(int(os.environ.pop(END_FD_ENV)))
        os.set_inheritable(fd, False)
        return fd, fd_identity(fd)
    except (KeyError, ValueError, OSError):
        return -1, None


def _exit_before_static_destructors() -> None:
    """In a child the script forks: once python has finished (its atexit handlers run, its output flushed), end
    with python's exit status before the C++ static destructors the parent's libraries registered. libkineto's
    wait for its profiler thread, which a fork does not copy, hangs the child there once haiprof has traced a
    window. libc's on_exit hands the status to `_exit`, which takes it as its one argument; handlers registered
    before this one (the libraries') are skipped, later ones still run. Where libc has no on_exit, nothing."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.on_exit(ctypes.cast(libc._exit, ctypes.c_void_p), None)
    except (OSError, AttributeError, ValueError, TypeError):
        pass


def _script_folder(opts) -> str:
    """The folder python puts first on the script's sys.path after this hook: the standard modules haiprof
    imported that a file there shadows leave the cache while the script runs (shadowing.py)."""
    from . import launcher
    if opts.module:
        folder = os.getcwd()
    elif os.path.isfile(opts.script) and not launcher._is_zipapp(opts.script):
        folder = os.path.dirname(os.path.realpath(opts.script))
    else:
        folder = os.path.abspath(opts.script)
    return os.path.realpath(folder)

