"""`--fix auto` and the script's own behaviour: the diagnosis pass shows its output (marked, on stderr), never runs
the script's cleanup (no extra checkpoint or log line from it), a script that fails during it ends with python's
exit code, and with nothing applied there is nothing compared and no loss guard."""
import subprocess
import sys

from conftest import SCRIPTS, in_parallel, run_haiprof

SCRIPT = SCRIPTS / "fixes" / "cleanup_train.py"


def test_diagnosis_pass_skips_the_scripts_cleanup_and_shows_its_output(tmp_path):
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain, r = in_parallel(
        lambda: subprocess.run([sys.executable, str(SCRIPT), "40"], capture_output=True, text=True, cwd=plain_dir,
                               timeout=120),
        lambda: run_haiprof("run", "--fix", "auto", "--out", tmp_path / "runs" / "fixed", SCRIPT, "40",
                            cwd=tmp_path, timeout=400))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout), r.stderr   # stdout: the real run only
    assert "haiprof: [diagnosis] step 0" in r.stderr
    assert (tmp_path / "train.log").read_text() == (plain_dir / "train.log").read_text()   # one line: the run's
    assert (tmp_path / "final_model.pt").is_file()


def test_script_failing_in_the_diagnosis_ends_with_pythons_exit_code(tmp_path):
    plain_dir = tmp_path / "plain"   # its own directory: the two run side by side
    plain_dir.mkdir()
    plain, r = in_parallel(
        lambda: subprocess.run([sys.executable, str(SCRIPT), "40", "5"], capture_output=True, text=True,
                               cwd=plain_dir, timeout=120),
        lambda: run_haiprof("run", "--fix", "auto", "--out", tmp_path / "runs" / "fixed", SCRIPT, "40", "5",
                            cwd=tmp_path, timeout=400))
    assert plain.returncode == 1 and r.returncode == 1, r.stderr
    assert "RuntimeError: bad batch 5" in r.stderr and "the script failed during the diagnosis pass" in r.stderr
    assert "haiprof: [diagnosis] step 4" in r.stderr
    assert not (tmp_path / "runs" / "fixed").exists()


def test_nothing_applied_means_nothing_compared(tmp_path):
    import json

    from haiprof.analysis.fix_results import add_fix_results
    from haiprof.rundir import RunDir
    base = tmp_path / "base"
    base.mkdir()
    (base / "summary.json").write_text(json.dumps({"step_time_s": {"steady": 0.01, "median": 0.01}, "steps": 9,
                                                   "phase_share": {}, "bottleneck": "none", "findings": []}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "fixes.json").write_text(json.dumps({"spec": "auto", "requested": {}, "baseline_run": str(base),
                                                "results": [{"id": "amp", "status": "skipped", "reason": "cpu"}]}))
    summary = {"step_time_s": {"steady": 0.005, "median": 0.005}, "steps": 9, "findings": [], "phase_share": {}}
    add_fix_results(RunDir(run), {}, summary)
    assert "comparison" not in summary and "loss_guard" not in summary and "gain" not in summary["fixes"]
    assert summary["fixes"]["comparison_note"] == "no fix was applied in this run: there is nothing to compare"


def test_a_fix_the_script_crashed_with_is_not_chosen_again(tmp_path):
    """A run that failed under a fix marks that fix as failed for that command: the next --fix auto leaves it
    out and says why (the history used to skip runs that exited non-zero)."""
    import json

    from haiprof.runtime import fixrun

    parent = tmp_path / "runs"
    crashed = parent / "crashed"
    crashed.mkdir(parents=True)
    meta = {"command": ["python", "train.py"], "fixes_requested": "compile", "exit_code": 1, "start_time": 2.0}
    (crashed / "meta.json").write_text(json.dumps(meta))
    (crashed / "summary.json").write_text(json.dumps(
        {"steps": 5, "fixes": {"results": [{"id": "compile", "status": "applied"}]}}))
    key = fixrun.target_key(meta)
    history = fixrun.fix_history(parent, key)
    assert history == [{"run": str(crashed.resolve()), "applied": ["compile"], "gain": {}, "crashed": 1}]
