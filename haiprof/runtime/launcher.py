"""Run a user's script or module in this process exactly as `python` would.

Same sys.argv, sys.path[0] and __main__; the script's stdout/stderr are untouched; the exit code is the one python
would give; an uncaught exception prints the user's own traceback (haiprof's frames cut off). The outcome is
returned, never raised, so the session can write its report before the process ends.
"""
from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from types import TracebackType

from . import call_path, shadowing
from .target_check import ScriptSyntaxError, _check_target, _compile, _is_zipapp, _module_path0


class Terminated(BaseException):
    """Raised in the main thread by our SIGTERM/SIGHUP handler, so the stack unwinds and the report gets
    written."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


# Signals that end python by default and after which we still write the report (SIGHUP: the ssh session
# dropped). One the parent set to be ignored (nohup) stays ignored.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


@dataclass
class Outcome:
    exit_code: int
    how: str                      # "exit" | "exception" | "sigint" | "sigterm" | "sighup" | "step-limit"
    reraise_signal: int | None = None
    error: str | None = None      # one line, for the report: "ValueError: bad shape"


def _run_file(script: str) -> None:
    """Run a file in a fresh `__main__` module set up as python's own: absolute __file__, the builtins module,
    a SourceFileLoader; it stays sys.modules['__main__'] afterwards (threads and atexit handlers may use it)."""
    import builtins
    import types
    from importlib.machinery import SourceFileLoader

    path = os.path.abspath(script)
    code = _compile(script)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __loader__=SourceFileLoader("__main__", path),
                         __spec__=None, __cached__=None, __package__=None, __annotations__={})
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _run_archive(path: str) -> None:
    """Run a directory or zip archive (zipapp) as python does: its absolute path as sys.path[0], argv[0] as
    given, then its `__main__` module through runpy's `_run_module_as_main` (the entry point python itself
    calls for this case), in a fresh `__main__` module."""
    import builtins
    import types
    _set_path0(os.path.abspath(path))
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    runpy._run_module_as_main("__main__", alter_argv=False)


def _join_user_threads() -> None:
    """What the interpreter does once the main body is over: tell executors to stop, then wait for every
    non-daemon thread (steps trained there must be recorded before we tear down)."""
    def pending():
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t is not me and not t.daemon and t.is_alive()]

    if not pending():
        return
    for callback in reversed(list(getattr(threading, "_threading_atexits", []))):
        try:
            callback()
        except Exception:
            pass
    while True:
        threads = pending()
        if not threads:
            return
        for t in threads:
            t.join()


def _user_traceback(tb: TracebackType | None, user_file: str | None) -> TracebackType | None:
    """Drop the leading frames that belong to haiprof and runpy, so the traceback starts in user code, and every
    later frame of haiprof's own wrappers (a DataLoader or backward call passes through collectors and fixes):
    python's traceback is the reference."""
    first = tb
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if user_file is not None and os.path.abspath(fname) == user_file:
            break
        if not (fname.startswith(_HAIPROF_DIR) or fname == runpy.__file__ or "<frozen runpy>" in fname):
            break
        tb = tb.tb_next
    if tb is None:
        return first
    return _without_our_frames(tb)


