"""What a profiled run starts from: its options, its new directory and the meta.json written before the script
runs (host, versions, hardware). Shared by `haiprof run`, each rank of a distributed job and `haiprof.profile()`.
"""
from __future__ import annotations

import os
import platform
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from haiprof.collectors.matmul_peak import cpu_model

from ..rundir import RunDir
from ..version import __version__
from .conditions import launch_conditions, setup_conditions

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
    # the flight recorder (--trace-on-anomaly): a window where the next slow step is due, within a budget
    trace_on_anomaly: bool = True
    anomaly_factor: float = 3.0   # a step over this many times the rolling median is a slow moment
    anomaly_windows: int = 2      # at most this many windows a run ...
    anomaly_mb: float = 64.0      # ... and this many MB of their traces
    # a rank of a distributed job: () -> (the job's store, key prefix, rank), to share those windows with every rank
    job_store: object = None
    fix: str | None = None        # --fix spec ("prefetch,amp" or "auto"), see fixrun.py
    interleave: int = 0           # --interleave N: N baseline/fixed pass pairs before a --fix run (fixrun.py)
    # a snapshot report of the run so far every so many minutes (--snapshot-every; 0: none); a distributed job's
    # ranks get it through the environment
    snapshot_every_min: float = field(default_factory=lambda: _env_minutes(SNAPSHOT_ENV, SNAPSHOT_EVERY_MIN))


SNAPSHOT_ENV, SNAPSHOT_EVERY_MIN = "HAIPROF_SNAPSHOT_EVERY_MIN", 5.0
ANOMALY_ENV = "HAIPROF_TRACE_ON_ANOMALY"   # a distributed job's ranks: "on,factor,windows,mb" (haiprof run's options)


def anomaly_options(env=None) -> dict:
    """The flight recorder's RunOptions from ANOMALY_ENV (a rank of a job); {} (the defaults) without it."""
    try:
        on, factor, windows, mb = (os.environ if env is None else env)[ANOMALY_ENV].split(",")
        return {"trace_on_anomaly": on == "1", "anomaly_factor": float(factor), "anomaly_windows": int(windows),
                "anomaly_mb": float(mb)}
    except (KeyError, ValueError):
        return {}


def _env_minutes(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


DEFAULT_PARENT = "haiprof-runs"


def claim_out_dir(out: str | None, target_name: str) -> RunDir:
    """The run's own new directory, absolute (see RunDir.claim / claim_new); OutDirError if it cannot be."""
    return RunDir.claim(out) if out else RunDir.claim_new(DEFAULT_PARENT, target_name)




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


def collect_meta(opts: RunOptions, target_name: str, run_dir: RunDir, measure_torch: bool = True) -> dict:
    """meta.json at the start. `measure_torch=False`: this process is not the script's and does not import torch;
    the script's python adds torch's version and the set-up conditions (runtime/child_boot.py)."""
    torch = None
    if measure_torch:
        import torch
    meta = {
        "run_dir": str(run_dir.path),   # where this run (a rank: on its own node) wrote its data
        "haiprof_version": __version__, "haiprof_argv": opts.haiprof_argv,
        "target_argv": ([sys.executable, "-m", opts.module] if opts.module else [sys.executable, opts.script])
        + list(opts.args),
        "command": " ".join(["haiprof", "run", *opts.haiprof_argv]) if opts.haiprof_argv else None,
        "target_name": target_name, "script": opts.script, "module": opts.module, "argv": list(opts.args),
        "cwd": os.getcwd(), "host": socket.gethostname(), "pid": os.getpid(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "gpus": _gpus(), "start_time": time.time(), "start_monotonic_ns": time.monotonic_ns(),
        "end_time": None, "exit_code": None,
    }
    meta["launch_conditions"] = launch_conditions(meta)   # what a later --fix run checks before it starts
    if torch is not None:
        add_torch_setup(meta)
    return meta


def add_torch_setup(meta: dict) -> None:
    """torch's version and the set-up conditions (its threads: torch imported here) into meta: what a --fix
    comparison checks (runtime/conditions.py)."""
    import torch
    meta["torch"] = torch.__version__
    meta["conditions"] = setup_conditions(meta)
