"""Cost of one sample of each hardware collector available on this host (they run in the side process).

    python benchmarks/hw_sample_cost.py [--n 200]

Prints the median and p90 microseconds per sample() and the share of one core that implies at the default
0.5 s sampling interval. Last, the system sampler's scan for the files the tree reads (collectors/open_files.py:
every descriptor's link and the process's maps, part of the system row), in this process after importing torch
(a training process's mappings) with one data file open.
"""
import argparse
import os
import statistics
import time

from haiprof.runtime.hwcollectors import hardware_classes
from haiprof.collectors.system import SystemSampler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args()
    pid = os.getpid()
    for cls in [SystemSampler, *hardware_classes()]:
        ok, reason = cls.available()
        if not ok:
            print(f"{cls.name:<11} unavailable: {reason}")
            continue
        c = cls(pid) if getattr(cls, "needs_pid", False) or cls is SystemSampler else cls()
        c.sample()
        costs = []
        for _ in range(args.n):
            t = time.perf_counter_ns()
            c.sample()
            costs.append(time.perf_counter_ns() - t)
        costs.sort()
        med = statistics.median(costs) / 1e3
        print(f"{cls.name:<11} median {med:8.1f} us  p90 {costs[int(0.9 * len(costs))] / 1e3:8.1f} us  "
              f"= {100 * med / 1e6 / args.interval:.3f}% of one core at {args.interval} s")

    import tempfile
    import torch  # noqa: F401  (its libraries' mappings, as in a training process)
    from haiprof.collectors.open_files import MAPS_EVERY, OpenFiles
    with tempfile.NamedTemporaryFile() as data:
        data.write(b"\0" * (2 << 20))
        data.flush()
        with open(data.name, "rb"):
            scan = OpenFiles()
            scan.scan([pid])
            costs = []
            for _ in range(args.n):
                t = time.perf_counter_ns()
                scan.scan([pid])
                costs.append(time.perf_counter_ns() - t)
    costs.sort()
    med = statistics.median(costs) / 1e3
    maps = sum(1 for _ in open(f"/proc/{pid}/maps"))
    print(f"{'read_files':<11} median {med:8.1f} us  p90 {costs[int(0.9 * len(costs))] / 1e3:8.1f} us  "
          f"mean {statistics.fmean(costs) / 1e3:8.1f} us (maps every {MAPS_EVERY}th) "
          f"= {100 * statistics.fmean(costs) / 1e9 / args.interval:.3f}% of one core at {args.interval} s "
          f"({len(os.listdir(f'/proc/{pid}/fd'))} descriptors, {maps} mappings)")


if __name__ == "__main__":
    main()
