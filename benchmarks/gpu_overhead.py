"""haiprof's overhead on GPU training, by each script's own clock: plain `python` vs `haiprof run` (default
options), interleaved pairs, median ratio and spread per workload.

    python benchmarks/gpu_overhead.py [--pairs 5] [--workloads DIR] [--only launch,gpt_tiny] [--haiprof-args '']

Workloads: every `*.py` in the shared GPU workloads folder (default `../shared/gpu-runs/workloads` beside the
repository, or $HAIPROF_GPU_WORKLOADS; files starting with `_` are helpers) and benchmarks/workloads/gpt_tiny.py (a
small GPT, host-bound on a big GPU). Each prints `OWN_CLOCK <tag> steps_per_s=... step_ms=...` (device
synchronize only at both ends of the measured steps); the ratio is haiprof's step_ms over plain's, per pair.
Without a CUDA GPU it prints one line saying so and exits 0.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_SHARED = REPO.parent / "shared" / "gpu-runs" / "workloads"
OWN = HERE / "workloads" / "gpt_tiny.py"
LINE = re.compile(r"^OWN_CLOCK (\S+) steps_per_s=([\d.]+) step_ms=([\d.]+)", re.M)


def has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def own_clock(cmd: list[str], timeout: float) -> float:
    """step_ms the script printed (the last OWN_CLOCK line)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    found = LINE.findall(r.stdout)
    if r.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}, no OWN_CLOCK line\n{r.stderr[-2000:]}")
    return float(found[-1][2])


def workloads(folder: Path, only: set[str] | None) -> list[Path]:
    found = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []
    found.append(OWN)
    return [p for p in found if only is None or p.stem in only or p.stem.removeprefix("gpu_") in only]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workloads", type=Path,
                    default=Path(os.environ.get("HAIPROF_GPU_WORKLOADS", DEFAULT_SHARED)))
    ap.add_argument("--only", default="", help="comma-separated workload names (file stems, gpu_ prefix optional)")
    ap.add_argument("--haiprof-args", default="", help="extra `haiprof run` options, e.g. '--trace-steps 0'")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    if not has_cuda():
        print("gpu_overhead: skipped, no CUDA GPU on this machine (torch.cuda.is_available() is False)")
        return 0
    import torch
    only = set(filter(None, args.only.split(","))) or None
    todo = workloads(args.workloads, only)
    if not args.workloads.is_dir():
        print(f"gpu_overhead: no shared workloads at {args.workloads} (--workloads / $HAIPROF_GPU_WORKLOADS); "
              f"running {OWN.name} only")
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{args.pairs} interleaved pairs, haiprof options: {args.haiprof_args or '(defaults)'}")
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-gpu-bench-"))
    rows = []
    for wl in todo:
        plain, prof, ratios = [], [], []
        for i in range(args.pairs):
            # Alternate which goes first: a drifting machine biases neither side.
            order = ("plain", "haiprof") if i % 2 == 0 else ("haiprof", "plain")
            got = {}
            for kind in order:
                cmd = ([sys.executable, str(wl)] if kind == "plain" else
                       [sys.executable, "-m", "haiprof", "run", "--quiet", *args.haiprof_args.split(),
                        "--out", str(tmp / f"{wl.stem}-{i}"), str(wl)])
                got[kind] = own_clock(cmd, args.timeout)
            plain.append(got["plain"])
            prof.append(got["haiprof"])
            ratios.append(got["haiprof"] / got["plain"])
            print(f"  {wl.stem:12s} pair {i}: plain {got['plain']:8.3f} ms  haiprof {got['haiprof']:8.3f} ms  "
                  f"ratio {ratios[-1]:.3f}", flush=True)
        rows.append((wl.stem, statistics.median(plain), statistics.median(prof), statistics.median(ratios),
                     min(ratios), max(ratios)))
    print("\n| workload | plain step (median) | haiprof run step (median) | ratio median | ratio min..max |")
    print("| --- | --- | --- | --- | --- |")
    for name, p, h, r, lo, hi in rows:
        print(f"| {name} | {p:.2f} ms | {h:.2f} ms | {r:.3f} | {lo:.3f}..{hi:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
