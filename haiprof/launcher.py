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
import traceback
from dataclasses import dataclass
from types import TracebackType


class LaunchError(Exception):
    """The target cannot be started at all (missing file, syntax error, unknown module): one line for the user."""


class Terminated(BaseException):
    """Raised in the main thread by our SIGTERM handler, so the stack unwinds and the report gets written."""


@dataclass
class Outcome:
    exit_code: int
    how: str                      # "exit" | "exception" | "sigint" | "sigterm" | "step-limit"
    reraise_signal: int | None = None
    error: str | None = None      # one line, for the report: "ValueError: bad shape"


def _check_target(script: str | None, module: str | None) -> None:
    if module is not None:
        import importlib.util
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            raise LaunchError(f"cannot find module {module!r}: {e}") from None
        if spec is None:
            raise LaunchError(f"No module named {module!r}")
        return
    if not os.path.exists(script):
        raise LaunchError(f"can't open file {script!r}: No such file or directory")
    if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
        raise LaunchError(f"can't find '__main__' module in {script!r}")
    if os.path.isfile(script):
        try:
            with open(script, "rb") as f:
                compile(f.read(), script, "exec")
        except SyntaxError as e:
            raise LaunchError(f"{script}:{e.lineno}: SyntaxError: {e.msg}") from None
        except (OSError, ValueError) as e:
            raise LaunchError(f"can't read {script!r}: {e}") from None


def _user_traceback(tb: TracebackType | None, user_file: str | None) -> TracebackType | None:
    """Drop the leading frames that belong to haiprof and runpy, so the traceback starts in user code."""
    first = tb
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if user_file is not None and os.path.abspath(fname) == user_file:
            return tb
        if not (fname.startswith(_HAIPROF_DIR) or fname == runpy.__file__ or "<frozen runpy>" in fname):
            return tb
        tb = tb.tb_next
    return first


_HAIPROF_DIR = os.path.dirname(os.path.abspath(__file__))


def run(script: str | None, args: list[str], module: str | None = None,
        step_limit_exc: type | None = None) -> Outcome:
    """Run the target; returns how it ended. Raises LaunchError before running anything if it cannot start."""
    _check_target(script, module)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    main_pid = os.getpid()

    def on_sigterm(signum, frame):
        if os.getpid() != main_pid:     # a forked child (DataLoader worker): behave like python would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated()

    previous_term = signal.signal(signal.SIGTERM, on_sigterm)
    user_file = None
    try:
        if module is not None:
            sys.argv = [module, *args]   # runpy replaces argv[0] with the module's path, as python -m does
            sys.path[0] = os.getcwd()
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            user_file = os.path.abspath(script)
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(user_file)
            runpy.run_path(script, run_name="__main__")
        return Outcome(0, "exit")
    except SystemExit as e:
        if step_limit_exc is not None and isinstance(e, step_limit_exc):
            return Outcome(0, "step-limit")
        return Outcome(_exit_code(e.code), "exit")
    except KeyboardInterrupt as e:
        e.__traceback__ = _user_traceback(e.__traceback__, user_file)
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
        return Outcome(130, "sigint", reraise_signal=signal.SIGINT, error="KeyboardInterrupt")
    except Terminated:
        return Outcome(128 + signal.SIGTERM, "sigterm", reraise_signal=signal.SIGTERM, error="SIGTERM")
    except BaseException as e:  # the user's exception: print it as python would, from the user's frames
        tb = _user_traceback(e.__traceback__, user_file)
        e.__traceback__ = tb  # the C excepthook reads the exception's own traceback
        try:
            sys.excepthook(type(e), e, tb)
        except Exception:
            traceback.print_exception(type(e), e, tb)
        return Outcome(1, "exception", error=f"{type(e).__name__}: {e}"[:500])
    finally:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous_term)
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code & 0xFF
    print(code, file=sys.stderr)  # python prints a non-integer exit argument and exits 1
    return 1
