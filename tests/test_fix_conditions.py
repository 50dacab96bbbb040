"""A fix's speedup is measured against a baseline taken in the same conditions: a baseline set up otherwise (torch
threads, CPU affinity, thread environment) is re-measured right before, saying why; one recorded beside other
load is marked; `--interleave N` alternates baseline and fixed passes and gives the ratio with its spread. Real
torch, real subprocesses; the pure parts (analyzers/conditions.py, fix_gain.interleaved) on numbers."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCRIPTS, load_summary, run_haiprof
from haiprof.analyzers import conditions, fix_gain

WORKLOAD = SCRIPTS / "fix_workload.py"
ARGS = ["--steps", "8", "--latency-ms", "1"]


def test_setup_differences_name_what_changed():
    a = {"host": "h", "cpu_affinity": [0, 1, 2, 3], "torch_threads": 4, "env": {"OMP_NUM_THREADS": "4"},
         "torch": "2.5"}
    b = {"host": "h", "cpu_affinity": [0], "torch_threads": 1, "env": {}, "torch": "2.5", "gpus": []}
    assert conditions.setup_differences(a, b) == [
        "CPU affinity 0-3 (4 CPUs) -> 0 (1 CPUs)", "torch threads 4 -> 1", "OMP_NUM_THREADS 4 -> unset"]
    assert conditions.setup_differences(a, dict(a)) == []
    assert conditions.setup_differences({}, b) == []   # an older run recorded nothing: nothing to compare


def test_load_difference_needs_half_a_core_and_a_quarter_of_the_machine():
    assert conditions.load_difference({"other_cores": 1.9, "cores": 2}, {"other_cores": 0.2, "cores": 2}) == \
        "other processes took 1.9 -> 0.2 of 2 cores"
    assert conditions.load_difference({"other_cores": 0.5, "cores": 2}, {"other_cores": 0.2, "cores": 2}) is None
    # on 16 cores a quarter of the machine is 4 cores: 3 more cores busy elsewhere is not yet a difference
    assert conditions.load_difference({"other_cores": 3.0, "cores": 16}, {"other_cores": 0.0}) is None
    assert conditions.load_difference({"other_cores": 5.0, "cores": 16}, {"other_cores": 0.0}) is not None


def test_cpu_wait_difference_is_the_stretch_of_the_threads_cpu_work():
    assert conditions.wait_difference({"cpu_wait_share": 0.7}, {"cpu_wait_share": 0.36}) == (
        "the training thread's CPU work took 3.3x -> 1.6x its CPU time (waiting for a CPU 70% -> 36% of its "
        "runnable time)")
    # ten points at the top of a saturated host stretch the step more than ten points of a quiet one
    assert conditions.wait_difference({"cpu_wait_share": 0.8}, {"cpu_wait_share": 0.7}) is not None
    assert conditions.wait_difference({"cpu_wait_share": 0.02}, {"cpu_wait_share": 0.12}) is None
    assert conditions.wait_difference({"cpu_wait_share": None}, {"cpu_wait_share": 0.9}) is None


def test_other_load_is_the_hosts_busy_cores_less_the_runs_own():
    samples = [{"t_ns": 0, "cpu_cores_pct": [0.0, 0.0]}] + [
        {"t_ns": i, "cpu_cores_pct": [100.0, 90.0], "cpu_main_pct": 60.0, "cpu_children_pct": 10.0}
        for i in range(1, 6)]
    load = conditions.other_load(samples)
    assert load["other_cores"] == pytest.approx(1.2) and load["cores"] == 2 and load["samples"] == 5
    assert conditions.other_load(samples[:2]) is None


def test_interleaved_ratio_is_the_median_pair_with_its_spread():
    il = fix_gain.interleaved([(0.030, 0.020), (0.036, 0.020), (0.020, 0.020), (None, 0.02)])
    assert il["pairs"] == 3 and il["ratios"] == [1.5, 1.8, 1.0]
    assert il["speedup"] == 1.5 and (il["min"], il["max"]) == pytest.approx((1.0, 1.8))
    assert il["spread"] == pytest.approx(0.8 / 1.5)
    # a fix the pairs measured slower is a regression, whatever this run said against one baseline pass
    g = fix_gain.with_interleaved({"applied": ["amp"], "regression": False, "message": None},
                                  fix_gain.interleaved([(0.020, 0.025), (0.020, 0.024)]))
    assert g["regression"] and "median of 2 interleaved pass pairs" in g["message"]


def _plain_baseline(parent, env=None, **kw):
    r = run_haiprof("run", "--quiet", "--out", parent / "base", WORKLOAD, *ARGS, env=env, **kw)
    assert r.returncode == 0, r.stderr
    return parent / "base"


def _fixed(parent, *extra):
    r = run_haiprof("run", "--fix", "fused-optim", *extra, "--out", parent / "fixed", WORKLOAD, *ARGS, timeout=400)
    assert r.returncode == 0, r.stderr
    assert [x for x in r.stdout.splitlines() if x.startswith("PROBE ")] == r.stdout.splitlines()[-1:]  # one run's
    return load_summary(parent / "fixed"), r


def test_a_baseline_with_other_torch_threads_and_fewer_cpus_is_re_measured_and_says_why(tmp_path):
    """The baseline ran with OMP_NUM_THREADS=1 and (where there are two CPUs) pinned to one: both are named, and
    the baseline is re-measured as the fixed run is set up. One baseline for both: each difference alone already
    triggers the re-measure (conditions.setup_differences, tested on numbers above)."""
    cpus = os.sched_getaffinity(0)
    one = min(cpus)
    pin = (lambda: os.sched_setaffinity(0, {one})) if len(cpus) >= 2 else None
    base = _plain_baseline(tmp_path, env={"OMP_NUM_THREADS": "1"}, preexec_fn=pin)
    # (the suite's own environment may carry other recorded variables, e.g. one torch's inductor set in-process)
    assert json.loads((base / "meta.json").read_text())["conditions"]["env"].get("OMP_NUM_THREADS") == "1"
    s, r = _fixed(tmp_path)
    why = "set up under other conditions ("
    assert why in r.stderr and "OMP_NUM_THREADS 1 -> unset" in r.stderr and "re-measuring a" in r.stderr, r.stderr
    assert why in s["fixes"]["remeasured"] and "baseline re-measured right before this run" in r.stderr
    if pin:
        assert f"CPU affinity {one} (1 CPUs) -> " in s["fixes"]["remeasured"], s["fixes"]
    used = s["comparison"]["baseline_run"]
    assert used != str(base.resolve()) and "-baseline" in used
    # the pass ran as the fixed run does: same threads, same environment, same CPUs
    assert load_summary(used)["conditions"]["env"] == s["conditions"]["env"]
    assert load_summary(used)["conditions"]["torch_threads"] == s["conditions"]["torch_threads"]
    assert load_summary(used)["conditions"]["cpu_affinity"] == s["conditions"]["cpu_affinity"]


def test_a_baseline_recorded_beside_cpu_hogs_is_not_used_silently(tmp_path):
    """The baseline ran beside processes keeping every core busy; the fixed run without them. The load each run
    had beside it is recorded, and a difference marks the comparison with both figures (the machine here may be
    loaded by others as well: the mark must follow the recorded loads, whichever they are)."""
    fast = ["--sample-interval", "0.1"]   # enough samples of a short run
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        r = run_haiprof("run", "--quiet", *fast, "--out", tmp_path / "base", WORKLOAD, *ARGS)
        assert r.returncode == 0, r.stderr
        base = tmp_path / "base"
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    before = load_summary(base)["conditions"]
    assert before["other_cores"] >= 0.5 * before["cores"], before   # the hogs were seen
    r = run_haiprof("run", "--fix", "fused-optim", *fast, "--out", tmp_path / "fixed", WORKLOAD, *ARGS,
                    timeout=400)
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "fixed")
    assert s["comparison"]["baseline_run"] == str(base.resolve())   # same set-up: not re-measured
    assert 0 < before["cpu_wait_share"] < 1 and 0 <= s["conditions"]["cpu_wait_share"] < 1
    diffs = conditions.differences(before, s["conditions"])   # the same set-up: only the load can differ
    marked = [f for f in s["findings"] if f["kind"] == "fix-conditions"]
    if diffs:
        assert marked and marked[0]["evidence"]["differences"] == diffs, s["findings"]
        assert all(d in marked[0]["message"] for d in diffs) and "--interleave" in marked[0]["message"]
        assert "fix-conditions (moderate): the baseline ran under other conditions (" in r.stderr, r.stderr
    else:   # the machine stayed as busy as the hogs made it: the baseline's noise is still said
        assert not marked and s["fixes"]["gain"].get("noisy"), s["fixes"]["gain"]


def test_interleaved_passes_give_the_speedup_with_its_spread(tmp_path):
    s, r = _fixed(tmp_path, "--interleave", "2", "--steps", "6")
    fx = s["fixes"]
    pairs = fx["interleaved_runs"]
    assert len(pairs) == 2
    for p in pairs:   # the fixed passes applied the fix, the baseline passes nothing
        assert "fixes" not in load_summary(p["baseline_run"]) or not load_summary(p["baseline_run"])["fixes"]
        res = load_summary(p["fixed_run"])["fixes"]["results"]
        assert [(x["id"], x["status"]) for x in res] == [("fused-optim", "applied")]
    # in run order A B A B, then this run against the last A
    order = [d for p in pairs for d in (p["baseline_run"], p["fixed_run"])] + [tmp_path / "fixed"]
    starts = [json.loads((Path(d) / "meta.json").read_text())["start_time"] for d in order]
    assert starts == sorted(starts)
    assert s["comparison"]["baseline_run"] == pairs[-1]["baseline_run"]
    il = fx["gain"]["interleaved"]
    assert il["pairs"] == 2 and len(il["ratios"]) == 2 and il["min"] <= il["speedup"] <= il["max"]
    assert il["spread"] == pytest.approx((il["max"] - il["min"]) / il["speedup"])
    # the pairs' median where they resolve the effect; where they spread wider than it, "no measurable change"
    said = ("speedup, interleaved (2 baseline/fixed pass pairs" if il["measurable"] else
            "interleaved (2 baseline/fixed pass pairs): no measurable change")
    assert il["measurable"] == (il["spread"] <= abs(max(il["speedup"], 1 / il["speedup"]) - 1))
    assert said in r.stderr and "spread" in r.stderr, r.stderr
    assert "interleaved A/B (2 pass pairs" in (tmp_path / "fixed" / "report.html").read_text()


def test_interleaved_passes_are_longer_for_a_fix_that_starts_workers():
    from haiprof.runtime.fixrun import DIAGNOSIS_STEPS, WORKER_PASS_STEPS, pass_steps
    # workers deliver batches in rounds: a 20-step pass holds too few of them to time the pool's steady rate
    assert pass_steps(None, {"prefetch": None}) == WORKER_PASS_STEPS > DIAGNOSIS_STEPS
    assert pass_steps(None, {"prefetch": None, "amp": None}) == WORKER_PASS_STEPS
    assert pass_steps(None, {"amp": None}) == DIAGNOSIS_STEPS
    assert pass_steps(8, {"prefetch": None}) == 8   # the user's --steps wins


def test_interleave_needs_fix(tmp_path):
    r = run_haiprof("run", "--interleave", "2", "--out", tmp_path / "r", WORKLOAD)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--interleave" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_a_baseline_is_checked_against_the_conditions_it_was_launched_under(tmp_path):
    """The check before a fixed run starts compares what its launch sees without torch (runtime/conditions.py
    launch_conditions) with the baseline's: its launch conditions where it has them, not the ones its script
    left at its `import torch` (an OMP_NUM_THREADS the script set itself, torch's threads then); a baseline of an
    older haiprof, with only those, is compared on the keys both have."""
    import time

    from haiprof.rundir import RunDir
    from haiprof.runtime import fixrun
    from haiprof.runtime.conditions import launch_conditions
    now = launch_conditions({"host": "h", "cpu_count": 2})
    assert "torch_threads" not in now and now["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    rd = RunDir(tmp_path / "base")
    rd.path.mkdir()
    rd.write_meta({"end_time": time.time()})            # a baseline recorded without conditions: nothing to check
    assert fixrun._why_remeasure((rd, {}), now) is None
    script_set = {**now, "torch_threads": 1, "env": {**now["env"], "OMP_NUM_THREADS": "1"}}
    rd.write_meta({"end_time": time.time(), "launch_conditions": now, "conditions": script_set})
    assert fixrun._why_remeasure((rd, {}), now) is None   # the script's own settings are the same in both runs
    rd.write_meta({"end_time": time.time(), "launch_conditions": {**now, "cpu_count": 1}, "conditions": now})
    why = fixrun._why_remeasure((rd, {}), now)
    assert why.startswith("set up under other conditions") and "CPU count 1 -> 2" in why, why
    rd.write_meta({"end_time": time.time(), "conditions": script_set})   # an older haiprof's baseline
    why = fixrun._why_remeasure((rd, {}), now)
    assert "OMP_NUM_THREADS 1 -> unset" in why and "threads" not in why.replace("OMP_NUM_THREADS", ""), why
