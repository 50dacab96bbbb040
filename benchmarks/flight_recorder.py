"""The flight recorder (--trace-on-anomaly): what it costs while nothing is slow, and how often it catches a stall.

    python benchmarks/flight_recorder.py cost [--steps 20000] [--reps 7]
    python benchmarks/flight_recorder.py hits [--runs 10] [--clock]
    python benchmarks/flight_recorder.py hidden [--runs 400]

cost: side by side in one process, the step callback haiprof runs after every optimizer step (TraceRequests.on_step,
its first window done) with the flight recorder on and off, over the same number of steps, alternated `--reps`
times; the median difference per step is the recorder's idle cost. It is set against the step time of the
smallest bundled example's model (examples/launch_bound.py: a deep stack of tiny layers, one CPU thread),
measured here too, and against a 1 ms step. And a real loop (that model) stepped under the callback with the
recorder on and off, alternated, medians of the loop time: the ratio is the end-to-end view (noisier).

hits: `haiprof run examples/slow_moments.py` `--runs` times (a checkpoint every 20 steps, one one-off slow step);
a run is a hit when its flight-recorder window's slowest recorded step is a stall (3x the median step or more,
where one was due) and its trace names the checkpoint function. Prints each run and the count.
--clock: the checkpoint on a clock instead (CLOCK_ARGS: every second of time.monotonic(), an 8 MB write and a
150 ms upload, the batch larger from 4.4 s on, so the steps slow down after the fourth checkpoint and the period in steps no longer holds); a hit
is a window placed by time whose slowest traced step is a stall in save_checkpoint (any of its three recorded
steps: a clock's due step is an estimate). Each run also says where the step period alone would have put its
window (the stalls' steps from the run's own slowest steps), and whether that would have caught one.

hidden: the detector alone on synthetic step times, with and without being told the steps a window hid (see
`hidden` below).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLOCK_ARGS = ["--every-s", "1.0", "--slow-after-s", "4.4", "--run-s", "7.5", "--pad-mb", "8", "--upload-ms", "150",
              "--hiccup-step", "-1"]


def _requests(tmp: str, on: bool):
    from haiprof.collectors.anomaly import AnomalyDetector
    from haiprof.collectors.trace_requests import TraceRequests
    from haiprof.collectors.trace_window import TraceWindow
    first = TraceWindow(tmp, lambda r: None, lambda *a: None, active_steps=0)   # the first window: done
    return TraceRequests(tmp, lambda r: None, lambda *a: None, first, anomaly=AnomalyDetector() if on else None)


def _callback_ns(on: bool, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        req = _requests(tmp, on)
        t0 = time.perf_counter_ns()
        for n in range(1, steps + 1):
            req.on_step(n)
        return (time.perf_counter_ns() - t0) / steps


def _model():
    import torch
    sys.path.insert(0, str(REPO / "examples"))
    from launch_bound import TinyBlock
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[TinyBlock(16) for _ in range(48)], torch.nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def _loop_s(step, on: bool, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        req = _requests(tmp, on)
        t0 = time.perf_counter()
        for n in range(1, steps + 1):
            step()
            req.on_step(n)
        return time.perf_counter() - t0


def cost(steps: int, reps: int) -> dict:
    import torch
    torch.set_num_threads(1)
    on, off = [], []
    for _ in range(reps):
        off.append(_callback_ns(False, steps))
        on.append(_callback_ns(True, steps))
    added = statistics.median(a - b for a, b in zip(on, off))
    step = _model()
    for _ in range(20):
        step()
    loop_steps = 200
    loop_on, loop_off = [], []
    for _ in range(reps):
        loop_off.append(_loop_s(step, False, loop_steps))
        loop_on.append(_loop_s(step, True, loop_steps))
    step_ms = statistics.median(loop_off) / loop_steps * 1e3
    out = {"callback_off_ns": statistics.median(off), "callback_on_ns": statistics.median(on), "added_ns": added,
           "launch_bound_step_ms": step_ms, "share_of_launch_bound_step": added / (step_ms * 1e6),
           "share_of_1ms_step": added / 1e6,
           "loop_ratio_on_off": statistics.median(loop_on) / statistics.median(loop_off)}
    print(f"step callback: {out['callback_off_ns']:.0f} ns off, {out['callback_on_ns']:.0f} ns on: the recorder "
          f"adds {added:.0f} ns a step (median of {reps} alternated passes of {steps} steps)")
    print(f"examples/launch_bound.py's step: {step_ms:.2f} ms -> {100 * out['share_of_launch_bound_step']:.4f}% "
          f"of it; of a 1 ms step: {100 * out['share_of_1ms_step']:.3f}%")
    print(f"that model's loop, {loop_steps} steps, recorder on / off: {out['loop_ratio_on_off']:.4f} "
          f"(median of {reps} alternated)")
    return out


def _hit(run: Path) -> tuple[bool, str]:
    s = json.loads((run / "summary.json").read_text())
    flight = [w for w in s.get("trace_windows") or [] if w.get("anomaly")]
    if not flight:
        return False, "no flight-recorder window"
    w = flight[0]
    x = w.get("explained") or {}
    median_ms = (s.get("step_time_s") or {}).get("median", 0) * 1e3
    stall = x.get("step_ms", 0) >= 3 * median_ms
    named = str(x.get("culprit") or "").endswith("save_checkpoint")
    what = (f"window {w['file']}: due at step {w['anomaly']['due_step']}, slowest traced step {x.get('step')} "
            f"{x.get('step_ms', 0):.0f} ms (median step {median_ms:.1f} ms), culprit {x.get('culprit')}; "
            f"verdict {s.get('bottleneck')}")
    return stall and named and x.get("step") == w["anomaly"]["due_step"], what


def _clock_hit(run: Path) -> tuple[bool, str]:
    s = json.loads((run / "summary.json").read_text())
    median_ms = (s.get("step_time_s") or {}).get("median", 0) * 1e3
    stalls = sorted(r["step"] for r in s.get("slowest_steps") or [] if r["time_ms"] >= 3 * median_ms)
    flight = [w for w in s.get("trace_windows") or [] if (w.get("anomaly") or {}).get("period_s")]
    if not flight:
        return False, f"no window placed by time; stalls at {stalls} (median step {median_ms:.1f} ms)"
    w = flight[0]
    x, an = w.get("explained") or {}, w["anomaly"]
    lo, hi = an["recorded_steps"]
    ok = x.get("step_ms", 0) >= 3 * median_ms and str(x.get("culprit") or "").endswith("save_checkpoint") \
        and lo <= x.get("step", -1) <= hi
    # the step period alone: learned from the last three intervals before the window's seen stall
    before = [st for st in stalls if st <= an["seen_step"]][-4:]
    steps_due = before[-1] + before[-1] - before[-2] if len(before) >= 2 else None
    step_way = "n/a" if steps_due is None else \
        f"step {steps_due} ({'a stall' if any(abs(st - steps_due) <= 1 for st in stalls) else 'no stall'})"
    return ok, (f"window {w['file']}: every {an['period_s']:.3g} s, due at step {an['due_step']}, recorded "
                f"{lo}-{hi}, slowest traced step {x.get('step')} {x.get('step_ms', 0):.0f} ms (median step "
                f"{median_ms:.1f} ms), culprit {x.get('culprit')}; stalls at {stalls}; the step period's "
                f"window would be on {step_way}")


def hits(runs: int, clock: bool = False) -> int:
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out = Path(tmp) / f"run{i}"
            r = subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--out", str(out),
                                str(REPO / "examples" / "slow_moments.py"), *(CLOCK_ARGS if clock else [])],
                               capture_output=True, text=True)
            if r.returncode != 0 or not (out / "summary.json").is_file():
                print(f"run {i}: failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
                continue
            ok, what = (_clock_hit if clock else _hit)(out)
            n += ok
            print(f"run {i}: {'hit' if ok else 'MISS'}: {what}")
    print(f"{n} of {runs} runs traced a stall and named its function")
    return n


def _synthetic(seed: int, noise: float, tell: bool, stall_every: int | None, gap: int | None, steps: int = 300):
    """The detector alone on a synthetic run: 10-13 ms steps, a `noise` share of them 3.2-12x slow (a busy
    machine), a 120-160 ms stall every `stall_every` steps; the steps a window touches (the first window's 2-6, a
    window over `gap`..gap+4, each period window's five) are not shown to it, and told as hidden when `tell`.
    Returns the first period ask (the step it was learned at, whether its due step is a stall) or (None, False)."""
    import random
    from haiprof.collectors.anomaly import AnomalyDetector
    rnd, det = random.Random(seed), AnomalyDetector()
    hidden = set(range(2, 7)) | (set(range(gap, gap + 5)) if gap is not None else set())
    for step in range(steps):
        if step in hidden:
            if tell:
                det.hidden(step)
            continue
        ms = 10 * (1 + rnd.random() * 0.3)
        if rnd.random() < noise:
            ms = 10 * rnd.uniform(3.2, 12)
        if stall_every and step % stall_every == 0 and step:
            ms = rnd.uniform(120, 160)
        ask = det.observe(step, int(ms * 1e6))
        if ask is not None and ask.period:
            return ask.seen, bool(stall_every) and ask.due % stall_every == 0
    return None, False


def hidden(runs: int) -> None:
    """Telling the detector which steps a window hid (collectors/anomaly.py `hidden`), against not telling it:
    noise-only runs (how many ask for a window by a period that is not there), and a stall every 20 steps with a
    window over the one at step 80 (when the period is learned, and whether the first window is due on a stall)."""
    for noise in (0.03, 0.06, 0.10):
        for tell in (False, True):
            found = sum(1 for s in range(runs) if _synthetic(s, noise, tell, None, None)[0] is not None)
            print(f"noise {noise:.2f}, no stall, hidden steps {'told' if tell else 'not told'}: "
                  f"{found} of {runs} runs ask for a period window")
    for noise in (0.0, 0.03, 0.06):
        for tell in (False, True):
            res = [_synthetic(s, noise, tell, 20, 76) for s in range(runs)]
            learned = sorted(r[0] for r in res if r[0] is not None)
            print(f"noise {noise:.2f}, a stall every 20 steps, step 80 hidden, {'told' if tell else 'not told'}: "
                  f"{len(learned)} of {runs} learn a period, {sum(r[1] for r in res)} due on a stall, median step "
                  f"learned {learned[len(learned) // 2] if learned else '-'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--steps", type=int, default=20000)
    c.add_argument("--reps", type=int, default=7)
    h = sub.add_parser("hits")
    h.add_argument("--runs", type=int, default=10)
    h.add_argument("--clock", action="store_true", help="the checkpoint on a clock, the step time changing")
    d = sub.add_parser("hidden")
    d.add_argument("--runs", type=int, default=400)
    ns = ap.parse_args()
    if ns.what == "cost":
        cost(ns.steps, ns.reps)
    elif ns.what == "hidden":
        hidden(ns.runs)
    else:
        hits(ns.runs, ns.clock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
