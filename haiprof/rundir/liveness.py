"""Whether the process that writes a run directory is still that run's: its pid alive, and the same process.

A pid is reused once its process is gone, so a live pid alone can be a stranger's; the process's start time
(/proc/PID/stat field 22, clock ticks since boot) names it exactly. meta.json records it beside the pid
(`pid_start`); a run recorded without it (an older haiprof, a system without /proc) is judged by the pid alone.
"""
from __future__ import annotations

import os


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None where it cannot be read (gone, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # after the command name, which may hold spaces and parentheses: field 3 (state) onwards
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def stamp(meta: dict) -> dict:
    """`meta` with this process's start time beside its pid, when the pid is this process's."""
    if meta.get("pid") == os.getpid() and "pid_start" not in meta:
        ticks = start_ticks(os.getpid())
        if ticks is not None:
            meta["pid_start"] = ticks
    return meta


def gone(meta: dict) -> str | None:
    """Why the run's process (meta's pid on this host) is not running any more; None while it runs."""
    pid = meta["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"its process {pid} is gone (killed?)"
    except PermissionError:   # alive, another user's: the start time still tells whose
        pass
    recorded, now = meta.get("pid_start"), start_ticks(pid)
    if isinstance(recorded, int) and now is not None and now != recorded:
        return f"its process {pid} is gone (killed?); that pid is now another process's"
    return None
