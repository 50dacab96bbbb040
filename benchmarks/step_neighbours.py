"""What a neighbour costs a few-millisecond training step, in one process, side by side: where a whole-run
comparison (benchmarks/overhead.py) found the fast workload ~3% slower under haiprof, the candidates one by one.

    python benchmarks/step_neighbours.py [--rounds 10] [--steps 600]       # beside a process
    python benchmarks/step_neighbours.py --after-window [--pairs 4]        # after a profiler window

Beside a process: the fast model (3x512 dense, batch 128, torch's default threads) runs rounds of `--steps` steps
in a rotated order of configurations: bare; beside a process that only sleeps (what being one more process costs);
beside haiprof's real sampler (runtime/sidecar.py) at its 0.5 s interval and at 2 s. Printed per configuration:
the median of the round-median ratios to the bare round beside it, the same for round means, and the training
process's CPU time per step over the bare round's.

After a window: one process times 300 steps, runs a profiler window as haiprof's (record_shapes, a warm-up step
and three recorded, the Chrome trace exported), waits 5 steps and times 300 more; a second process does the same
without the window. Pairs of such processes, printed as after/before each.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn


def model_step():
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layers += [nn.Linear(512, 512), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(128, 512), torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def timed(step, n: int) -> tuple[float, float, float]:
    """Median and mean step time of n steps, and the process's CPU time per step."""
    t, cpu0 = [], time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
    return statistics.median(t), statistics.mean(t), (time.process_time() - cpu0) / n


def neighbour(config: str, root: Path, index: int):
    """Start the round's neighbour; returns its stop function."""
    if config == "sleep":
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        time.sleep(0.5)
        return lambda: (p.kill(), p.wait())
    from component_cost import start_sampler   # a sibling script (run as one: its folder is on sys.path)
    from haiprof.rundir import RunDir
    side = start_sampler(RunDir.create(root / f"round-{index}"), float(config.split()[1].rstrip("s")))
    time.sleep(0.3)
    return side.stop


def beside(rounds: int, steps: int) -> None:
    configs = ["bare", "sleep", "sampler 0.5s", "sampler 2s"]
    step = model_step()
    timed(step, 200)
    per = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="haiprof-neighbours-") as tmp:
        index = 0
        for r in range(rounds):
            for config in configs[r % len(configs):] + configs[:r % len(configs)]:
                stop = neighbour(config, Path(tmp), index) if config != "bare" else None
                index += 1
                try:
                    per[config].append(timed(step, steps))
                finally:
                    if stop is not None:
                        stop()
    bare = per["bare"]
    for config in configs:
        med = statistics.median(m[0] / b[0] for m, b in zip(per[config], bare))
        mean = statistics.median(m[1] / b[1] for m, b in zip(per[config], bare))
        cpu = statistics.median((m[2] - b[2]) * 1e6 for m, b in zip(per[config], bare))
        print(f"{config:13s} median step {statistics.median(m[0] for m in per[config]) * 1e3:.3f} ms  ratio of "
              f"medians {med:.4f}  of means {mean:.4f}  training CPU per step {cpu:+.0f} us", flush=True)


def one_process(window: bool) -> dict:
    """The after-window measurement in this process."""
    from torch.profiler import ProfilerActivity, profile, schedule
    step = model_step()
    for _ in range(20):
        step()
    before = timed(step, 300)[0]
    if window:
        with tempfile.TemporaryDirectory() as d:
            def export(p):
                p.export_chrome_trace(os.path.join(d, "trace.json"))
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=export,
                         schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
                for _ in range(5):
                    step()
                    prof.step()
    for _ in range(5):
        step()
    after = timed(step, 300)[0]
    return {"window": window, "before_ms": before * 1e3, "after_ms": after * 1e3, "ratio": after / before}


def after_window(pairs: int) -> None:
    for _ in range(pairs):
        for window in (True, False):
            r = subprocess.run([sys.executable, __file__, "--one", "1" if window else "0"], capture_output=True,
                               text=True, check=True)
            x = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"{'window' if x['window'] else 'none':6s} before {x['before_ms']:.3f} ms  after "
                  f"{x['after_ms']:.3f} ms  after/before {x['ratio']:.4f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--after-window", action="store_true")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--one", choices=["0", "1"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one_process(args.one == "1")))
        return 0
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    if args.after_window:
        after_window(args.pairs)
    else:
        beside(args.rounds, args.steps)
    print(f"load average at the end {open('/proc/loadavg').read().split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
