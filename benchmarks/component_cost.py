"""What each always-on part of haiprof costs a training step, measured where whole runs cannot resolve it: inside one
process, the parts switched on and off in alternation on the same model and data, many times.

    python benchmarks/component_cost.py [--kinds fast,compute] [--rounds 12] [--steps 60]

Whole runs (benchmarks/overhead.py) carry this machine's run-to-run noise (medians of identical runs differ by up to
30%), so 1% cannot be seen there. Here each round runs the same steps under one configuration, the configurations
follow each other in a rotated order, and each configuration's round median is compared with the bare rounds'
beside it. The parts are haiprof's real ones, as a run wires them:

- recorder: the phase hooks (collectors/phases) writing into the phases.bin appender, whose flush thread
  encodes and writes a chunk every 0.5 s;
- in-process parts: everything a run starts inside the training process, wired by the run's own code
  (runtime/session.Session, defaults, no tracing window): the recorder, the DDP and FSDP observers, the loss
  recorder, the flight recorder watching each step;
- + sampler: those and the side process (runtime/sidecar) sampling the system collectors every 0.5 s.

The optimizer is built once, before any round (a run builds it after the hooks): the recorder is told so, or it
would count each backward as a step as well (collectors/phases `optimizer_made`).

Beside the ratio of round medians, the ratio of the 10th percentiles of all steps, and the training process's CPU
time per step (all its threads: the hooks, the flush thread, torch's workers) minus the bare rounds': work, which
the machine's noise blurs less than wall time.

The model is benchmarks/workloads/timed_steps.py's, with torch's default threads (both cores), as users run it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from haiprof.collectors.phases import PhaseRecorder
from haiprof.rundir import RunDir
from haiprof.runtime.run_setup import RunOptions
from haiprof.runtime.session import Session
from haiprof.runtime.sidecar import Sidecar

CONFIGS = ("bare", "recorder", "in-process parts", "+ sampler")


def workload(kind: str, steps: int):
    torch.manual_seed(0)
    width = 1024 if kind == "compute" else 512
    layers = []
    for _ in range(3):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = [(torch.randn(128, width), torch.randint(0, 10, (128,))) for _ in range(8)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)

    def run(n: int = steps) -> tuple[float, float, list[float]]:
        """The median step time of n steps, the process's CPU time (all its threads) per step, the step times."""
        times, done, cpu0 = [], 0, time.process_time()
        while done < n:
            for x, y in loader:
                t0 = time.perf_counter()
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                times.append(time.perf_counter() - t0)
                done += 1
                if done >= n:
                    break
        return statistics.median(times), (time.process_time() - cpu0) / n, times
    return run


def start_sampler(run_dir, interval_s: float) -> Sidecar:
    """haiprof's real sampler beside this process, once it has taken its first sample: its start-up (an
    interpreter, imports) is a one-off, not a per-step cost."""
    side = Sidecar.start(run_dir, __import__("os").getpid(), interval_s)
    system = run_dir.path / "samples" / "system.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (system.exists() and system.stat().st_size):
        time.sleep(0.05)
    return side


class Parts:
    """haiprof's parts for one round, started as a run starts them and stopped again."""

    def __init__(self, root: Path, config: str, index: int):
        self.run_dir = RunDir.create(root / f"round-{index}")
        self.appender = self.recorder = self.session = self.sidecar = None
        if config == "recorder":
            self.appender = self.run_dir.phase_appender().start()
            self.recorder = PhaseRecorder(self.appender.append).install()
        elif config != "bare":
            opts = RunOptions(script=None, module=None, args=[], trace_steps=0, snapshot_every_min=0)
            self.session = Session(self.run_dir, opts)
            self.session.start(sampler=False)
            self.recorder = self.session.recorder
        if self.recorder is not None:
            self.recorder.optimizer_made = True
        if config.endswith("sampler"):
            self.sidecar = start_sampler(self.run_dir, 0.5)

    def stop(self) -> None:
        if self.sidecar is not None:
            self.sidecar.stop()
        if self.session is not None:
            self.session.teardown.close()
        elif self.recorder is not None:
            self.recorder.uninstall()
            self.appender.close()


def measure(kind: str, rounds: int, steps: int, root: Path) -> None:
    run = workload(kind, steps)
    run(3 * steps)   # warm-up: allocator, threads
    per: dict[str, list[tuple]] = {c: [] for c in CONFIGS}
    index = 0
    for r in range(rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for config in order:
            parts = Parts(root, config, index)
            index += 1
            try:
                run(5)   # the hooks narrow to the root module after step 2: the steady state is measured
                per[config].append(run())
            finally:
                parts.stop()
    bare = per["bare"]
    print(f"{kind}: {rounds} rounds of {steps} steps per configuration, rotated order")
    for config in CONFIGS:
        ratios = [m[0] / b[0] for m, b in zip(per[config], bare)]
        cpu = [(m[1] - b[1]) * 1e6 for m, b in zip(per[config], bare)]
        fast = tenth(per[config]) / tenth(bare)
        print(f"  {config:20s} median step {statistics.median(m[0] for m in per[config]) * 1e3:7.3f} ms   ratio to "
              f"bare {statistics.median(ratios):.4f} ({min(ratios):.3f}-{max(ratios):.3f})   10th percentile "
              f"ratio {fast:.4f}   process CPU per step {statistics.median(cpu):+6.0f} us", flush=True)


def tenth(rounds: list[tuple]) -> float:
    """The 10th percentile of all the configuration's steps: the machine's slow moments (other tenants, frequency)
    only ever add time, so the fast end shows a per-step cost the medians' noise hides."""
    return statistics.quantiles([t for r in rounds for t in r[2]], n=10)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="fast,compute")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    with tempfile.TemporaryDirectory(prefix="haiprof-parts-") as tmp:
        for kind in args.kinds.split(","):
            measure(kind, args.rounds, args.steps, Path(tmp))
    print(f"load average at the end {open('/proc/loadavg').read().split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
