"""Never break the training, never lose a run: chdir, fork, threads, output directories, python's semantics,
hang-ups and Ctrl-C during teardown. Each script's own output and exit code are compared with plain python's."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HAIPROF, SCRIPTS, in_parallel, load_summary, run_haiprof, terminal_signals

REL = SCRIPTS / "reliability"


def _python(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _one_line_error(r) -> str:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("haiprof: error: "), r.stderr
    return lines[0]


# -- 1, 2, 7: the script's own output and exit code equal python's --------------------------------------------
def test_chdir_in_the_script_does_not_break_training(tmp_path):
    away = tmp_path / "elsewhere"
    away.mkdir()
    # A relative run directory (the default is haiprof-runs/...) must not follow the script to its new cwd.
    ours, plain = in_parallel(lambda: run_haiprof("run", "--out", "r", REL / "chdir_train.py", away, cwd=tmp_path),
                              lambda: _python(REL / "chdir_train.py", away, cwd=tmp_path))
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout) == (0, plain.stdout)
    assert "file still found: True True" in ours.stdout
    s = load_summary(tmp_path / "r")
    assert s["steps"] == 12 and s["exit_code"] == 0
    assert (tmp_path / "r" / "report.html").is_file()
    assert not list(away.iterdir()), "haiprof wrote into the script's new working directory"


def test_forked_child_neither_hangs_nor_finalizes(tmp_path):
    out = tmp_path / "r"
    ours, plain = in_parallel(lambda: run_haiprof("run", "--out", out, REL / "fork_train.py", timeout=150),
                              lambda: _python(REL / "fork_train.py"))
    assert ours.returncode == plain.returncode == 0
    assert sorted(ours.stdout.splitlines()) == sorted(plain.stdout.splitlines())
    assert "child status 0" in ours.stdout
    assert ours.stderr.count(str(out / "report.html")) == 1, ours.stderr   # one verdict, the parent's
    s = load_summary(out)
    assert s["steps"] == 14, "the child's step (or teardown) leaked into the parent's run"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["pid"] != 0 and meta["exit_code"] == 0


def test_steps_in_non_daemon_threads_are_collected(tmp_path):
    out = tmp_path / "r"
    ours, plain = in_parallel(lambda: run_haiprof("run", "--out", out, REL / "thread_train.py"),
                              lambda: _python(REL / "thread_train.py"))
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout)
    assert ours.stdout.splitlines() == ["main body over", "thread done"]
    assert load_summary(out)["steps"] == 20


# -- 3, 4, 5: the output directory ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_into_empty(tmp_path_factory):
    """exits.py under `haiprof run --out DIR` where DIR exists and is empty: (DIR, result). Only read; a test that
    needs the earlier run somewhere of its own copies it."""
    out = tmp_path_factory.mktemp("empty-out") / "empty"
    out.mkdir()
    return out, run_haiprof("run", "--quiet", "--out", out, SCRIPTS / "exits.py", "ok")


def test_out_onto_an_earlier_run_is_refused_and_the_run_kept(run_into_empty, tmp_path):
    out = tmp_path / "r"
    assert run_into_empty[1].returncode == 0, run_into_empty[1].stderr
    shutil.copytree(run_into_empty[0], out)   # an earlier haiprof run, as it left its directory
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    r = run_haiprof("run", "--out", out, SCRIPTS / "exits.py", "ok")
    line = _one_line_error(r)
    assert "not empty" in line and "earlier haiprof run" in line
    assert r.stdout == "", "the script ran although its run directory was refused"
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_out_dot_never_touches_the_users_files(tmp_path):
    mine = {"meta.json": '{"mine": 1}\n', "summary.json": "[]\n", "losses.json": "{}\n", "notes.txt": "x\n"}
    for name, text in mine.items():
        (tmp_path / name).write_text(text)
    r = run_haiprof("run", "--out", ".", SCRIPTS / "exits.py", "ok", cwd=tmp_path)
    assert "other files" in _one_line_error(r) or "earlier haiprof run" in _one_line_error(r)
    assert {n: (tmp_path / n).read_text() for n in mine} == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(mine)


def test_empty_existing_out_is_used(run_into_empty):
    out, r = run_into_empty
    assert r.returncode == 0 and load_summary(out)["steps"] == 5


def test_runs_started_together_get_their_own_directories(tmp_path):
    procs = [subprocess.Popen([*HAIPROF, "run", "--quiet", "--trace-steps", "0", str(SCRIPTS / "exits.py"), "ok"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    runs = sorted((tmp_path / "haiprof-runs").iterdir())
    assert len(runs) == 3, runs
    pids = {json.loads((d / "meta.json").read_text())["pid"] for d in runs}
    assert len(pids) == 3
    assert all(load_summary(d)["steps"] == 5 for d in runs)


def test_claim_new_is_unique_within_one_second(tmp_path):
    from haiprof.rundir import RunDir
    dirs = [RunDir.claim_new(tmp_path, "same").path for _ in range(5)]
    assert len(set(dirs)) == 5 and all(d.is_absolute() and d.is_dir() for d in dirs)


@pytest.mark.parametrize("kind", ["file", "under-a-file", "proc"])
def test_unusable_out_fails_before_the_script_starts(tmp_path, kind):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me\n")
    out = {"file": a_file, "under-a-file": a_file / "sub", "proc": Path("/proc/haiprof-test/x")}[kind]
    r = run_haiprof("run", "--out", out, SCRIPTS / "exits.py", "ok")
    _one_line_error(r)
    assert r.stdout == ""
    assert a_file.read_text() == "keep me\n"


# -- 6: python's semantics --------------------------------------------------------------------------------------
def test_script_globals_and_paths_match_python(tmp_path):
    link_dir = tmp_path / "links"
    link_dir.mkdir()
    link = link_dir / "show_main.py"
    link.symlink_to(REL / "show_main.py")
    rel = os.path.relpath(link, tmp_path)
    ours, plain = in_parallel(lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "r", rel, "a", cwd=tmp_path),
                              lambda: _python(rel, "a", cwd=tmp_path))
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout
    assert f"path0 {REL}" in ours.stdout          # the real file's directory, not the link's
    assert f"file {link}" in ours.stdout          # absolute, not resolved
    assert "builtins module loader SourceFileLoader __main__" in ours.stdout
    assert "main is me True" in ours.stdout


def test_syntax_error_is_reported_as_python_does(tmp_path):
    ours = run_haiprof("run", "--out", tmp_path / "r", REL / "syntax_error.py")
    plain = _python(REL / "syntax_error.py")
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 1 and "^" in plain.stderr


def test_dash_m_finds_modules_in_the_current_directory(tmp_path):
    # The console script's own directory is sys.path[0] for haiprof; python -m puts the cwd there.
    exe = Path(sys.executable).with_name("haiprof")
    if not exe.exists():
        pytest.skip("the haiprof console script is not installed beside this python")
    shutil.copytree(SCRIPTS / "pkg", tmp_path / "pkg")
    ours, plain = in_parallel(
        lambda: subprocess.run([str(exe), "run", "--quiet", "--out", str(tmp_path / "r"), "-m", "pkg.mod", "4"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120),
        lambda: _python("-m", "pkg.mod", "4", cwd=tmp_path))
    assert ours.returncode == plain.returncode == 4, ours.stderr
    assert json.loads(ours.stdout) == json.loads(plain.stdout)


def test_python_dash_m_haiprof_keeps_the_users_files_to_the_users_script(tmp_path):
    """`python -m haiprof` puts the working directory first on sys.path: a user's orjson.py there stopped haiprof
    before the script ran (exit 1, python: 0), a pandas.py lost the report; and checking `-m pkg.mod` imported
    pkg in haiprof's own process, so pkg/__init__.py ran twice."""
    shutil.copytree(SCRIPTS / "pkg", tmp_path / "pkg")
    (tmp_path / "pkg" / "__init__.py").write_text("print('pkg/__init__ ran')\n")
    for name in ("orjson", "pandas", "msgspec"):   # haiprof's dependencies, standing in the user's folder
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py')\n")
    ours, plain = in_parallel(
        lambda: subprocess.run([*HAIPROF, "run", "--quiet", "--trace-steps", "0", "--out", str(tmp_path / "r"),
                                "-m", "pkg.mod", "4"], cwd=tmp_path, capture_output=True, text=True, timeout=120),
        lambda: _python("-m", "pkg.mod", "4", cwd=tmp_path))
    assert (ours.returncode, plain.returncode) == (4, 4), ours.stderr
    assert ours.stdout == plain.stdout and plain.stdout.startswith("pkg/__init__ ran\n{"), ours.stdout
    assert load_summary(tmp_path / "r")["exit_code"] == 4 and (tmp_path / "r" / "report.html").is_file()


