"""report.html of long runs: its size, what takes the bytes, and how fine the step chart zooms.

    python benchmarks/report_size.py 100000 1000000

Each run directory is written with the real phase store writer (haiprof/phasestore.py) from noisy numpy columns:
DataLoader, forward, backward, optimizer with 10-20% noise each (real step times are not periodic, and a run
repeated from a short one would compress to nothing), an epoch start every 10,000 steps and one slow step.
Printed per run: `haiprof report` wall time and peak RSS (a child process), report.html bytes, the inlined
plotly.js bytes, the step chart's embedded per-step detail (bytes and its level: steps per unit, time codes per
octave, phase share steps) and the rest of the page.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

MS, GAP, T0 = 1_000_000, 20_000, 10**12


LAG = 50_000   # ns from a host phase's start to its device span's (cuda=True)


def write_run(out: Path, n: int, slow_at: int, seed: int = 0, cuda: bool = False) -> None:
    """A finished CPU run of n steps written as `haiprof run` writes it (meta.json, status.jsonl, phases.bin).
    cuda: each forward, backward and optimizer also has its CUDA-event span ("gpu:<phase>"), starting 50 us
    after the host's and 90% as long, so the report goes through the device timeline."""
    from haiprof.phasestore import encode_chunk

    rng = np.random.default_rng(seed)
    load = (0.3 * MS * (1 + 0.2 * rng.random(n))).astype(np.int64)
    fwd, bwd, opt = ((ms * MS * (1 + 0.1 * rng.standard_normal(n)).clip(0.5)).astype(np.int64) for ms in (1, 2, 0.5))
    fwd[slow_at] += 300 * MS
    step = load + fwd + bwd + opt + 4 * GAP
    end = T0 + 10**9 + np.cumsum(step)
    a = end - step
    b = a + load
    c, d = b + GAP, b + GAP + fwd
    e, f = d + GAP, d + GAP + bwd
    g, h = f + GAP, f + GAP + opt
    cols = [x.tolist() for x in (a, b, c, d, e, f, g, h, end)]
    out.mkdir(parents=True)
    (out / "samples").mkdir()
    (out / "status.jsonl").write_text(json.dumps({"collector": "phases", "available": True, "reason": ""}) + "\n")
    (out / "meta.json").write_text(json.dumps({
        "command": "haiprof run train.py", "target_name": "train", "script": "train.py", "argv": [], "exit_code": 0,
        "how": "exit", "start_monotonic_ns": T0, "end_monotonic_ns": int(end[-1]) + 10**8, "start_time": 1.8e9,
        "end_time": 1.8e9 + (int(end[-1]) - T0) / 1e9, "host": "synthetic", "cpu_count": 2, "gpus": []}))
    with open(out / "phases.bin", "wb") as fh:
        recs = [("@step", cols[0][0], cols[0][0])]
        mark = cols[7] if cuda else cols[8]   # on CUDA runs optimizer.step's end is the mark (its span's end: the device's)
        for i in range(n):
            recs += [("dataloader", cols[0][i], cols[1][i]), ("forward", cols[2][i], cols[3][i]),
                     ("backward", cols[4][i], cols[5][i]), ("optimizer", cols[6][i], cols[7][i]),
                     ("@step", mark[i], mark[i])]
            if cuda:
                recs += [("gpu:" + p, cols[k][i] + LAG, cols[k][i] + LAG + (cols[k + 1][i] - cols[k][i]) * 9 // 10)
                         for p, k in (("forward", 2), ("backward", 4), ("optimizer", 6))]
            if i % 10_000 == 5_000:
                recs.append(("@loader", cols[0][i] + 1, cols[0][i] + 1))
            if len(recs) >= 6000:
                fh.write(encode_chunk(recs))
                recs = []
        fh.write(encode_chunk(recs))


def weigh(report: Path) -> dict:
    html = report.read_text()
    figs = json.loads(re.search(r'id="haiprof-figures">(.*?)</script>', html, re.S).group(1))
    plotly = re.search(r'id="haiprof-plotly">(.*?)</script>', html, re.S).group(1)
    zoom = figs.get("steps", {}).get("zoom") or {}
    return {"total": len(html.encode()), "plotly": len(plotly), "detail": len(zoom.get("b64", "")),
            "level": (zoom.get("k"), zoom.get("R"), zoom.get("S"))}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.long_run import _timed_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="+")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.steps:
            out = Path(tmp) / f"noisy-{n}"
            write_run(out, n, slow_at=n * 3 // 4)
            wall, cpu, peak = _timed_report(out)
            w = weigh(out / "report.html")
            k, r, s = w["level"]
            print(f"{n} steps: haiprof report {wall:.1f} s ({cpu:.1f} s CPU), peak RSS {peak:.0f} MiB; report.html {w['total']:,} bytes "
                  f"= plotly.js {w['plotly']:,} + step detail {w['detail']:,} (steps per unit {k}, {r} time codes "
                  f"an octave, shares in 1/{s}) + the rest {w['total'] - w['plotly'] - w['detail']:,}")


if __name__ == "__main__":
    main()
