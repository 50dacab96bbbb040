"""Distributed ranks import haiprof and torch as python would, whatever the user keeps in the current directory.

A random.py or json.py in the current directory does not stop `torchrun train.py` (python puts the script's folder
first on sys.path, not the current one): it must not stop `haiprof run --nproc-per-node 2 train.py` or
`haiprof run -- torchrun … train.py` either, and the script still sees python's sys.path (its own folder first, its
sibling modules importable; the current directory first for `-m`). Real torchrun, gloo, 2 ranks, a few steps.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import in_parallel, load_summary
from haiprof.runtime import distributed, worker

pytestmark = pytest.mark.timeout(240)
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")

# Five DDP steps on gloo, torch and torch.distributed as `dist` imported before (test_torch_loaded_by_the_script too).
DDP_FIVE_STEPS = """\
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
dist.destroy_process_group()
"""

TRAIN = """\
import json, os, random, sys
import torch
import torch.distributed as dist
import mylib
""" + DDP_FIVE_STEPS + """\
line = json.dumps({"rank": int(os.environ["RANK"]), "mylib": mylib.VALUE, "path": sys.path, "argv": sys.argv,
                   "stdlib_random": hasattr(random, "Random")})
sys.stdout.write(f"RANK {line}\\n")   # one write: under -u print's pieces of two ranks interleave
sys.stdout.flush()
"""


def _cli(tmp_path: Path) -> list[str]:
    """`haiprof` as its console script starts it: from a file whose folder holds nothing else, so the launching
    process does not see the current directory either (`python -m haiprof` would put it first)."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / "haiprof_cli.py").write_text("import sys\nfrom haiprof.cli import main\nsys.exit(main())\n")
    return [sys.executable, str(d / "haiprof_cli.py")]


TEARDOWN_ABORT = "terminate called without an active exception"


def _run(argv, cwd, out=None):
    """One job; run again once (its run directory `out` removed) where a rank died of gloo's own teardown abort
    (std::terminate on a thread still joinable at exit: seen once, in plain torchrun without haiprof, on a loaded
    machine). Any other failure stands, and a second abort does too."""
    def once():
        return subprocess.run(list(map(str, argv)), cwd=cwd, capture_output=True, text=True, timeout=200)
    r = once()
    if r.returncode != 0 and TEARDOWN_ABORT in r.stderr:
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
        r = once()
    return r


def _ranks(stdout: str) -> list[dict]:
    return sorted((json.loads(line[5:]) for line in stdout.splitlines() if line.startswith("RANK ")),
                  key=lambda r: r["rank"])


def _assert_profiled(out: Path, steps: int = 5):
    s = load_summary(out)
    rows = s["distributed"]["ranks"]
    assert s["distributed"]["world_size"] == 2 and [x["rank"] for x in rows] == [0, 1]
    assert all(x["status"] == "ok" and x["steps"] == steps for x in rows), rows


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory):
    """The user's random.py and json.py in the current directory, the script in another folder with its own
    mylib.py; plain torchrun and both haiprof forms, side by side: (project folder, {name: result})."""
    root = tmp_path_factory.mktemp("shadowed")
    cwd, proj = root / "work", root / "proj"
    cwd.mkdir()
    proj.mkdir()
    (cwd / "random.py").write_text("x = 1\n")
    (cwd / "json.py").write_text("y = 2\n")
    (proj / "mylib.py").write_text("VALUE = 42\n")
    (proj / "train.py").write_text(TRAIN)
    cli, script = _cli(root), "../proj/train.py"
    common = ["run", "--quiet", "--trace-steps", "0"]
    plain, launch, wrapped = in_parallel(
        lambda: _run([TORCHRUN, "--nproc-per-node", "2", script, "a"], cwd),
        lambda: _run([*cli, *common, "--out", root / "launch", "--nproc-per-node", "2", script, "a"], cwd,
                     root / "launch"),
        lambda: _run([*cli, *common, "--out", root / "wrapped", "--", TORCHRUN, "--nproc-per-node", "2", script, "a"],
                     cwd, root / "wrapped"))
    return root, {"plain": plain, "launch": launch, "wrapped": wrapped}


