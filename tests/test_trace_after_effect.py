"""The tracing window leaves no after-effect (issue 11): on a host-bound CPU workload, the steps after the window
cost what the same steps cost in a run without it (`--trace-steps 0`).

By the script's own clock, in CPU time of the training thread: wall time on a shared machine moves by 2x with the
load of other processes, CPU time does not. The bounds are generous (a profiler left attached costs far more:
+40% per step on GPU, 2x or more with RecordFunction observers left on) and the comparison uses medians."""
import json
import statistics

from conftest import SCRIPTS, in_parallel, run_haiprof, phase_records

STEPS = 120
ATTEMPTS = 3


def _run(tmp_path, name, *opts):
    out = tmp_path / name
    # without the flight recorder: a loaded machine's slow stretch would open a window of its own in either run
    r = run_haiprof("run", "--quiet", "--no-trace-on-anomaly", *opts, "--out", out, SCRIPTS / "host_bound_steps.py",
                    STEPS)
    assert r.returncode == 0, r.stderr
    own = json.loads(r.stdout.strip().splitlines()[-1])
    recs = phase_records(out)
    marks = sorted(rec[1] for rec in recs if rec[0] == "@step")
    window = [rec[1] for rec in recs if rec[0] in ("@trace-begin", "@trace-end")]
    return own["cpu_ns"], marks, window


def _ratios(tmp_path, attempt: int) -> tuple[float, float]:
    # side by side: both runs see the same neighbours (and each has a core of its own on a 2-core machine)
    (cpu, marks, window), (cpu0, _, window0) = in_parallel(
        lambda: _run(tmp_path, f"window-{attempt}"), lambda: _run(tmp_path, f"off-{attempt}", "--trace-steps", "0"))
    assert len(cpu) == len(cpu0) == len(marks) == STEPS and window0 == []
    begin, end = window
    # Step k ends at marks[k]; the window covers the profiler's warm-up, 3 traced steps and the export.
    first_after = next(k for k, t in enumerate(marks) if t > end) + 2   # skip the step that ran the export
    before = next(k for k, t in enumerate(marks) if t >= begin)
    assert before == 2 and first_after <= 10
    after = statistics.median(cpu[first_after:])
    same_steps_off = statistics.median(cpu0[first_after:])
    early_off = statistics.median(cpu0[before:first_after])     # the window's steps, without the window
    return after / same_steps_off, after / early_off


def test_steps_after_the_window_cost_what_they_cost_without_it(tmp_path):
    # A left-over profiler slows every later step of every attempt; a busy neighbour on a 2-core machine slows
    # one attempt. So up to ATTEMPTS pairs, and the best one must be within the bounds.
    seen = []
    for attempt in range(ATTEMPTS):
        same, early = _ratios(tmp_path, attempt)
        seen.append((round(same, 3), round(early, 3)))
        if same <= 1.25 and early <= 1.5:
            return
    raise AssertionError(f"steps after the tracing window cost more in every attempt (after/off, after/early): "
                         f"{seen}")
