"""--fix compile on a GAN-shaped script: both models are compiled, the generator still saves and copies whole
(the saved model is the eager one and loads where haiprof is not), and the script ends as without the fix."""
import json
import subprocess
import sys

import pytest

from conftest import SCRIPTS, load_summary, run_haiprof

SCRIPT = SCRIPTS / "real" / "two_models_save.py"


@pytest.mark.slow
def test_compile_fix_compiles_every_model_and_keeps_it_saveable(tmp_path):
    ckpt = tmp_path / "g.pt"
    r = run_haiprof("run", "--quiet", "--fix", "compile", "--out", tmp_path / "r", SCRIPT, "12", ckpt, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "saved Sequential Sequential"
    fx = load_summary(tmp_path / "r")["fixes"]
    compile_result = next(x for x in fx["results"] if x["id"] == "compile")
    applied = [e for e in compile_result["events"] if e["status"] == "applied"]
    assert compile_result["status"] == "applied" and len(applied) == 2, compile_result   # G and D
    # the checkpoint loads in a plain python (no haiprof), eager
    code = ("import torch,sys; m=torch.load(sys.argv[1], weights_only=False); "
            "print('forward' in m.__dict__, tuple(m(torch.randn(2, 8)).shape))")
    out = subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False (2, 16)", out.stderr
