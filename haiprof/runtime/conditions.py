"""The set-up conditions of a run, recorded in meta.json `conditions` at its start (analyzers/conditions.py
compares them): the host and CPU, the CPUs this process may run on, torch's intra-op threads as the script
starts, the environment variables that steer threads and devices, torch's version."""
from __future__ import annotations

import os

from haiprof.analyzers.conditions import env_subset


def setup_conditions(meta: dict) -> dict:
    import torch
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"host": meta.get("host"), "cpu_model": meta.get("cpu_model"), "cpu_count": meta.get("cpu_count"),
            "cpu_affinity": affinity, "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "gpus": meta.get("gpus"), "env": env_subset(os.environ)}
