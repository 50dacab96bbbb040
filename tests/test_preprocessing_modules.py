"""Modules that run inside the DataLoader (torchvision-style transforms, num_workers=0) are loading, not the
model's forward: an input-bound script with module transforms is called input-bound, its loader share agrees
with the script's own clock, and the transforms are no root module of the model."""
import re

from conftest import SCRIPTS, load_summary, run_haiprof


def test_module_transforms_count_as_loading(tmp_path):
    r = run_haiprof("run", "--quiet", "--out", tmp_path / "r", SCRIPTS / "real" / "module_transforms.py", "20")
    assert r.returncode == 0, r.stderr
    own = float(re.search(r"loader share ([\d.]+)", r.stdout).group(1))
    s = load_summary(tmp_path / "r")
    assert s["bottleneck"] == "io", s["headline"]
    share = s["phase_share"]["dataloader"]
    assert share >= 0.5 and abs(share - own) <= 0.15, (share, own, s["phase_share"])
    assert s["phase_share"]["forward"] < 0.2, s["phase_share"]
