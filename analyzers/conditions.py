"""The conditions a run was measured under, and how two runs' conditions differ: a before/after is the fix's only
when both runs saw the same machine. Pure functions on the dicts recorded in meta.json `conditions` (set up at
the run's start) and summary.json `conditions` (those plus the load other processes put on the host meanwhile).

Set-up conditions that change a step's time without changing the command: the host and its CPU, the CPUs the
run may use (affinity), torch's intra-op thread count, the environment variables that steer threads, devices and
torch, torch's version. Load: the cores other processes took during the run (the sampler's host CPU less the
run's own process tree, as the busy-neighbour finding measures it).
"""
from __future__ import annotations

import statistics

from .utilization import load_samples, other_cores

# (key in `conditions`, how a person calls it)
SETUP = (("host", "host"), ("cpu_model", "CPU"), ("cpu_count", "CPU count"), ("cpu_affinity", "CPU affinity"),
         ("torch_threads", "torch threads"), ("torch", "torch version"), ("gpus", "GPUs"), ("env", "environment"))
# Environment variables that change how fast the same command runs (threads, devices, allocator, torch's own
# switches); a difference in any other is no difference in conditions.
ENV_EXACT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "LD_PRELOAD", "OMP_PROC_BIND", "OMP_PLACES",
             "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
ENV_PREFIXES = ("TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "NCCL_")
# Other processes' load differs when it moved by this many cores, and at least this fraction of the machine
LOAD_DIFF_CORES, LOAD_DIFF_OF_MACHINE = 0.5, 0.25
# The training thread's run-queue wait differs when the stretch it puts on the thread's CPU work (1 / (1 - wait
# share)) changed by this factor: 0 -> 20% is 1.25x, 70% -> 80% is 1.5x (a saturated host's smaller steps matter)
CPU_STRETCH_DIFF = 1.25


def env_subset(environ: dict) -> dict:
    return {k: v for k, v in sorted(environ.items()) if k in ENV_EXACT or k.startswith(ENV_PREFIXES)}


def other_load(samples: list[dict]) -> dict | None:
    """Cores other processes took during a run (utilization.other_cores per system sample): the median over the
    run as `other_cores` (one burst does not make a busy run; the busy-neighbour finding's other_cores_mean is
    the same samples' mean) and p90. None with fewer than 2 usable samples."""
    xs = [max(0.0, other_cores(s)) for s in load_samples(samples)]
    if len(xs) < 2:
        return None
    xs.sort()
    return {"other_cores": round(statistics.median(xs), 3), "other_cores_p90": round(xs[int(0.9 * (len(xs) - 1))], 3),
            "cores": len(samples[-1].get("cpu_cores_pct") or []), "samples": len(xs)}


def _show(key: str, value) -> str:
    if value is None or value == "":
        return "unset" if key == "env" else "unknown"
    if isinstance(value, list):
        return ",".join(map(str, value)) if key != "cpu_affinity" else cpu_list(value)
    return str(value)


def cpu_list(cpus: list) -> str:
    """[0, 1, 2, 5] -> '0-2,5 (4 CPUs)'"""
    cpus = sorted(cpus)
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return f"{','.join(parts)} ({len(cpus)} CPUs)"


def setup_differences(before: dict, after: dict) -> list[str]:
    """What differs in how the two runs were set up, one phrase each ('torch threads 1 -> 2'); keys either run
    did not record (an older haiprof) are not compared."""
    out = []
    for key, label in SETUP:
        if key not in before or key not in after:
            continue
        a, b = before[key], after[key]
        if key == "env":
            a, b = a or {}, b or {}
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    out.append(f"{name} {_show('env', a.get(name))} -> {_show('env', b.get(name))}")
        elif a != b:
            out.append(f"{label} {_show(key, a)} -> {_show(key, b)}")
    return out


def load_difference(before: dict, after: dict) -> str | None:
    """'other processes took 1.9 -> 0.2 cores of 2' when the load beside the two runs differs by
    LOAD_DIFF_CORES and LOAD_DIFF_OF_MACHINE of the machine; None when similar or not recorded."""
    a, b = before.get("other_cores"), after.get("other_cores")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    cores = after.get("cores") or before.get("cores") or 1
    if abs(a - b) < max(LOAD_DIFF_CORES, LOAD_DIFF_OF_MACHINE * cores):
        return None
    return f"other processes took {a:.1f} -> {b:.1f} of {cores} cores"


def stretch(wait_share: float) -> float:
    """How much longer the training thread's CPU work took for waiting: 1 / (1 - wait share)."""
    return 1.0 / max(1e-3, 1.0 - wait_share)


def wait_difference(before: dict, after: dict) -> str | None:
    """'the training thread's CPU work took 3.7x -> 2.0x its CPU time (waiting for a CPU 73% -> 50% of its
    runnable time)' when that stretch differs by a factor of CPU_STRETCH_DIFF between the two runs: on a host
    whose cores are saturated either way, the busy cores look alike while the run's waits do not."""
    a, b = before.get("cpu_wait_share"), after.get("cpu_wait_share")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    sa, sb = stretch(a), stretch(b)
    if max(sa, sb) / min(sa, sb) < CPU_STRETCH_DIFF:
        return None
    return (f"the training thread's CPU work took {sa:.1f}x -> {sb:.1f}x its CPU time (waiting for a CPU "
            f"{100 * a:.0f}% -> {100 * b:.0f}% of its runnable time)")


def differences(before: dict | None, after: dict | None) -> list[str]:
    """Every difference between two runs' conditions (set-up first, then load)."""
    before, after = before or {}, after or {}
    load = [x for x in (load_difference(before, after), wait_difference(before, after)) if x]
    return setup_differences(before, after) + load


def message(diffs: list[str], interleaved: bool = False) -> str | None:
    if not diffs:
        return None
    if interleaved:   # the pairs' ratio is the one measured in like conditions
        return (f"this run and the last baseline pass ran under other conditions ({'; '.join(diffs)}): read the "
                f"interleaved pairs' speedup, not this run's")
    return (f"the baseline ran under other conditions ({'; '.join(diffs)}): the speedup mixes the fix with that "
            f"change; re-measure with `--interleave N` (baseline and fixed passes alternated, same conditions)")
