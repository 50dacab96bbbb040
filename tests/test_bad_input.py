"""Bad input: one clear line on stderr, non-zero exit, no haiprof traceback, nothing half-written."""
import pytest

from conftest import run_haiprof


def _one_line_error(r):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines and lines[0].startswith("haiprof: error:"), r.stderr
    return lines[0]


def test_missing_script(tmp_path):
    # python's own line and status (test_launch_errors compares them with python's)
    r = run_haiprof("run", "--out", tmp_path / "r", tmp_path / "nope.py")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert f"can't open file '{tmp_path / 'nope.py'}': [Errno 2] No such file or directory" in r.stderr
    assert not (tmp_path / "r").exists()


def test_syntax_error_is_the_users_error_not_ours(tmp_path):
    # The script's own mistake: python's caret display and exit 1 (test_reliability_run compares it byte for
    # byte with python's); nothing is created.
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    r = run_haiprof("run", "--out", tmp_path / "r", bad)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f'File "{bad}", line 1' in r.stderr and r.stderr.rstrip().endswith("SyntaxError: invalid syntax")
    assert not (tmp_path / "r").exists()


def test_missing_module(tmp_path):
    r = run_haiprof("run", "--out", tmp_path / "r", "-m", "no_such_module_xyz")
    assert r.returncode == 1 and r.stderr.endswith(": No module named no_such_module_xyz\n"), r.stderr
    assert not (tmp_path / "r").exists()


def test_report_on_non_run_dir(tmp_path):
    line = _one_line_error(run_haiprof("report", tmp_path))
    assert "not a haiprof run directory" in line
    line = _one_line_error(run_haiprof("report", tmp_path / "absent"))
    assert "no such directory" in line


def test_report_on_corrupt_meta(tmp_path):
    (tmp_path / "meta.json").write_text("{not json")
    line = _one_line_error(run_haiprof("report", tmp_path))
    assert "meta.json" in line


@pytest.mark.parametrize("args,needle", [
    (["run"], "no script"),
    (["run", "--steps", "0", "x.py"], "--steps"),
    (["run", "--bogus", "x.py"], "--bogus"),
    (["frobnicate"], "unknown command"),
])
def test_usage_errors(args, needle):
    r = run_haiprof(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr and needle in r.stderr
