"""Predicted vs measured gain of `--fix auto` on the bundled CPU examples, measured in interleaved pairs.

    python benchmarks/example_predictions.py [--interleave 3] [--only launch_bound,input_bound] [--json FILE]

For each single-process example (examples/*.py with short arguments) it runs `haiprof run --fix auto
--interleave N` from a fresh folder: the diagnosis run, then N alternated baseline and fixed passes. The fixed
run's summary says what the diagnosis predicted for the fixes it chose (`fixes.gain.predicted`: a point and a
range, from analyzers/whatif.py) and what the pairs measured (their median ratio and spread, in like conditions).
Printed per example: the fixes, predicted and measured step after, the error in points of the base step, whether
the pairs resolve the effect (spread no wider than it), and the load average around the run; last the median
error. An example for which the diagnosis proposes no fix says why (its "left out" reasons).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT_POINTS = 15.0   # the error predictions are held to (points of the base step)

# example -> its arguments: long enough that every pass has steady steps, short enough for a 2-core machine
EXAMPLES = {
    "launch_bound.py": ["--steps", "60"],
    "input_bound.py": ["--batches", "60"],
    "input_bound_decode.py": ["--batches", "80"],
    # the shards are kept (the read probe reads them after the run)
    "input_bound_storage.py": ["--batches", "120", "--data", "shards"],
    "compute_bound.py": ["--steps", "30"],
    "long_run_shapes.py": [],
    "rl_tiny_matmuls.py": ["--episodes", "16"],
}


# example -> haiprof run's own options for it: the passes' length. Workers deliver batches in rounds; haiprof's
# passes for a fix that starts workers are 60 steps (fixrun.WORKER_PASS_STEPS); the storage example's 8 workers
# on an erratic volume get 100
OPTIONS = {"input_bound_storage.py": ["--steps", "100"]}


def run_example(script: str, args: list[str], interleave: int, tmp: Path) -> dict:
    out = tmp / script[:-3]
    load0 = os.getloadavg()[0]
    r = subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--fix", "auto", "--interleave",
                        str(interleave), *OPTIONS.get(script, []), "--out", str(out),
                        str(REPO / "examples" / script), *args],
                       capture_output=True, text=True, cwd=tmp, timeout=3600)
    row = {"example": script[:-3], "rc": r.returncode, "load": (round(load0, 2), round(os.getloadavg()[0], 2))}
    try:
        s = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        row["error"] = r.stderr.strip()[-300:] or "no summary.json"
        return row
    fx = s.get("fixes") or {}
    gain = fx.get("gain") or {}
    row["fixes"] = gain.get("applied") or [c.get("id") for c in fx.get("ranked") or []]
    row["left_out"] = [f"{c.get('id')}: {c.get('reason')}" for c in fx.get("excluded") or []]
    row["note"] = fx.get("note")
    p, il = gain.get("predicted"), gain.get("interleaved")
    if p:
        row.update(before_ms=1e3 * p["step_before_s"], pred_ms=1e3 * p["step_after_pred_s"],
                   measured_ms=1e3 * p["measured_step_after_s"], error=p["error_points"],
                   measured_by=p.get("measured_by"),
                   range_ms=[1e3 * p["step_before_s"] * (1 - g) for g in (p.get("high_share"), p.get("low_share"))
                             if isinstance(g, (int, float))])
    if il:
        row.update(pairs=il.get("ratios"), spread=il.get("spread"), measurable=il.get("measurable"))
    return row


def line(r: dict) -> str:
    if "error" not in r or not isinstance(r.get("error"), (int, float)):
        why = r.get("error") if isinstance(r.get("error"), str) else (
            "no fix applied" + (f" ({r['note']})" if r.get("note") else "")
            + ("; left out " + "; ".join(r["left_out"]) if r.get("left_out") else ""))
        return f"| {r['example']} | {','.join(r.get('fixes') or []) or '-'} | {why} | | | | | {r['load']} |"
    rng = "-".join(f"{x:.1f}" for x in sorted(r.get("range_ms") or [])) or "-"
    pairs = ", ".join(f"{x:.2f}" for x in r.get("pairs") or [])
    flag = "" if r["error"] <= LIMIT_POINTS else f" (over {LIMIT_POINTS:.0f})"
    return (f"| {r['example']} | {','.join(r['fixes'])} | {r['before_ms']:.1f} ms | {r['pred_ms']:.1f} ms ({rng}) "
            f"| {r['measured_ms']:.1f} ms | {r['error']:.1f}{flag} | {pairs} (spread {r.get('spread') or 0:.0%}"
            f"{', resolves it' if r.get('measurable') else ', wider than the effect'}) | {r['load']} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interleave", type=int, default=3)
    ap.add_argument("--only", help="comma-separated example names (without .py)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    a = ap.parse_args()
    names = [n + ".py" for n in a.only.split(",")] if a.only else list(EXAMPLES)
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        raise SystemExit(f"unknown example(s): {', '.join(unknown)}")
    tmp = Path(tempfile.mkdtemp(prefix="haiprof-examples-"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, --fix auto --interleave {a.interleave}, "
          f"runs in {tmp}", flush=True)
    print("| example | fixes | base step | predicted step after (range) | measured step after | error, points "
          "| pair ratios | load average (start, end) |\n|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for name in names:
        rows.append(run_example(name, EXAMPLES[name], a.interleave, tmp))
        print(line(rows[-1]), flush=True)
    errors = [r["error"] for r in rows if isinstance(r.get("error"), (int, float))]
    if errors:
        print(f"\nMedian error: {statistics.median(errors):.1f} points over {len(errors)} example(s); "
              f"{sum(e <= LIMIT_POINTS for e in errors)} within {LIMIT_POINTS:.0f}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
