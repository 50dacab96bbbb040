"""A target python cannot start (a package without __main__, an unknown module, a folder without __main__.py, a
script with a NUL byte): haiprof says what python says, with python's exit status, and creates nothing."""
import pytest

from conftest import in_parallel, run_haiprof, run_python


@pytest.fixture
def place(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "x.py").write_text("print(1)\n")
    (tmp_path / "nul.py").write_bytes(b"print(1)\n# -*- a comment -*-\nx = 1 \x00 + 2\nprint(2)\n")
    (tmp_path / "nul_first.py").write_bytes(b"\x00\n")
    return tmp_path


@pytest.mark.parametrize("target", [["-m", "pkg"], ["-m", "no_such_module_xyz"], ["-m", "pkg.absent"],
                                    ["-m", "absent_parent_xyz.sub"], ["folder"], ["nul.py"], ["nul_first.py"],
                                    ["nope.py"]])
def test_what_python_cannot_start_ends_as_python_ends(place, target):
    plain, r = in_parallel(lambda: run_python(*target, cwd=place),
                           lambda: run_haiprof("run", "--quiet", "--out", "r", *target, cwd=place))
    assert plain.returncode in (1, 2) and plain.stderr, plain.stderr
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert not (place / "r").exists()


def test_a_missing_module_under_a_package_with_code_runs_that_code_once_as_python(tmp_path):
    # python imports the package (its __init__ runs) before it finds no child; haiprof's own process does not run
    # the user's code, so the script's python checks it and says what python says, after the same output
    (tmp_path / "loud").mkdir()
    (tmp_path / "loud" / "__init__.py").write_text("print('loud/__init__ ran')\n")
    plain, r = in_parallel(lambda: run_python("-m", "loud.absent", cwd=tmp_path),
                           lambda: run_haiprof("run", "--quiet", "--out", "r", "-m", "loud.absent", cwd=tmp_path))
    assert plain.stdout == "loud/__init__ ran\n" and plain.returncode == 1
    assert "No module named loud.absent" in plain.stderr
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)