@pytest.mark.parametrize("form", ["launch", "wrapped"])
def test_user_random_and_json_in_cwd_do_not_break_ranks(shadowed, form):
    root, results = shadowed
    plain, r = results["plain"], results[form]
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_profiled(root / form)


@pytest.mark.parametrize("form", ["launch", "wrapped"])
def test_script_sees_the_sys_path_torchrun_gives_it(shadowed, form):
    root, results = shadowed
    plain, ours = _ranks(results["plain"].stdout), _ranks(results[form].stdout)
    assert [x["rank"] for x in plain] == [0, 1], results["plain"].stderr[-3000:]
    assert ours == plain, (results[form].returncode, results[form].stdout, results[form].stderr[-3000:])
    proj = str((root / "proj").resolve())
    for x in ours:   # its own folder first (mylib beside it imports), the current directory nowhere
        assert x["path"][0] == proj and x["mylib"] == 42 and x["stdlib_random"]
        assert str((root / "work").resolve()) not in x["path"] and x["argv"] == ["../proj/train.py", "a"]


def test_module_target_has_the_current_directory_first(tmp_path):
    """`-m pkg.trainmod`: as under python -m, the current directory is sys.path[0] and its modules import."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "trainmod.py").write_text(TRAIN)
    (tmp_path / "mylib.py").write_text("VALUE = 7\n")
    r = _run([*_cli(tmp_path), "run", "--quiet", "--trace-steps", "0", "--out", tmp_path / "run",
              "--nproc-per-node", "2", "-m", "pkg.trainmod", "x"], tmp_path, tmp_path / "run")
    assert r.returncode == 0, r.stderr[-3000:]
    ranks = _ranks(r.stdout)
    assert [x["rank"] for x in ranks] == [0, 1]
    for x in ranks:
        assert x["path"][0] == str(tmp_path.resolve()) and x["mylib"] == 7
        assert x["argv"] == [str(tmp_path.resolve() / "pkg" / "trainmod.py"), "x"]
    _assert_profiled(tmp_path / "run")


def test_ranks_start_a_file_alone_in_its_folder(tmp_path):
    """torchrun is told to run the bootstrap file as a script (python puts its folder first, not the current
    directory); torchrun's own additions (-u, --local-rank without --use-env) reach the worker as before."""
    args, user = distributed.rewrite(["--nproc-per-node", "2", __file__, "a"], tmp_path, None, 0.1)
    assert not args.module and not args.run_path and user == [__file__, "a"]
    boot = Path(args.training_script)
    assert boot == distributed.WORKER_FILE and boot.is_file()
    assert [p.name for p in boot.parent.iterdir() if p.name != "__pycache__"] == [boot.name]
    from torch.distributed import run as tdr
    args.use_env = False   # torch.distributed.launch's legacy mode: --local-rank=N goes first
    _, cmd, cmd_args = tdr.config_from_args(args)
    assert cmd == sys.executable and cmd_args[:3] == ["-u", str(boot), "--local-rank=${local_rank}"]
    opts, target = worker.parse(cmd_args[2:])
    assert opts["run_dir"] == str(tmp_path.resolve())
    assert target == [__file__, "--local-rank=${local_rank}", "a"]


FAKE_WORKER = """\
import os, sys
def main(argv):
    print(repr((argv, sys.path, os.path.dirname(__file__))))
    return 3
"""


