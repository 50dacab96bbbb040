"""haiprof's hooks leave the user's objects and tracebacks as python has them: a model copied, pickled and saved
during and after training (deepcopy, pickle, torch.save, then loaded where haiprof cannot be imported) behaves as
under python, its copies carry no haiprof hook; exceptions raised through our wrappers print python's traceback."""
import subprocess
import sys

import pytest

from conftest import SCRIPTS, in_parallel, run_haiprof

T = SCRIPTS / "transparent"


def _both(tmp_path, script, side_by_side=True):
    def plain():
        return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                              cwd=tmp_path)

    def ours():
        return run_haiprof("run", "--quiet", "--out", tmp_path / "run", script, cwd=tmp_path)
    return in_parallel(plain, ours) if side_by_side else (plain(), ours())


def test_model_copied_pickled_and_saved_at_step_2_10_and_after(tmp_path):
    plain, r = _both(tmp_path, T / "copy_model.py")
    assert plain.returncode == 0, plain.stderr
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout), r.stderr
    assert r.stdout.count("copies ok True hooks on copies 0") == 3
    assert "loaded Sequential []" in r.stdout        # loads where haiprof cannot be imported


@pytest.mark.parametrize("script", ["raise_in_loader.py", "raise_in_backward.py", "raise_chained.py"])
def test_tracebacks_through_our_wrappers_are_pythons(tmp_path, script):
    plain, r = _both(tmp_path, T / script)
    assert plain.returncode == 1 and "Traceback" in plain.stderr
    assert (r.returncode, r.stderr) == (plain.returncode, plain.stderr)


def test_compiled_model_gets_no_warning_about_our_hooks(tmp_path):
    # one after the other: the two compilations would share torch's on-disk compile cache
    plain, r = _both(tmp_path, T / "compiled_model.py", side_by_side=False)
    assert plain.returncode == 0 and "global hooks" not in plain.stderr
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)
