"""A zip application (.pyz) or a directory with __main__.py runs under `haiprof run` as under python: same stdout
(argv, sys.path[0], __file__, __name__), same exit code, and a run directory with its steps."""
import subprocess
import sys
import zipapp

import pytest

from conftest import in_parallel, load_summary, run_haiprof

MAIN = """\
import sys
import torch
print("argv", sys.argv, "path0", sys.path[0], "file", __file__, "name", __name__)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
sys.exit(3)
"""


@pytest.fixture
def apps(tmp_path):
    src = tmp_path / "app"
    src.mkdir()
    (src / "__main__.py").write_text(MAIN)
    zipapp.create_archive(src, tmp_path / "app.pyz")
    return tmp_path


@pytest.mark.parametrize("target", ["app.pyz", "app"])
def test_zipapp_and_directory_run_as_python_runs_them(apps, target):
    plain, r = in_parallel(   # side by side: most of each is torch's import
        lambda: subprocess.run([sys.executable, target, "a", "b"], cwd=apps, capture_output=True, text=True,
                               timeout=120),
        lambda: run_haiprof("run", "--quiet", "--out", apps / f"run-{target}", target, "a", "b", cwd=apps))
    assert plain.returncode == 3, plain.stderr
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout), r.stderr
    assert load_summary(apps / f"run-{target}")["steps"] == 5


def test_zip_without_main_is_pythons_one_line_error(apps):
    bad = apps / "plain.zip"
    import zipfile
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("x.py", "print(1)\n")
    plain = subprocess.run([sys.executable, bad.name], cwd=apps, capture_output=True, text=True, timeout=120)
    r = run_haiprof("run", "--out", apps / "r", bad.name, cwd=apps)
    assert (r.returncode, r.stderr) == (plain.returncode, plain.stderr) == (1, f"{sys.executable}: can't find "
                                                                              f"'__main__' module in '{bad}'\n")
    assert not (apps / "r").exists()
