"""The flight recorder's job store polling (collectors/job_share.py): requests a second on the job's TCPStore
against the world size, a read every flush (before) and every `poll_every(world)` flushes (now).

One real torch.distributed.TCPStore (the agent's, as torchrun hosts it) and `world` store clients (the ranks),
spread over --procs processes, a thread each: every rank runs JobShare.exchange once a flush (every FLUSH_S,
at its own phase; one thread a process drives its ranks in flush order) for --seconds, with no window asked for
(the steady state: one read a poll). Each client counts its round trips and times them; printed per world size
and policy: the job's requests a second, the median and p99 round trip, how far ahead a window is placed
(JobShare.lead_s), and how far behind its flush schedule a process fell at worst (its clients' calls queue
behind each other: the machine's limit, not the store's).

    python benchmarks/job_store_poll.py [--worlds 16,128,1000] [--seconds 6] [--procs 4]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import socket
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class _Timed:
    """A store client whose round trips are counted and timed (seconds)."""

    def __init__(self, store, times: list):
        self._store, self._times = store, times

    def __getattr__(self, name):
        call = getattr(self._store, name)

        def timed(*a):
            t0 = time.perf_counter()
            try:
                return call(*a)
            finally:
                self._times.append(time.perf_counter() - t0)
        return timed


def _ranks(port: int, ranks: list, world: int, every_flush: bool, seconds: float, out) -> None:
    """This process's ranks, each with its own store client, driven by one thread in flush order (a heap of
    due times): a thread a rank would measure the GIL, not the store."""
    import heapq

    from torch.distributed import TCPStore

    from haiprof.collectors.job_share import FLUSH_S, JobShare
    times: list = []
    shares = []
    for r in ranks:
        store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
        share = JobShare(lambda s=store, r=r: (_Timed(s, times), "haiprof/bench/", r), lambda *a: None,
                         world_size=1 if every_flush else world)
        shares.append(share)
    start = time.monotonic() + 0.5
    stop = start + seconds
    due = [(start + random.random() * FLUSH_S, i) for i in range(len(shares))]   # each rank at its own phase
    heapq.heapify(due)
    late = 0.0
    while due and due[0][0] < stop:
        t, i = heapq.heappop(due)
        late = max(late, time.monotonic() - t)
        time.sleep(max(0.0, t - time.monotonic()))
        shares[i].exchange(lambda ask, rank: None)
        heapq.heappush(due, (t + FLUSH_S, i))
    out.put((times, late))


def measure(world: int, every_flush: bool, seconds: float, procs: int) -> dict:
    from torch.distributed import TCPStore

    from haiprof.collectors.job_share import JobShare
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    ctx = mp.get_context("spawn")   # not fork: this process runs the store's server thread
    q = ctx.Queue()
    groups = [list(range(world))[i::procs] for i in range(min(procs, world))]
    ps = [ctx.Process(target=_ranks, args=(port, g, world, every_flush, seconds, q)) for g in groups]
    for p in ps:
        p.start()
    got = [q.get(timeout=seconds + 300) for _ in ps]
    for p in ps:
        p.join()
    times = [t for ts, _ in got for t in ts]
    late = max(lt for _, lt in got)
    del master
    times.sort()
    share = JobShare(lambda: None, lambda *a: None, world_size=1 if every_flush else world)
    return {"world": world, "policy": "every flush" if every_flush else f"every {share.every} flush(es)",
            "rps": len(times) / seconds, "p50_ms": statistics.median(times) * 1e3 if times else None,
            "p99_ms": times[int(0.99 * (len(times) - 1))] * 1e3 if times else None, "lead_s": share.lead_s,
            "late_s": late}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", default="16,128,1000")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--procs", type=int, default=4)
    a = ap.parse_args()
    print(f"{'ranks':>6} {'policy':>20} {'requests/s':>11} {'p50 ms':>7} {'p99 ms':>7} {'lead s':>7} "
          f"{'behind s':>9}")
    for world in (int(w) for w in a.worlds.split(",")):
        for every_flush in (True, False):
            m = measure(world, every_flush, a.seconds, a.procs)
            print(f"{m['world']:>6} {m['policy']:>20} {m['rps']:>11.0f} {m['p50_ms']:>7.2f} {m['p99_ms']:>7.2f} "
                  f"{m['lead_s']:>7.1f} {m['late_s']:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
