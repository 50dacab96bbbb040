"""haiprof's in-process cost per training step, measured precisely: the phase hooks installed and removed in
alternation inside one process, on the same model and data, many times.

    python benchmarks/hook_cost.py [--rounds 30] [--steps 100]

Whole-run comparisons (benchmarks/overhead.py) carry the machine's run-to-run noise (8-22% here); this isolates
what the hooks add to each step (DataLoader wrapper, forward hooks on the root modules, backward and optimizer
wrappers, step bookkeeping), in microseconds, and converts it to the ratio for 5 ms and 50 ms steps.

Then the per-call costs of the GPU-only paths, measurable on CPU: the Tensor.to wrapper's fast path (a dtype cast,
installed as on a CUDA machine) and the CUDA-event bookkeeping per timed phase on the training thread
(collectors/cuda_phases.py with a no-op event: pool, record call, pending list; the CUDA calls themselves are
not in it) against the same for resolving a pair (done off the training thread). Last, what the FSDP collective
observer adds to each all-gather / reduce-scatter (blocking, and async with its wait).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from haiprof.collectors.phases import PhaseRecorder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a small, steady step: the difference we look for is microseconds
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(args.steps)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)

    def epoch() -> float:
        t0 = time.perf_counter()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - t0) / args.steps

    records: list = []
    epoch()  # warm-up
    plain, hooked = [], []
    for i in range(args.rounds):
        plain.append(epoch())
        rec = PhaseRecorder(records.append).install()
        try:
            epoch()            # the first steps run with global module hooks, until narrowing: not measured
            hooked.append(epoch())
        finally:
            rec.uninstall()
        records.clear()
    p, h = statistics.median(plain), statistics.median(hooked)
    cost_us = (h - p) * 1e6
    print(f"step without hooks {p * 1e6:.1f} us, with hooks {h * 1e6:.1f} us (medians of {args.rounds} rounds of "
          f"{args.steps} steps): {cost_us:+.1f} us per step")
    for step_ms in (5, 50):
        print(f"  ratio for a {step_ms} ms step: {1 + cost_us / (step_ms * 1e3):.4f}")
    micro()
    micro_collectives()
    return 0


def _per_call_ns(fn, n: int = 20000, rounds: int = 7, clock=time.perf_counter_ns) -> float:
    best = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(n):
            fn()
        best.append((clock() - t0) / n)
    return statistics.median(best)


def micro() -> None:
    from unittest import mock

    from haiprof.collectors.cuda_phases import CudaPhaseTimer

    x = torch.ones(4)
    plain_to = _per_call_ns(lambda: x.to(torch.float64))
    with mock.patch.object(torch.cuda, "is_available", lambda: True):
        rec = PhaseRecorder([].append).install()
    try:
        wrapped_to = _per_call_ns(lambda: x.to(torch.float64))
    finally:
        rec.uninstall()
    print(f"Tensor.to(dtype) on a CPU tensor: {plain_to:.0f} ns plain, {wrapped_to:.0f} ns wrapped "
          f"({wrapped_to - plain_to:+.0f} ns per call)")

    class NoOpEvent:
        def record(self, stream=None): pass
        def synchronize(self): pass
        def query(self): return True
        def elapsed_time(self, end): return 0.0

    out: list = []
    timer = CudaPhaseTimer(torch, out.append, new_event=NoOpEvent, record=lambda ev: None)

    def phase():
        timer.end("forward", timer.begin())

    per_phase = _per_call_ns(phase, n=2000)
    timer._pending.clear()
    n = 2000
    t0 = time.perf_counter_ns()
    for _ in range(n):
        phase()
    t1 = time.perf_counter_ns()
    timer.resolve()
    t2 = time.perf_counter_ns()
    print(f"CUDA-event bookkeeping per timed phase on the training thread: {per_phase:.0f} ns (+ 2 event "
          f"records); resolving a pair off the thread: {(t2 - t1) / n:.0f} ns (+ 1 query, 2 elapsed_time)")


def micro_collectives() -> None:
    """What the FSDP collective observer (collectors/sharded_comm.py, on top of the phase recorder's wrapper, as in
    a run) adds per collective on the training thread: a one-rank gloo group, 4-element tensors, so the collective
    itself is as short as gloo makes it and the difference is the wrappers. In the training thread's CPU time
    (time.thread_time_ns): gloo's own threads and the machine's other load stay out of it."""
    import tempfile

    import torch.distributed as dist

    from haiprof.collectors.sharded_comm import ShardedCommObserver

    with tempfile.TemporaryDirectory() as tmp:   # gloo's FileStore removes its file at the end
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            out, inp = torch.zeros(4), torch.ones(4)
            blocking = lambda: dist.all_gather_single(out, inp)   # noqa: E731
            async_wait = lambda: dist.all_gather_single(out, inp, async_op=True).wait()   # noqa: E731
            cases = {"blocking all_gather_single": blocking, "async all_gather_single + wait": async_wait}
            plain: dict = {k: [] for k in cases}
            watched: dict = {k: [] for k in cases}
            records: list = []
            for _ in range(5):   # alternated: the machine's load moves both alike
                for k, fn in cases.items():
                    plain[k].append(_per_call_ns(fn, n=1000, rounds=3, clock=time.thread_time_ns))
                rec = PhaseRecorder(records.append).install()
                obs = ShardedCommObserver(records.append).install()
                try:
                    for k, fn in cases.items():
                        watched[k].append(_per_call_ns(fn, n=1000, rounds=3, clock=time.thread_time_ns))
                        obs._after_step()
                finally:
                    obs.uninstall()
                    rec.uninstall()
                records.clear()
        finally:
            dist.destroy_process_group()
    for k in cases:
        plain[k], watched[k] = statistics.median(plain[k]), statistics.median(watched[k])
        print(f"{k} (1 rank, gloo), training thread CPU: {plain[k] / 1e3:.1f} us plain, {watched[k] / 1e3:.1f} us "
              f"observed ({(watched[k] - plain[k]) / 1e3:+.1f} us per collective)")


if __name__ == "__main__":
    sys.exit(main())
