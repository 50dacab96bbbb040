"""`--steps N` stops where step N+1 would begin: step N's own logging and evaluation run, the script's finally
blocks run, and a script that swallows the stop (a bare `except:`) is still ended, its run written."""
import json

from conftest import SCRIPTS, load_summary, run_haiprof

SCRIPT = SCRIPTS / "steps" / "logs_after_step.py"


def test_stops_after_step_ns_iteration(tmp_path):
    r = run_haiprof("run", "--quiet", "--steps", "12", "--out", tmp_path / "r", SCRIPT)
    assert r.returncode == 0, r.stderr
    expected = [f"step {i} done" for i in range(1, 13)]
    for k in (4, 8, 12):
        expected.insert(expected.index(f"step {k} done") + 1, f"eval after step {k}")
    assert r.stdout.splitlines() == expected + ["finally ran"]
    s = load_summary(tmp_path / "r")
    assert s["steps"] == 12 and s["exit_code"] == 0


def test_a_bare_except_cannot_keep_it_running(tmp_path):
    r = run_haiprof("run", "--steps", "5", "--out", tmp_path / "r", SCRIPT, "bare", timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [f"step {i} done" for i in range(1, 6)][:4] + ["eval after step 4", "step 5 done"], lines
    assert "caught the stop" in r.stderr and "Traceback" not in r.stderr
    s = load_summary(tmp_path / "r")
    assert s["steps"] == 5 and s["exit_code"] == 0
    # the run that ends here (as --fix auto's diagnosis pass does) still knows what the script already does
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["script_uses"] == {"fused-optim": "SGD(foreach=True)"}
    assert "fused-optim" in s["advice_left_out"]
