"""`haiprof run` behaves like `python`: argv, sys.path[0], __main__, exit codes, the user's traceback."""
import json
import os
import subprocess
import sys

import pytest

from conftest import HAIPROF, SCRIPTS, in_parallel, load_summary, run_haiprof, run_python


def test_argv_path_and_main_pass_through(run_dir):
    script = SCRIPTS / "argv_echo.py"
    r = run_haiprof("run", "--quiet", "--out", run_dir, script, "a", "--flag", "-x", "--out", "not-ours")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["argv"] == [str(script), "a", "--flag", "-x", "--out", "not-ours"]
    assert got["path0"] == str(SCRIPTS)
    assert got["name"] == "__main__"
    assert r.stderr == ""  # --quiet: nothing of ours
    assert load_summary(run_dir)["exit_code"] == 0


def test_stdout_identical_to_python(tmp_path):
    script = SCRIPTS / "argv_echo.py"
    plain = subprocess.run([sys.executable, str(script), "x"], capture_output=True, text=True, cwd=tmp_path)
    ours = run_haiprof("run", "--quiet", script, "x", cwd=tmp_path)   # no --out: the default directory
    assert ours.stdout == plain.stdout and ours.returncode == plain.returncode == 0
    runs = list((tmp_path / "haiprof-runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("argv_echo-") and (runs[0] / "summary.json").is_file()


def test_module_mode_and_exit_code(run_dir):
    r = run_haiprof("run", "--quiet", "--out", run_dir, "-m", "pkg.mod", "7", cwd=SCRIPTS)
    assert r.returncode == 7, r.stderr
    got = json.loads(r.stdout)
    assert got["name"] == "__main__"
    assert got["argv"][0].endswith(os.path.join("pkg", "mod.py")) and got["argv"][1:] == ["7"]
    assert load_summary(run_dir)["exit_code"] == 7


CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "haiprof")


@pytest.fixture(scope="module")
def exits_runs(tmp_path_factory):
    """exits.py ended each way, under haiprof (its run directory, its result) and under plain python: the exit-code
    test and the traceback test read the same `raise` runs. The `exit3` run goes through the `haiprof` console
    script (the entry point test reads it), the others through `python -m haiprof`."""
    parent = tmp_path_factory.mktemp("exits")
    cache = {}

    def ours(out, mode):
        if mode != "exit3":
            return run_haiprof("run", "--out", out, SCRIPTS / "exits.py", mode)
        return subprocess.run([CONSOLE_SCRIPT, "run", "--out", out, SCRIPTS / "exits.py", mode],
                              capture_output=True, text=True, timeout=180)

    def get(mode):
        if mode not in cache:
            out = parent / mode
            cache[mode] = (out, *in_parallel(lambda: ours(out, mode), lambda: run_python(SCRIPTS / "exits.py", mode)))
        return cache[mode]
    return get


def test_haiprof_console_script_entry_point(exits_runs):
    out, r, _ = exits_runs("exit3")
    assert r.args[0] == CONSOLE_SCRIPT and r.returncode == 3, r.stderr


@pytest.mark.parametrize("mode,code", [("ok", 0), ("exit3", 3), ("raise", 1)])
def test_exit_codes_and_report_written(exits_runs, mode, code):
    out, r, plain = exits_runs(mode)
    assert r.returncode == plain.returncode == code
    s = load_summary(out)
    assert s["exit_code"] == code and s["steps"] == 5
    assert (out / "report.html").is_file()
    assert f"report: {out / 'report.html'}" in r.stderr


def test_user_traceback_not_haiprof_frames(exits_runs):
    out, r, plain = exits_runs("raise")
    tb = r.stderr.split("Traceback (most recent call last):", 1)[1]
    first_frame = tb.strip().splitlines()[0]
    assert "exits.py" in first_frame, tb
    assert "haiprof" not in tb.split("ValueError")[0].replace(str(out.parent), "")
    assert "ValueError: user error from the script" in r.stderr
    assert plain.stderr.strip() in r.stderr  # the very traceback python prints


def test_steps_limit_stops_cleanly(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--steps", "3", "--out", out, SCRIPTS / "exits.py", "ok", "50")
    assert r.returncode == 0, r.stderr
    assert "done" not in r.stdout  # the script was stopped before its end
    s = load_summary(out)
    assert s["steps"] == 3


def test_python_dash_m_haiprof_help():
    r = subprocess.run([*HAIPROF, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "run" in r.stdout and "report" in r.stdout


@pytest.mark.parametrize("opt", ["-u", "-Wignore", "-X", "-O"])
def test_pythons_own_options_given_to_run_say_where_they_go(opt):
    # `python -u train.py` by habit: a one-line error that says where they go, not only "unknown option"
    from haiprof.commands.run import _run_parser, split_target
    from haiprof.errors import UserError
    with pytest.raises(UserError) as e:
        split_target(_run_parser(), [opt, "train.py"])
    assert f"python {opt} -m haiprof run" in str(e.value)
    with pytest.raises(UserError) as e:
        split_target(_run_parser(), ["--bogus", "train.py"])
    assert "python" not in str(e.value) and "see haiprof run --help" in str(e.value)
