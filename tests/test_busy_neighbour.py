"""A busy neighbour (every core taken by other processes while the run mostly waits) is said as a finding and the
run's measurements are marked noisy; real CPU hogs beside a real run."""
import os
import subprocess
import sys

import pytest

from conftest import SCRIPTS, load_summary, run_haiprof


@pytest.mark.slow
def test_a_busy_machine_is_said_and_marks_the_run_noisy(tmp_path):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        r = run_haiprof("run", "--quiet", "--out", tmp_path / "r", SCRIPTS / "exits.py", "loop", "60")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "r")
    f = [x for x in s["findings"] if x["kind"] == "busy-neighbour"]
    assert f and f[0]["evidence"]["other_cores_mean"] >= 0.25 * f[0]["evidence"]["cores"], s["findings"]
    assert s["noisy"] is True and "busy machine" in s["headline"]
