"""The wheel ships every file the code reads at run time (the report's scripts and templates, plotly, the per-rank
entry file), and builds without setuptools warning that a folder of them is absent from `packages`."""
import shutil
import subprocess
import sys
import zipfile

from conftest import REPO


def test_wheel_ships_the_data_folders_without_a_packaging_warning(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("haiprof", "collectors", "analyzers", "fixes"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "is absent from the `packages` configuration" not in r.stdout + r.stderr, r.stdout + r.stderr
    wheel, = (tmp_path / "wheel").glob("haiprof-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    folders = ("haiprof/render/js", "haiprof/render/vendor", "haiprof/render/templates", "haiprof/runtime/rank_entry")
    wanted = [p for d in folders
              for p in (REPO / d).iterdir() if p.is_file() and p.suffix not in (".pyc",)]
    assert wanted and {str(p.relative_to(REPO)) for p in wanted} <= shipped
