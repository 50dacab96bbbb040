"""What a long run costs haiprof: disk per step, memory over the run, and the report of the whole run.

    python benchmarks/long_run.py --real 1000000                 # a real tiny loop under `haiprof run`
    python benchmarks/long_run.py --synthetic 1000000 10000000  # run directories written by haiprof's phase writer
    python benchmarks/long_run.py --loader --synthetic 1000000   # the same, from an input-bound DataLoader loop

`--real N`: a tiny CPU training loop (a 2x1 linear model, SGD, 6 phase records a step) runs N steps under
`haiprof run --trace-steps 0`. Printed: bytes of phase records a step; the training process's RSS (haiprof's
own system samples: the process tree, haiprof's collectors included) over the first and the last tenth of the
run; the run's wall time; then `haiprof report` on the finished directory in a child process: wall time, peak
RSS (the child's rusage) and report.html size. 10,000,000 steps take about an hour on 2 cores.

`--synthetic N --seed-run DIR`: the same with a recorded run directory as the seed (a run recorded on a GPU:
its CUDA-event spans make the report go through the device timeline); its tracing-window marks are not repeated.

`--synthetic N`: a real 20,000-step run of the same loop is the seed; a child process feeds haiprof's phase
writer (RunDir.phase_appender: the chunk encoder and file the run itself uses) the seed's records repeated with
shifted times until N steps, one flush per 1,250 steps as a run of this loop flushes every 0.5 s. Printed: bytes
a step; the writer process's RSS after its first chunk and at the end (the recording side of a run, without
torch); the write time; then `haiprof report` as above.
"""
from __future__ import annotations

import argparse
import json
import os
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
LOADER_SLEEP_MS = 0.5   # a read's latency: well over the tiny model's step, so the loop waits on its input
LOADER_LOOP = """\
import sys, time, torch
torch.set_num_threads(1)

class Slow(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        time.sleep(%g)
        return torch.full((2,), float(i %% 7))

m = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for x in torch.utils.data.DataLoader(Slow(int(sys.argv[1])), batch_size=1, num_workers=0):
    opt.zero_grad()
    m(x).sum().backward()
    opt.step()
""" % (LOADER_SLEEP_MS / 1e3)
CHUNK_STEPS = 1250   # steps in half a second of this loop: one chunk per flush
MIB = 2 ** 20


def _haiprof(*args, **kw):
    return subprocess.run([sys.executable, "-m", "haiprof", *map(str, args)], **kw)


