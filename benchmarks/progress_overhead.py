"""Cost of the live status line: the same fast-stepping loop under `haiprof run`, stderr on a pseudo-terminal,
with the status line on and off (HAIPROF_PROGRESS=0), alternated so both see the same machine load.

    python benchmarks/progress_overhead.py [--reps 5] [--steps 5000]

Prints the median in-script loop time of each and their ratio (on / off).
"""
from __future__ import annotations

import argparse
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

LOOP = textwrap.dedent("""
    import sys, time, torch
    torch.set_num_threads(1)  # intra-op thread spinning on a shared 2-core box would swamp the difference
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    t0 = time.perf_counter()
    for _ in range(int(sys.argv[1])):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    print(time.perf_counter() - t0)
""")


def one_run(script: str, steps: int, progress: bool, out_dir: str) -> tuple[float, int]:
    master, slave = pty.openpty()
    env = dict(os.environ, HAIPROF_PROGRESS="1" if progress else "0", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-m", "haiprof", "run", "--out", out_dir, script, str(steps)],
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    tty = b""
    while True:  # drain the terminal so the status writes never block
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        tty += chunk
    os.close(master)
    out = proc.stdout.read().decode()
    proc.wait()
    assert proc.returncode == 0
    redraws = tty.count(b"\r\x1b[Khaiprof: ")
    assert progress or redraws == 0, "status line drawn with HAIPROF_PROGRESS=0"
    return float(out.strip().splitlines()[-1]), redraws


def poll_cost(steps_per_s: int, polls: int = 20) -> float:
    """CPU seconds one status refresh costs when training makes `steps_per_s` steps (6 records each)."""
    from haiprof.runtime.progress import REFRESH_S, PhaseTail
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "phases.jsonl")
        tail = PhaseTail(path)
        t, costs = 1_000_000, []
        per_poll = int(steps_per_s * REFRESH_S)
        for _ in range(polls):
            lines = []
            for _ in range(per_poll):
                lines += [f'["dataloader",{t},{t + 7}]', f'["forward",{t + 9},{t + 30}]',
                          f'["backward",{t + 31},{t + 80}]', f'["@backward",{t + 80},{t + 80}]',
                          f'["optimizer",{t + 81},{t + 95}]', f'["@step",{t + 95},{t + 95}]']
                t += 100
            with open(path, "a") as f:
                f.write("\n".join(lines) + "\n")
            c0 = time.thread_time()
            tail.poll()
            costs.append(time.thread_time() - c0)
    return statistics.median(costs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5000)
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "loop.py")
        with open(script, "w") as f:
            f.write(LOOP)
        on, off, redraws = [], [], []
        for i in range(ns.reps):
            off.append(one_run(script, ns.steps, False, os.path.join(tmp, f"off{i}"))[0])
            t, n = one_run(script, ns.steps, True, os.path.join(tmp, f"on{i}"))
            on.append(t)
            redraws.append(n)
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"steps per run: {ns.steps}, reps: {ns.reps}")
    print(f"loop time, status line off: median {m_off:.3f} s  ({ns.steps / m_off:.0f} steps/s)")
    print(f"loop time, status line on:  median {m_on:.3f} s  ({ns.steps / m_on:.0f} steps/s)")
    print(f"status line redraws per run (on): median {statistics.median(redraws):.0f}")
    print(f"ratio on/off: {m_on / m_off:.3f}")
    from haiprof.runtime.progress import REFRESH_S
    for rate in (10, 1000, 10000):
        c = poll_cost(rate)
        print(f"status refresh at {rate} steps/s: median {c * 1e3:.2f} ms CPU per refresh "
              f"= {100 * c / REFRESH_S:.2f}% of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