def test_bootstrap_finds_its_own_package_when_not_on_the_path(tmp_path):
    """haiprof importable in the launching process only (a path the rank does not inherit): the bootstrap imports
    the package it belongs to and leaves sys.path as python made it."""
    pkg = tmp_path / "site" / "haiprof"
    (pkg / "runtime" / "rank_entry").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "runtime" / "__init__.py").write_text("")
    (pkg / "runtime" / "worker.py").write_text(FAKE_WORKER)
    boot = pkg / "runtime" / "rank_entry" / "haiprof_rank.py"
    boot.write_text(distributed.WORKER_FILE.read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S: no site-packages, so no installed haiprof either
    r = subprocess.run([sys.executable, "-S", str(boot), "--run-dir", "d", "--", "t.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 3, r.stderr
    argv, path, runtime = eval(r.stdout)
    assert argv == ["--run-dir", "d", "--", "t.py"] and runtime == str(pkg / "runtime")
    assert path[0] == str(boot.parent) and str(pkg.parent) not in path


def test_wheel_ships_the_bootstrap():
    """It is not a package module: pyproject's package-data must name it, or `pip install .` leaves it out (and the
    ranks would fall back to `-m`)."""
    import fnmatch
    tomllib = pytest.importorskip("tomllib")
    repo = Path(__file__).resolve().parent.parent
    data = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    # its folder is a data package of its own (tests/test_packaging.py builds the wheel and finds it there)
    folder = distributed.WORKER_FILE.parent.relative_to(repo).as_posix().replace("/", ".")
    assert any(fnmatch.fnmatch(distributed.WORKER_FILE.name, g) for g in data.get(folder, [])), data


# the probe set's own json.py and random.py: each the standard module, with a name of its own added (torch needs
# the standard one too: python's torch, imported after the script's folder is on sys.path, gets the user's)
USER_MODULES = Path(__file__).resolve().parent.parent / "benchmarks" / "probes" / "_files" / "user_json_random_local"
BESIDE = """\
import os
import torch
import json, random
if os.environ.get("WORLD_SIZE"):
    import torch.distributed as dist
    dist.init_process_group("gloo")
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    m(torch.randn(8, 4)).sum().backward()
    opt.step()
if os.environ.get("RANK", "0") == "0":
    print(getattr(json, "WHO", "stdlib json"), getattr(random, "WHO", "stdlib random"))
"""


def test_the_users_json_and_random_beside_the_script_win_as_under_python(tmp_path):
    """json.py and random.py beside the script: python's script imports them (torch, imported first, too). Under
    the `haiprof` console script, one process and two ranks, the script gets them as well, not the standard modules
    haiprof and torch imported before its folder was on sys.path."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("json", "random"):
        (proj / f"{name}.py").write_bytes((USER_MODULES / f"{name}.py").read_bytes())
    (proj / "train.py").write_text(BESIDE)
    cli = _cli(tmp_path)
    common = [*cli, "run", "--quiet", "--trace-steps", "0"]
    plain, one, ranks = in_parallel(
        lambda: _run([sys.executable, "proj/train.py"], tmp_path),
        lambda: _run([*common, "--out", tmp_path / "one", "proj/train.py"], tmp_path),
        lambda: _run([*common, "--out", tmp_path / "ranks", "--nproc-per-node", "2", "proj/train.py"], tmp_path,
                     tmp_path / "ranks"))
    assert plain.stdout == "user json user random\n", plain.stderr[-3000:]
    for r in (one, ranks):
        assert r.returncode == 0 and r.stdout == plain.stdout, (r.stdout, r.stderr[-3000:])
    assert load_summary(tmp_path / "one")["steps"] == 5   # haiprof's own report, after: the standard json again
    _assert_profiled(tmp_path / "ranks")


def test_only_standard_modules_imported_after_start_up_are_taken_out(tmp_path, monkeypatch):
    """A json.py beside the script takes the cached json out (python's script would import the user's); an os.py
    does not (python's start-up imported os: the script gets the standard one under python too), nor a name that
    is not the standard library's; put back, the cache is as before."""
    import json as std_json
    import haiprof
    from haiprof.runtime import shadowing
    # this process is pytest's: it imported json before haiprof; the console script's start-up does not
    monkeypatch.setattr(haiprof, "STARTUP_MODULES", frozenset(sys.modules) - {"json"})
    for name in ("json.py", "os.py", "mylib.py", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "queue").mkdir()   # a folder without __init__.py: a namespace portion, which later entries beat
    before = dict(sys.modules)
    taken = shadowing.evict_shadowed(str(tmp_path))
    try:
        assert "json" in taken and "json.decoder" in taken and "json" not in sys.modules
        assert "os" not in taken and "queue" not in taken and sys.modules["os"] is before["os"]
    finally:
        shadowing.restore(taken)
    assert sys.modules["json"] is std_json and dict(sys.modules) == before
    assert shadowing.evict_shadowed(str(tmp_path / "missing")) == {}
