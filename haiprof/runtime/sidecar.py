"""The sampler side process: runs the system collectors off the training process (no GIL contention).

Started by the session as `python -m haiprof.runtime.sidecar RUN_DIR PID INTERVAL`. It samples every collector on a
jittered interval (so sampling does not alias with a periodic training step), appends each sample to
samples/<name>.jsonl with a flush, and exits when its stdin closes or the training process is gone.
A collector that raises is recorded in status.jsonl with the reason and dropped; the others go on.
"""
from __future__ import annotations

import json
import os
import random
import select
import signal
import sys
import time

from ..rundir import RunDir


def _collectors(root_pid: int):
    """(name, factory) for every collector the side process hosts; the availability check comes first."""
    from haiprof.collectors.system import SystemSampler
    out = [(SystemSampler.name, SystemSampler.available, lambda: SystemSampler(root_pid))]
    # -- hardware collectors (GPU, InfiniBand/NIC, NUMA, memory bandwidth, RAPL, disks): runtime/hwcollectors.py
    from .hwcollectors import hardware_collectors
    return out + hardware_collectors(root_pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return os.getppid() == pid


def main(argv: list[str]) -> int:
    run_dir, pid, interval = RunDir(argv[0]), int(argv[1]), float(argv[2])
    # Ctrl-C reaches the whole process group: the training process decides when we stop, via stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    active = []
    for name, available, factory in _collectors(pid):
        ok, reason = available()
        if ok:
            try:
                active.append((name, factory(), open(run_dir.samples_file(name), "a", encoding="utf-8")))
            except Exception as e:  # a collector that cannot start is a reason, not a crash
                ok, reason = False, f"{type(e).__name__}: {e}"
        run_dir.record_status(name, ok, reason)
    rng = random.Random(pid)
    while active and _alive(pid):
        for entry in list(active):
            name, collector, f = entry
            t0 = time.monotonic_ns()
            try:
                rec = collector.sample()
            except Exception as e:
                run_dir.record_status(name, False, f"stopped: {type(e).__name__}: {e}")
                active.remove(entry)
                f.close()
                continue
            rec["t_ns"] = t0
            rec["cost_ns"] = time.monotonic_ns() - t0
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            f.flush()
        wait = interval * rng.uniform(0.8, 1.2)
        readable, _, _ = select.select([sys.stdin], [], [], wait)
        if readable and not os.read(sys.stdin.fileno(), 1):
            break  # stdin closed: the session is finishing
    for _, _, f in active:
        f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
