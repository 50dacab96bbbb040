"""The script replacing its own process (os.execv and the rest of the os.exec* family, which all end in os.execv
or os.execve), as elastic restarts and some launch wrappers do.

Nothing of this python runs after a successful exec: no atexit, no flush. The run's data was lost (a run of four
steps reported "no training steps"). So the data is written first, as at the script's end, and the run directory
says the process was replaced there; the new program runs unprofiled. An exec that fails leaves the script
running on, unprofiled from there, and the run directory says that instead.
"""
from __future__ import annotations

import functools
import os


def install(child) -> None:
    """Wrap os.execv and os.execve for the script's python of `child` (child_boot._Child)."""
    for name in ("execv", "execve"):
        original = getattr(os, name, None)
        if original is not None and not hasattr(original, "__haiprof_wrapped__"):
            setattr(os, name, _wrapped(child, original))


def _wrapped(child, original):
    @functools.wraps(original)
    def exec_(path, args, *rest):
        ours = os.getpid() == child.pid and not child.exec_seen
        if ours:
            child.exec_seen = True
            try:
                steps = child.before_exec()
                _status(child, f"the script replaced its process (os.{original.__name__} {_shown(path)}) after "
                               f"{steps} step(s): the data ends there; what the new program did was not profiled")
            except Exception:   # never in the way of the script's own exec
                steps = None
        try:
            return original(path, args, *rest)
        except BaseException as e:
            if ours:
                _status(child, f"the script's os.{original.__name__}({_shown(path)}, ...) failed ({type(e).__name__}: "
                               f"{e}) after {steps} step(s): haiprof's data ends there; the script went on unprofiled")
            raise
    exec_.__haiprof_wrapped__ = original
    return exec_


def _shown(path) -> str:
    try:
        return repr(os.fsdecode(path))[:200]
    except (TypeError, ValueError):
        return "?"


def _status(child, reason: str) -> None:
    try:
        child.run_dir.record_status("exec", True, reason)
    except Exception:
        pass
