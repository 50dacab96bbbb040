"""haiprof's MFU against a hand computation, and the CUDA peak table against a measured matmul (issue 32's check).

    python benchmarks/gpu_mfu.py [--dtypes bf16,fp32] [--width 8192] [--batch 8192] [--depth 4]
    python benchmarks/gpu_mfu.py --device cpu --dtypes fp32 --width 512 --batch 512   # a dry run on a CPU

For each dtype, benchmarks/workloads/mfu_matmul.py (square linear layers: FLOPs known by hand, printed) runs under
`haiprof run`; its own clock (device synchronized at both ends of the clocked steps) gives the step. Printed:
- haiprof's FLOPs a step (from the traced op shapes) over the hand count: 1.00 when the count is right;
- haiprof's MFU over the hand MFU (hand FLOPs / own-clock step / the same peak): within 10% is the goal;
- on CUDA, the peak haiprof used (analyzers/flops.py's table, by GPU model and dtype) beside the best of a few
  large matmuls timed here with CUDA events: a data-sheet peak is an upper bound, so the measured one should be
  below it (typically 60-85% of it for bf16 on H100-class GPUs); above it means the table is wrong for this GPU.
Without CUDA (and no --device cpu) it prints one line saying so and exits 0.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
from haiprof.analyzers import flops  # noqa: E402
from haiprof.rundir.units import format_flops  # noqa: E402

WORKLOAD = HERE / "workloads" / "mfu_matmul.py"
CLOCK = re.compile(r"^OWN_CLOCK \S+ steps_per_s=[\d.]+ step_ms=([\d.]+)", re.M)
COUNT = re.compile(r"^FLOPS_PER_STEP (\d+)", re.M)


def measured_matmul_peak(dtype: str, n: int = 8192, reps: int = 20) -> float:
    """Best FLOP/s of n x n matmuls in `dtype` on the current CUDA device, timed with CUDA events."""
    import torch
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    a, b = (torch.randn(n, n, device="cuda", dtype=dt) for _ in range(2))
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        best = max(best, 2 * n ** 3 / (start.elapsed_time(end) / 1e3))
    return best


def one(dtype: str, args, tmp: Path) -> dict:
    out = tmp / f"mfu-{dtype}"
    wl = [str(WORKLOAD), "--device", args.device, "--dtype", dtype, "--width", str(args.width), "--batch",
          str(args.batch), "--depth", str(args.depth), "--steps", str(args.steps)]
    r = subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--out", str(out), *wl],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0 or not CLOCK.search(r.stdout):
        raise SystemExit(f"{dtype}: the workload failed under haiprof: {r.stderr.strip()[-400:]}")
    hand = int(COUNT.search(r.stdout).group(1))
    step_s = float(CLOCK.search(r.stdout).group(1)) / 1e3
    eff = json.loads((out / "summary.json").read_text()).get("efficiency") or {}
    peak = eff.get("peak_flops")
    row = {"dtype": dtype, "hand_flops": hand, "own_step_ms": 1e3 * step_s, "haiprof_flops": eff.get("flops_per_step"),
           "haiprof_mfu": eff.get("mfu"), "peak": peak, "peak_source": eff.get("peak_source"), "note": eff.get("note")}
    if peak:
        row["hand_mfu"] = hand / step_s / peak
    if args.device.startswith("cuda"):
        import torch
        name = torch.cuda.get_device_name()
        row.update(gpu=name, table_peak=flops.gpu_peak(name, dtype), measured_peak=measured_matmul_peak(dtype))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    if args.device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            print("gpu_mfu: no CUDA device here (run it on a GPU machine, or pass --device cpu for a dry run)")
            return 0
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-mfu-"))
    worst = 0.0
    for dtype in args.dtypes.split(","):
        r = one(dtype, args, tmp)
        line = f"{dtype}: hand {r['hand_flops'] / 1e9:.1f} GFLOP/step, own clock {r['own_step_ms']:.2f} ms/step"
        if r["haiprof_flops"]:
            line += f"; haiprof counts {r['haiprof_flops'] / 1e9:.1f} GFLOP ({r['haiprof_flops'] / r['hand_flops']:.3f}x)"
        if r.get("haiprof_mfu") and r.get("hand_mfu"):
            ratio = r["haiprof_mfu"] / r["hand_mfu"]
            worst = max(worst, abs(ratio - 1))
            line += (f"; MFU haiprof {r['haiprof_mfu']:.1%} vs hand {r['hand_mfu']:.1%} ({ratio:.3f}x) against "
                     f"{format_flops(r['peak'])}/s ({r['peak_source']})")
        else:
            line += f"; no MFU from haiprof ({r.get('note') or 'no peak'})"
        if r.get("gpu"):
            tp = r["table_peak"]
            line += (f"\n  {r['gpu']}: table peak {tp / 1e12:.1f} TFLOP/s, best {r['measured_peak'] / 1e12:.1f} "
                     f"TFLOP/s measured ({r['measured_peak'] / tp:.0%} of the table)" if tp else
                     f"\n  {r['gpu']}: not in the peak table for {dtype}; measured {r['measured_peak'] / 1e12:.1f} TFLOP/s")
        print(line, flush=True)
    print(f"largest MFU difference from the hand computation: {worst:.1%} (goal: within 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
