"""The set-up conditions of a run, recorded in meta.json `conditions` at its start (analyzers/conditions.py
compares them): the host and CPU, the CPUs this process may run on, torch's intra-op threads as the script
starts, the environment variables that steer threads and devices, torch's version; and, at its end, the share
of its runnable time the training thread spent waiting for a CPU (the kernel's schedstat run delay): what other
load on the machine cost this run, which a saturated host's busy cores no longer show."""
from __future__ import annotations

import os
import threading

from haiprof.analyzers.conditions import env_subset


def setup_conditions(meta: dict) -> dict:
    """All of them, in the script's python once its own `import torch` has loaded torch (its threads as the script
    set them)."""
    import torch
    return {**_seen_without_torch(meta), "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def launch_conditions(meta: dict) -> dict:
    """The conditions the command was launched under, seen by the launching process before the script runs: what
    a later --fix run compares with its baseline's before it starts (fixrun.plan), without importing torch. Not
    torch's threads nor the environment as the script left it at its `import torch` (both are the script's to
    set, the same in two runs of one script: `conditions` has them); torch's installed version, read from its
    version file (importing torch here would cost the launch a second torch import)."""
    out = _seen_without_torch(meta)
    version = _installed_torch_version()
    if version:
        out["torch"] = version
    return out


def _installed_torch_version() -> str | None:
    try:
        import importlib.util
        import re
        spec = importlib.util.find_spec("torch")
        folders = list(spec.submodule_search_locations or []) if spec else []
        if not folders:
            return None
        with open(os.path.join(folders[0], "version.py"), encoding="utf-8") as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        return m.group(1) if m else None
    except (OSError, ImportError, ValueError, UnicodeDecodeError):
        return None


def _seen_without_torch(meta: dict) -> dict:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"host": meta.get("host"), "cpu_model": meta.get("cpu_model"), "cpu_count": meta.get("cpu_count"),
            "cpu_affinity": affinity, "gpus": meta.get("gpus"), "env": env_subset(os.environ), "cpu_bf16": cpu_bf16()}


def cpu_bf16() -> bool | None:
    """Whether this CPU has native bf16 matrix math (AMX or AVX512-BF16 in /proc/cpuinfo): bf16 autocast on a
    CPU without it emulates bf16 and is no faster (analyzers/whatif.py). None where the kernel does not say."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return None


class CpuWait:
    """Run-queue delay of the thread that creates it (the training thread), from /proc/<pid>/task/<tid>/schedstat
    ("cpu ns, run-delay ns, slices"): share() is the delay since creation over the time the thread was runnable
    (on a CPU or waiting for one), so a thread that mostly sleeps (waiting for data) reads as contended as one that
    computes: 0 on an idle machine, 0.5 beside one busy process per core. None where the kernel does not say."""

    def __init__(self):
        self.path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self.start = self._read()

    def _read(self) -> tuple[int, int] | None:
        try:
            with open(self.path, encoding="ascii") as f:
                cpu, delay = f.read().split()[:2]
            return int(cpu), int(delay)
        except (OSError, ValueError):
            return None

    def share(self) -> float | None:
        end = self._read()
        if end is None or self.start is None:
            return None
        cpu, delay = end[0] - self.start[0], end[1] - self.start[1]
        return round(delay / (cpu + delay), 4) if cpu + delay > 0 and delay >= 0 else None
