"""A fix measured against a baseline from other conditions, then interleaved, on a machine made noisy on purpose.

    python benchmarks/fix_noise.py [--fix fused-optim] [--pairs 4] [--steps 30] [--hogs N] [--json out.json]

Three measurements of the same `haiprof run --fix FIX` on one example (examples/launch_bound.py by default):

1. stale: the baseline is recorded while N CPU hogs (`while True: pass` processes, N = the usable cores by
   default) run beside it, the fixed run after they stopped. The ratio haiprof reports then mixes the fix with
   the load that went away; the row says whether haiprof marked it (the `fix-conditions` finding) and with what.
2. interleaved, noisy: `--interleave PAIRS` with the hogs running throughout: baseline and fixed short passes
   alternate, each pair in the same conditions; the median pair ratio and the spread of the pair ratios (min-max,
   and (max - min) / median) are the speedup and its noise.
3. interleaved, as the machine is: the same without hogs (a shared machine is loaded by others anyway).

Alongside, the plain-python truth: the example timed by its own clock (`OWN_CLOCK ... step_ms=X`), unfixed and
fixed alternately under haiprof PAIRS times without hogs and without a tracing window (its profiled steps
would sit in the script's own mean), median of its pair ratios; the fixed one is run by `haiprof run --fix`, so
only the fix differs. The load average (/proc/loadavg) is printed at each measurement, and for each haiprof
comparison the load its two runs recorded (the training thread's CPU wait, the cores other processes took).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/launch_bound.py"


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "n/a"


@contextmanager
def cpu_hogs(n: int):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def haiprof(out: Path, example_args: list, *extra: str) -> tuple[dict, str]:
    cmd = [sys.executable, "-m", "haiprof", "run", *extra, "--out", str(out), str(REPO / EXAMPLE), *example_args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"fix_noise: {' '.join(cmd)} failed (exit {r.returncode}): "
                         f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads((out / "summary.json").read_text()), r.stdout


def own_step_ms(stdout: str) -> float | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("OWN_CLOCK "):
            for part in line.split():
                if part.startswith("step_ms="):
                    return float(part[len("step_ms="):])
    return None


def _load(s: dict) -> str:
    c = s.get("conditions") or {}
    wait, other = c.get("cpu_wait_share"), c.get("other_cores")
    return (f"wait {'n/a' if wait is None else f'{100 * wait:.0f}%'}, "
            f"others {'n/a' if other is None else f'{other:.1f}'} cores")


def gain_row(name: str, s: dict) -> dict:
    g = (s.get("fixes") or {}).get("gain") or {}
    il = g.get("interleaved") or {}
    base = json.loads((Path(s["comparison"]["baseline_run"]) / "summary.json").read_text())
    return {"measurement": name, "load_baseline": _load(base), "load_fixed": _load(s), "haiprof_speedup": g.get("speedup"), "interleaved_speedup": il.get("speedup"),
            "pair_ratios": il.get("ratios"), "pair_min": il.get("min"), "pair_max": il.get("max"),
            "pair_spread": il.get("spread"), "conditions_mark": g.get("conditions"), "noisy": g.get("noisy"),
            "noise_before": (g.get("noise") or {}).get("before"), "noise_after": (g.get("noise") or {}).get("after"),
            "loadavg": loadavg()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fix", default="fused-optim")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30, help="steps per pass and per run")
    ap.add_argument("--hogs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--json")
    ns = ap.parse_args()
    args = ["--steps", str(ns.steps)]
    rows = []
    print(f"cores usable: {len(os.sched_getaffinity(0))}, hogs: {ns.hogs}, fix: {ns.fix}, example: {EXAMPLE} "
          f"{' '.join(args)}, loadavg: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="haiprof-fixnoise-") as tmp:
        tmp = Path(tmp)
        with cpu_hogs(ns.hogs):
            haiprof(tmp / "stale" / "base", args, "--quiet")
        s, _ = haiprof(tmp / "stale" / "fixed", args, "--quiet", "--fix", ns.fix)
        rows.append(gain_row("stale: baseline beside hogs, fixed run after", s))
        with cpu_hogs(ns.hogs):
            s, _ = haiprof(tmp / "noisy" / "fixed", args, "--quiet", "--fix", ns.fix, "--interleave",
                           str(ns.pairs), "--steps", str(ns.steps))
        rows.append(gain_row(f"interleaved, {ns.hogs} hogs throughout", s))
        s, _ = haiprof(tmp / "asis" / "fixed", args, "--quiet", "--fix", ns.fix, "--interleave", str(ns.pairs),
                       "--steps", str(ns.steps))
        rows.append(gain_row("interleaved, machine as it is", s))
        ratios = []
        for i in range(ns.pairs):   # the script's own clock, A B A B, no hogs
            _, out_a = haiprof(tmp / "own" / f"a{i}", args, "--quiet", "--trace-steps", "0")
            _, out_b = haiprof(tmp / "own" / f"b{i}", args, "--quiet", "--trace-steps", "0", "--fix", ns.fix)
            a, b = own_step_ms(out_a), own_step_ms(out_b)
            if a and b:
                ratios.append(a / b)
        rows.append({"measurement": "script's own clock, A/B runs, machine as it is",
                     "interleaved_speedup": statistics.median(ratios) if ratios else None,
                     "pair_ratios": [round(r, 4) for r in ratios], "pair_min": min(ratios, default=None),
                     "pair_max": max(ratios, default=None), "loadavg": loadavg()})
    for r in rows:
        x = (lambda v: "n/a" if v is None else f"{v:.2f}x")
        spread = (f", pairs {r['pair_min']:.2f}-{r['pair_max']:.2f}x" if r.get("pair_min") is not None else "")
        if r.get("pair_spread") is not None:
            spread += f" (spread {100 * r['pair_spread']:.0f}%)"
        mark = f"; marked: {r['conditions_mark']}" if r.get("conditions_mark") else "; not marked"
        if r.get("load_baseline"):
            mark = f"; baseline {r['load_baseline']}, fixed run {r['load_fixed']}{mark}"
        else:
            mark = ""
        print(f"{r['measurement']:<48} haiprof {x(r.get('haiprof_speedup'))}, interleaved median "
              f"{x(r.get('interleaved_speedup'))}{spread}; load {r['loadavg']}{mark}", flush=True)
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
