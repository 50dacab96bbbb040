"""A warning python shows once per location is shown once under haiprof too: neither the hooks' removal nor the
report (pandas enters catch_warnings many times), both run in the script's process, may make python forget it."""
import os
import subprocess
import sys

from conftest import REPO, SCRIPTS, in_parallel, run_haiprof

SCRIPT = SCRIPTS / "transparent" / "warns_once.py"


def test_a_warning_repeated_across_the_runs_end_and_at_exit_is_shown_as_python_shows_it(tmp_path):
    plain, r = in_parallel(
        lambda: subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120),
        lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "r", SCRIPT))
    assert plain.returncode == 0 and "UserWarning: x" in plain.stderr, plain.stderr
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_the_code_after_a_profile_block_warns_as_without_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    plain, ours = in_parallel(
        lambda: subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120),
        lambda: subprocess.run([sys.executable, str(SCRIPT), "profile", str(tmp_path / "p")], capture_output=True,
                               text=True, timeout=120, env=env))
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert (tmp_path / "p" / "summary.json").is_file()