def _timed_report(run: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `haiprof report` in a child process (its own rusage, through wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "haiprof", "report", "--quiet", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"report failed: {proc.stderr.read()[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _report_line(run: Path) -> str:
    wall, cpu, peak = _timed_report(run)
    return (f"haiprof report {wall:.1f} s ({cpu:.1f} s CPU), peak RSS {peak:.0f} MiB, report.html "
            f"{(run / 'report.html').stat().st_size / 1024:.0f} KiB")


def _verdict(s: dict) -> str:
    """The verdict, and the io split's reading where there is one (what --loader exercises)."""
    io = next((f for f in s["findings"] if f["kind"] == "io"), None)
    split = ((io or {}).get("evidence") or {}).get("input_split") or {}
    waits = (split.get("loader_thread") or {}).get("waits")
    return f"verdict {s['bottleneck']}" + (f", io split {io['evidence']['input_bound']} ({waits:,} waits read)"
                                           if split else "")


def real(steps: int, tmp: Path, loop: str = LOOP) -> None:
    script = tmp / "tiny_loop.py"
    script.write_text(loop)
    out = tmp / f"real-{steps}"
    t0 = time.perf_counter()
    r = _haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, script, steps, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(r.stderr[-800:])
    s = json.loads((out / "summary.json").read_text())
    samples = [json.loads(x) for x in (out / "samples" / "system.jsonl").read_text().splitlines() if x.strip()]
    rss = [x["rss_bytes"] for x in samples if "rss_bytes" in x]
    size = (out / "phases.bin").stat().st_size
    k = max(1, len(rss) // 10)
    rss_line = (f"training process RSS {sum(rss[:k]) / k / MIB:.0f} MiB (first tenth of {len(rss)} samples) -> "
                f"{sum(rss[-k:]) / k / MIB:.0f} MiB (last tenth)") if rss else "no RSS samples"
    print(f"real {s['steps']:,} steps: {size / s['steps']:.1f} bytes a step ({size / MIB:.1f} MiB); {rss_line}; "
          f"run {wall:.0f} s; {_report_line(out)}; {_verdict(s)}", flush=True)
    shutil.rmtree(out)


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024


def write(steps: int, seed_run: Path, out: Path) -> None:
    """(child process) `steps` steps of the seed run's records through haiprof's phase writer into `out`."""
    from haiprof.rundir import RunDir

    records = RunDir(seed_run).read_phase_records()
    marks = [r[1] for r in records if r[0] == "@step"]
    period, base_steps = marks[-1] - marks[0], len(marks) - 1
    # one tracing window is the seed's, not one per repetition
    body = [tuple(r) for r in records if marks[0] < r[1] <= marks[-1] and r[0] not in ("@trace-begin", "@trace-end")]
    del records
    per_step = len(body) / base_steps
    run = RunDir.create(out)
    for name in ("meta.json", "status.jsonl"):
        shutil.copyfile(seed_run / name, out / name)
    reps = -(-steps // base_steps)
    meta = json.loads((out / "meta.json").read_text())
    meta["end_monotonic_ns"] = marks[-1] + reps * period
    (out / "meta.json").write_text(json.dumps(meta))
    appender = run.phase_appender()
    per_chunk = max(1, round(per_step * CHUNK_STEPS))
    t0, n, first_rss = time.perf_counter(), 0, None
    for k in range(reps):
        shift = k * period
        for name, s, e, *x in body:
            appender.append((name, s + shift, e + shift, *x))
            n += 1
            if n % per_chunk == 0:
                appender.flush()
                first_rss = first_rss or _rss_mib()
        if (k + 1) * base_steps >= steps:
            break
    appender.close()
    print(json.dumps({"rss_first_mib": first_rss, "rss_end_mib": _rss_mib(), "write_s": time.perf_counter() - t0}))


def synthetic(steps: int, seed_run: Path, tmp: Path) -> None:
    out = tmp / f"synthetic-{steps}"
    r = subprocess.run([sys.executable, __file__, "--write", str(steps), str(seed_run), str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-800:])
    w = json.loads(r.stdout.splitlines()[-1])
    size = (out / "phases.bin").stat().st_size
    line = _report_line(out)
    s = json.loads((out / "summary.json").read_text())
    print(f"synthetic {s['steps']:,} steps: {size / s['steps']:.1f} bytes a step ({size / MIB:.0f} MiB); writer RSS "
          f"{w['rss_first_mib']:.0f} -> {w['rss_end_mib']:.0f} MiB (first chunk -> end), written in "
          f"{w['write_s']:.0f} s; {line}; {_verdict(s)}", flush=True)
    shutil.rmtree(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", "--steps", type=int, nargs="*", default=[], dest="real")
    ap.add_argument("--synthetic", type=int, nargs="*", default=[])
    ap.add_argument("--seed-steps", type=int, default=20000, help="steps of the real run the synthetic ones repeat")
    ap.add_argument("--seed-run", type=Path, help="repeat this run directory's records instead (e.g. a run recorded "
                                                    "on a GPU: its device spans make the report a CUDA run's)")
    ap.add_argument("--loader", action="store_true", help="an input-bound DataLoader loop (io finding, its split)")
    ap.add_argument("--write", nargs=3, help=argparse.SUPPRESS)   # the synthetic writer's child process
    a = ap.parse_args()
    if a.write:
        write(int(a.write[0]), Path(a.write[1]), Path(a.write[2]))
        return 0
    loop = LOADER_LOOP if a.loader else LOOP
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in a.real:
            real(n, tmp, loop)
        if a.synthetic and a.seed_run:
            if not (a.seed_run / "meta.json").is_file():
                raise SystemExit(f"--seed-run: no run directory at {a.seed_run}")
            seed = a.seed_run
        elif a.synthetic:
            script = tmp / "tiny_loop.py"
            script.write_text(loop)
            seed = tmp / "seed"
            _haiprof("run", "--quiet", "--trace-steps", "0", "--out", seed, script, a.seed_steps, check=True)
        for n in a.synthetic:
            synthetic(n, seed.resolve(), tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