# -- 8: hang-ups and Ctrl-C during teardown ---------------------------------------------------------------------
def _start_loop(out):
    proc = subprocess.Popen([*HAIPROF, "run", "--out", str(out), str(SCRIPTS / "exits.py"), "loop", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_signals)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    return proc


def test_sighup_writes_report(tmp_path):
    out = tmp_path / "r"
    # plain python's loop, started beside haiprof's (its torch import overlaps ours)
    plain = subprocess.Popen([sys.executable, str(SCRIPTS / "exits.py"), "loop", "100000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_signals)
    proc = None
    try:
        proc = _start_loop(out)
        proc.send_signal(signal.SIGHUP)
        proc.communicate(timeout=300)   # a hang guard, not a timing: writing the report is slow on a loaded machine
        assert plain.stdout.readline().strip() == "ready"
        plain.send_signal(signal.SIGHUP)
        plain.communicate(timeout=30)
    finally:   # neither loop outlives a failed test (each would train for 100000 steps)
        for p in (plain, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
    assert proc.returncode == plain.returncode == -signal.SIGHUP
    s = load_summary(out)
    assert s["exit_code"] == 128 + signal.SIGHUP and s["steps"] >= 4
    assert (out / "report.html").is_file()


def _start_until_teardown(out, *options):
    """Run a script to its end and return once teardown has begun (meta.json gets its end_time before the report
    is written)."""
    proc = subprocess.Popen([*HAIPROF, "run", *options, "--out", str(out), str(SCRIPTS / "exits.py"), "ok", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_signals)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if json.loads((out / "meta.json").read_text()).get("end_time"):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.002)
    return proc


def _interrupt_teardown(out, presses):
    """Press Ctrl-C `presses` times once teardown has begun."""
    proc = _start_until_teardown(out)
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=120)
    return proc, err


def test_sigterm_while_the_report_is_written_finishes_it_then_ends_by_sigterm(tmp_path):
    # torchrun, slurm and kubernetes send SIGTERM at a job's end: the report is finished (and the rebuild command
    # named in case a SIGKILL follows), then the process ends by the signal, as it would have.
    out = tmp_path / "r"
    proc = _start_until_teardown(out, "--quiet")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGTERM, err
    assert f"rebuild it with: haiprof report {out}" in err
    assert (out / "report.html").is_file() and load_summary(out)["steps"] == 400


def test_ctrl_c_during_teardown_still_finishes_the_report(tmp_path):
    out = tmp_path / "r"
    proc, err = _interrupt_teardown(out, 1)
    assert proc.returncode == 0, err
    assert "finishing the report" in err
    assert load_summary(out)["steps"] == 400 and (out / "report.html").is_file()


def test_second_ctrl_c_during_teardown_names_the_rebuild_command(tmp_path):
    out = tmp_path / "r"
    proc, err = _interrupt_teardown(out, 2)
    assert proc.returncode != 0
    assert "Traceback" not in err
    line = [ln for ln in err.splitlines() if "rebuild it with" in ln]
    assert line, err
    cmd = line[0].split("rebuild it with: ", 1)[1].split()
    assert cmd[:2] == ["haiprof", "report"]
    r = run_haiprof(*cmd[1:])
    assert r.returncode == 0, r.stderr
    assert load_summary(out)["steps"] == 400 and (out / "report.html").is_file()
