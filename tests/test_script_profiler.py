"""A script that runs its own profiler (sys.setprofile, cProfile) keeps it under haiprof: the flight recorder's
window (torch's Python tracer) would have replaced it and cleared it at the window's end, and haiprof's step
callback's calls were counted as the script's (collectors/script_profile.py)."""
import cProfile
import sys

import pytest

from haiprof.collectors import script_profile


@pytest.mark.parametrize("mode", ["setprofile", "cprofile"])
def test_the_scripts_own_profiler_runs_to_the_end_beside_a_flight_recorder_window(tmp_path, mode):
    from conftest import SCRIPTS, load_summary, run_haiprof, run_python
    py = run_python(SCRIPTS / "self_profiling.py", mode, cwd=tmp_path)
    assert py.returncode == 0 and py.stdout == "still ours: True calls 160\n", py.stdout + py.stderr
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--out", out, SCRIPTS / "self_profiling.py", mode, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == py.stdout   # before: "still ours: False calls 26" (the profiler gone after the window)
    s = load_summary(out)
    flight = [w for w in s["trace_windows"] if w.get("anomaly")]
    said = "".join(open(out / "status.jsonl").read().split("\n"))
    assert flight, (s["trace_windows"], said)   # the window whose Python tracer would replace the script's profiler
    assert "Python functions left out: the script runs its own profiler" in said


def test_a_callback_run_hidden_is_not_seen_by_the_scripts_profile_function_and_cprofile_stays():
    seen = []

    def prof(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    def ours():
        return inner()

    def inner():
        return 1

    sys.setprofile(prof)
    try:
        ours()
        script_profile.hidden(ours)
        assert sys.getprofile() is prof and script_profile.installed() is prof
    finally:
        sys.setprofile(None)
    assert seen.count("ours") == 1 and seen.count("inner") == 1, seen   # the hidden call not counted
    assert script_profile.installed() is None
    cp = cProfile.Profile()
    cp.enable()
    try:
        script_profile.hidden(ours)   # a C profiler: left in place (it cannot be put back from Python as it was)
        assert sys.getprofile() is cp
    finally:
        cp.disable()