def _our_dirs() -> tuple:
    """The folders of haiprof's code: the package, and collectors/analyzers/fixes (installed under it, or beside
    it in a source checkout)."""
    dirs = {_HAIPROF_DIR}
    for name in ("haiprof.collectors", "haiprof.analyzers", "haiprof.fixes"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.add(os.path.dirname(os.path.abspath(mod.__file__)))
    return tuple(d + os.sep for d in dirs)


def _without_our_frames(tb: TracebackType) -> TracebackType:
    ours, first = _our_dirs(), tb
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(ours):
            kept.append(tb)
        tb = tb.tb_next
    if not kept:   # raised in our code alone (a bug of ours): show it whole rather than nothing
        return first
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    kept[-1].tb_next = None
    return call_path.as_python(kept[0], _our_hook)   # torch's hooked call path, where only our hooks made it


def _our_hook(fn) -> bool:
    """Whether a module hook is haiprof's (its code is in our folders)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code is not None and code.co_filename.startswith(_our_dirs())


def _strip_chain(e: BaseException, strip=None) -> None:
    """The exceptions python prints before this one (raised during handling, or `from`): our frames out too
    (`strip(tb)`; by default the leading launcher frames as well)."""
    strip = strip or (lambda tb: _user_traceback(tb, None))
    seen = {id(e)}
    nxt = e.__cause__ or e.__context__
    while nxt is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        if nxt.__traceback__ is not None:
            nxt.__traceback__ = strip(nxt.__traceback__)
        nxt = nxt.__cause__ or nxt.__context__


_HAIPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the haiprof package, not runtime/


def run(script: str | None, args: list[str], module: str | None = None,
        step_limit_exc: type | None = None, sigterm_after=None) -> Outcome:
    """Run the target; returns how it ended. Raises LaunchError before running anything if it cannot start.

    `sigterm_after`: a handler put in place for SIGTERM when the script is over, instead of the one found at the
    start (which the caller then restores itself). Restoring a default handler here would leave a moment, before
    the caller has flushed its data, in which a SIGTERM ends the process outright."""
    _check_target(script, module)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    main_pid = os.getpid()

    # Once the handlers are being put back, a signal is only noted (raising there would escape with the handlers
    # half restored); the process still ends by it, after the caller has written the run.
    late = {"restoring": False, "signum": None}

    def on_signal(signum, frame):
        if os.getpid() != main_pid:     # a forked child (DataLoader worker): behave like python would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if late["restoring"]:
            late["signum"] = late["signum"] or signum
            return
        raise Terminated(signum)

    previous = {}
    for signum in _TERMINATING:
        if signal.getsignal(signum) != signal.SIG_IGN:
            previous[signum] = signal.signal(signum, on_signal)
    try:
        outcome = _run_target(script, args, module, step_limit_exc)
    except KeyboardInterrupt as e:   # while the script's own end was handled (its traceback being printed):
        outcome = _interrupted(e, None)   # python would have died of it there
    except Terminated as e:
        outcome = _terminated(e)
    try:
        if outcome.reraise_signal is None:
            _join_user_threads()
    except KeyboardInterrupt as e:
        outcome = _interrupted(e, None)
    except Terminated as e:
        outcome = _terminated(e)
    finally:
        late["restoring"] = True
        for signum, handler in previous.items():
            if signal.getsignal(signum) is on_signal:
                signal.signal(signum, sigterm_after if signum == signal.SIGTERM and sigterm_after else handler)
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
        shadowing.restore(_shadowed)
        _shadowed.clear()
        _folder.clear()
    if late["signum"] is not None and outcome.reraise_signal is None:
        outcome.reraise_signal = late["signum"]
    return outcome


_shadowed: dict = {}   # the standard modules a module of the user's shadows, out of the cache while it runs
_folder: list = []     # the target's folder, first on sys.path while it runs


def _set_path0(folder: str) -> None:
    """sys.path[0] as python gives it to the target, and the user's modules there first, as under python."""
    sys.path[0] = folder
    _folder[:] = [folder]
    _shadowed.update(shadowing.evict_shadowed(folder))


def target_folder_hidden():
    """haiprof's own imports while the target runs (shadowing.folder_hidden)."""
    return shadowing.folder_hidden(_folder[0] if _folder else None, _shadowed)


def _run_target(script, args, module, step_limit_exc) -> Outcome:
    """Run the script as __main__; how it ended (its exceptions printed as python prints them)."""
    user_file = None
    try:
        if module is not None:
            sys.argv = [module, *args]   # runpy replaces argv[0] with the module's path, as python -m does
            _set_path0(_module_path0())
            import builtins
            try:   # run_module's own lookup, with python -m's error class: its one line, exit 1, no traceback
                _, spec, code = runpy._get_module_details(module, runpy._Error)
            except runpy._Error as e:
                sys.exit(f"{sys.executable}: {e}")   # as runpy._run_module_as_main, which python -m calls
            runpy._run_module_code(code, {"__builtins__": builtins}, "__main__", spec)
        else:
            user_file = os.path.abspath(script)
            sys.argv = [script, *args]
            # python: the directory of the real file (a symlinked script imports beside its target)
            _set_path0(os.path.dirname(os.path.realpath(script)))
            if os.path.isfile(script) and not _is_zipapp(script):
                _run_file(script)
            else:   # a directory or zip with __main__.py
                _run_archive(script)
        outcome = Outcome(0, "exit")
    except ScriptSyntaxError as e:   # a script that changed on disk since the check
        sys.stderr.write(e.text)
        outcome = Outcome(1, "exception", error=f"SyntaxError: {e}"[:500])
    except SystemExit as e:
        if step_limit_exc is not None and isinstance(e, step_limit_exc):
            outcome = Outcome(0, "step-limit")
        else:
            outcome = Outcome(_exit_code(e.code), "exit")
    except KeyboardInterrupt as e:
        outcome = _interrupted(e, user_file)
    except Terminated as e:
        outcome = _terminated(e)
    except BaseException as e:  # the user's exception: print it as python would, from the user's frames
        tb = _user_traceback(e.__traceback__, user_file)
        e.__traceback__ = tb  # the C excepthook reads the exception's own traceback
        _strip_chain(e)
        try:
            sys.excepthook(type(e), e, tb)
        except Exception:
            traceback.print_exception(type(e), e, tb)
        outcome = Outcome(1, "exception", error=f"{type(e).__name__}: {e}"[:500])
    return outcome


def _interrupted(e: KeyboardInterrupt, user_file: str | None) -> Outcome:
    e.__traceback__ = _user_traceback(e.__traceback__, user_file)
    traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    return Outcome(130, "sigint", reraise_signal=signal.SIGINT, error="KeyboardInterrupt")


def _terminated(e: Terminated) -> Outcome:
    name = signal.Signals(e.signum).name
    return Outcome(128 + e.signum, name.lower(), reraise_signal=e.signum, error=name)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code & 0xFF
    print(code, file=sys.stderr)  # python prints a non-integer exit argument and exits 1
    return 1
