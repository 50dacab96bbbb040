"""The probes a report runs on the machine that ran the script (the CPU matmul peak, a worker's hand-off of a batch,
the storage's parallel read rate): each measured once and kept in the run directory, so every later `haiprof
report` quotes the same figure; measured only on that machine (same host and CPU model: elsewhere the figure would
describe another machine), and never while the script is still training (a report of a live run would run its
matmuls, its worker or its reads beside the training it watches, slowing it and measuring a machine it shares)."""
from __future__ import annotations

import json
import socket
from typing import Callable

from haiprof.rundir import RunDir


def kept(path, usable: Callable[[dict], bool]) -> dict | None:
    """The probe kept at `path` when it is a JSON object `usable` accepts, else None (absent, damaged, another
    kind)."""
    try:
        probe = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return probe if isinstance(probe, dict) and usable(probe) else None


def keep(path, probe: dict) -> None:
    try:
        path.write_text(json.dumps(probe))
    except OSError:   # a read-only run directory: the next report measures again
        pass


def same_machine(meta: dict) -> bool:
    from haiprof.collectors.matmul_peak import cpu_model
    return meta.get("host") == socket.gethostname() and meta.get("cpu_model") == cpu_model()


def why_not_here(run_path, meta: dict) -> str | None:
    """Why this report may not measure a probe for the run (None: it may)."""
    if not same_machine(meta):
        return "the run was recorded on another machine"
    if meta.get("exit_code") is None and meta.get("end_time") is None and RunDir(run_path).in_progress(meta)[0]:
        return "the run is still in progress (the final report measures it)"
    return None
