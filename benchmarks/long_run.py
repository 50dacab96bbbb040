"""What a long run costs haiprof: disk per step, the training process's memory over the run, and the report.

    python benchmarks/long_run.py --steps 1000000                # a real tiny loop under `haiprof run`
    python benchmarks/long_run.py --synthetic 1000000 10000000  # run directories built from a real run's records

`--steps N`: a tiny CPU training loop (a 2x1 linear model, SGD) runs N steps under `haiprof run --trace-steps 0`;
printed: bytes of phase records per step, the training process's RSS near the start and at the end of its steps
(from haiprof's own samples), the wall time of the run, and the report's time and peak memory.

`--synthetic N ...`: a run directory of N steps is written from the records of a real short run of the same loop,
repeated with shifted timestamps and chunked as the writer chunks them (a 10,000,000-step real run takes hours
on 2 cores); printed: phases.bin bytes per step, `haiprof report` wall time and peak RSS, report size.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = """\
import sys, torch
torch.set_num_threads(1)
m = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(4, 2)
for i in range(int(sys.argv[1])):
    opt.zero_grad()
    m(x).sum().backward()
    opt.step()
"""
CHUNK_STEPS = 1250   # steps in half a second of this loop: one chunk per flush


def _haiprof(*args, **kw):
    return subprocess.run([sys.executable, "-m", "haiprof", *map(str, args)], **kw)


def _timed_report(run: Path) -> tuple[float, float]:
    """(wall s, peak RSS MiB) of `haiprof report` in a child process (its own rusage, through wait4)."""
    import os
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "haiprof", "report", "--quiet", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"report failed: {proc.stderr.read()[-500:]!r}")
    return wall, usage.ru_maxrss / 1024


def real(steps: int, tmp: Path) -> None:
    script = tmp / "tiny_loop.py"
    script.write_text(LOOP)
    out = tmp / f"real-{steps}"
    t0 = time.perf_counter()
    r = _haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, script, steps, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(r.stderr[-800:])
    s = json.loads((out / "summary.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    samples = [json.loads(x) for x in (out / "samples" / "system.jsonl").read_text().splitlines() if x.strip()]
    main_rss = [x.get("rss_bytes", 0) for x in samples]
    size = (out / "phases.bin").stat().st_size
    print(f"real run, {s['steps']} steps: {size / s['steps']:.1f} bytes of phase records a step "
          f"({size / 2**20:.1f} MiB), losses.json {(out / 'losses.json').stat().st_size / 2**20:.1f} MiB")
    if main_rss:
        k = max(1, len(main_rss) // 10)
        print(f"  process-tree RSS: {sum(main_rss[:k]) / k / 2**20:.0f} MiB over the first tenth of the samples, "
              f"{sum(main_rss[-k:]) / k / 2**20:.0f} MiB over the last tenth ({len(main_rss)} samples)")
    print(f"  run {wall:.1f} s (teardown, report included: {meta.get('overhead_s', {}).get('teardown')} s)")
    wall_r, peak = _timed_report(out)
    print(f"  haiprof report: {wall_r:.1f} s, peak RSS {peak:.0f} MiB, report.html "
          f"{(out / 'report.html').stat().st_size / 1024:.0f} KiB")


def synthetic(steps: int, seed_run: Path, tmp: Path) -> None:
    from haiprof.phasestore import encode_chunk
    from haiprof.rundir import RunDir

    records = RunDir(seed_run).read_phase_records()
    marks = [r[1] for r in records if r[0] == "@step"]
    period = marks[-1] - marks[0]
    base_steps = len(marks) - 1
    body = [tuple(r) for r in records if marks[0] < r[1] <= marks[-1]]
    out = tmp / f"synthetic-{steps}"
    out.mkdir()
    for name in ("meta.json", "status.jsonl"):
        shutil.copyfile(seed_run / name, out / name)
    (out / "samples").mkdir()
    meta = json.loads((out / "meta.json").read_text())
    reps = -(-steps // base_steps)
    meta["end_monotonic_ns"] = meta["start_monotonic_ns"] + (marks[-1] - meta["start_monotonic_ns"]) + reps * period
    (out / "meta.json").write_text(json.dumps(meta))
    per_chunk = max(1, len(body) * CHUNK_STEPS // base_steps)
    written = 0
    with open(out / "phases.bin", "wb") as f:
        buf = []
        for k in range(reps):
            shift = k * period
            for name, s, e, *x in body:
                buf.append((name, s + shift, e + shift, *x))
                if len(buf) >= per_chunk:
                    f.write(encode_chunk(buf))
                    buf = []
            written += base_steps
            if written >= steps:
                break
        f.write(encode_chunk(buf))
    size = (out / "phases.bin").stat().st_size
    wall, peak = _timed_report(out)
    s = json.loads((out / "summary.json").read_text())
    print(f"synthetic run, {s['steps']} steps: {size / s['steps']:.1f} bytes a step ({size / 2**20:.0f} MiB); "
          f"haiprof report {wall:.1f} s, peak RSS {peak:.0f} MiB, report.html "
          f"{(out / 'report.html').stat().st_size / 1024:.0f} KiB")
    shutil.rmtree(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="*", default=[])
    ap.add_argument("--synthetic", type=int, nargs="*", default=[])
    ap.add_argument("--seed-steps", type=int, default=20000, help="steps of the real run the synthetic ones repeat")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in a.steps:
            real(n, tmp)
        if a.synthetic:
            script = tmp / "tiny_loop.py"
            script.write_text(LOOP)
            seed = tmp / "seed"
            _haiprof("run", "--quiet", "--trace-steps", "0", "--out", seed, script, a.seed_steps, check=True)
            for n in a.synthetic:
                synthetic(n, seed, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
