"""What the op-level tracing window costs, measured side by side.

Runs examples/launch_bound.py (the worst case for a profiler: thousands of tiny ops per step) under
`haiprof run --trace-steps 0` and under the default window, alternating, and prints medians of:
  * the median step time haiprof reports (traced steps excluded): the window must not leak into it;
  * the window's wall time (profiler start to export end) against a normal step: its one-time cost;
  * the whole run's wall time.

    python benchmarks/trace_window.py [--reps 3] [--steps 40]

--shapes: what recording op shapes (record_shapes, the FLOP count's input) and Python functions (with_stack, the
flight recorder's windows) add to a window, in one process, side by side: the window (collectors/trace_window.py
as haiprof runs it, its profiler's record_shapes forced on or off) over the same model, the four combinations
alternated `--reps` times, medians of: the window's steps (its warm-up step and first two recorded steps,
against 3 x the plain step before it), the export (its last recorded step, whose end writes the trace), and the
trace's size (gzip).

    python benchmarks/trace_window.py --shapes [--reps 5] [--model launch|mlp]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(out: Path, trace_steps: int, steps: int) -> dict:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--trace-steps", str(trace_steps),
                    "--out", str(out), str(REPO / "examples" / "launch_bound.py"), "--steps", str(steps)],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    s = json.loads((out / "summary.json").read_text())
    marks = {}
    from haiprof.rundir import RunDir
    for rec in RunDir(out).read_phase_records():
        if rec[0] in ("@trace-begin", "@trace-end"):
            marks[rec[0]] = rec[1]
    window = (marks["@trace-end"] - marks["@trace-begin"]) / 1e9 if len(marks) == 2 else None
    return {"wall": wall, "step": s["step_time_s"]["median"], "window": window}


def _model(kind: str):
    import torch
    torch.manual_seed(0)
    if kind == "launch":   # examples/launch_bound.py's model: thousands of tiny ops a step, the profiler's worst case
        sys.path.insert(0, str(REPO / "examples"))
        from launch_bound import TinyBlock
        model = torch.nn.Sequential(*[TinyBlock(16) for _ in range(48)], torch.nn.Linear(16, 4))
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    else:                  # examples/slow_moments.py's MLP: a few large matmuls a step
        model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 10))
        x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def _window(step, shapes: bool, stacks: bool, tmp: Path) -> dict:
    """One window after 10 plain steps: (median plain step, the window's steps, the export step, trace bytes)."""
    import torch.profiler as tp
    from haiprof.collectors.trace_window import TraceWindow
    real = tp.profile

    def profile(*args, **kwargs):
        return real(*args, **{**kwargs, "record_shapes": shapes})
    tp.profile = profile
    try:
        win = TraceWindow(tmp, lambda r: None, lambda *a: None, warmup_steps=10, active_steps=3, watch=False,
                          python_stacks=stacks)
        times = []
        n = 0
        while not win.finished:
            t0 = time.perf_counter()
            step()
            n += 1
            win.on_step(n)   # the window starts after 10 steps; the step that ends it exports the trace
            times.append(time.perf_counter() - t0)
        win.close()
    finally:
        tp.profile = real
    size = (tmp / win.trace_name).stat().st_size
    (tmp / win.trace_name).unlink()
    return {"plain": statistics.median(times[:9]), "window": sum(times[10:-1]), "export": times[-1], "bytes": size}


def shapes(reps: int, model: str) -> None:
    import torch
    torch.set_num_threads(1)
    step = _model(model)
    for _ in range(20):
        step()
    combos = [(False, False), (True, False), (False, True), (True, True)]
    res = {c: [] for c in combos}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(reps):
            for c in combos:
                res[c].append(_window(step, *c, Path(tmp)))
    print(f"{model} model, one CPU thread: a window of 1 warm-up + 3 recorded steps, medians of {reps} alternated")
    print(f"{'shapes':>7} {'stacks':>7} {'plain step':>11} {'window steps':>13} {'export':>9} {'trace (gz)':>11}")
    for (sh, st), rs in res.items():
        m = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"{'on' if sh else 'off':>7} {'on' if st else 'off':>7} {m['plain'] * 1e3:>8.2f} ms "
              f"{m['window'] * 1e3:>10.1f} ms {m['export'] * 1e3:>6.0f} ms {m['bytes'] / 1e3:>8.0f} kB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--shapes", action="store_true", help="record_shapes and with_stack on/off, in one process")
    ap.add_argument("--model", choices=("launch", "mlp"), default="launch")
    a = ap.parse_args()
    if a.shapes:
        shapes(a.reps, a.model)
        return
    res = {0: [], 3: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.reps):
            for ts in (0, 3):
                res[ts].append(run(Path(tmp) / f"r{i}-{ts}", ts, a.steps))
    med = {ts: {k: statistics.median(r[k] for r in rs if r[k] is not None) if any(r[k] for r in rs) else None
                for k in ("wall", "step", "window")} for ts, rs in res.items()}
    print(f"launch_bound.py, {a.steps} steps, {a.reps} runs each (medians)")
    print(f"  median step, window off : {med[0]['step'] * 1e3:.1f} ms")
    print(f"  median step, window on  : {med[3]['step'] * 1e3:.1f} ms  (ratio {med[3]['step'] / med[0]['step']:.2f})")
    print(f"  window wall time        : {med[3]['window']:.2f} s = {med[3]['window'] / med[0]['step']:.0f} normal steps"
          f" (5 steps: profiler warm-up, 3 traced, export)")
    print(f"  run wall time off / on  : {med[0]['wall']:.1f} s / {med[3]['wall']:.1f} s"
          f"  (ratio {med[3]['wall'] / med[0]['wall']:.2f})")


if __name__ == "__main__":
    main()
