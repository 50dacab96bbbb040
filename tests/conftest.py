import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
HAIPROF = [sys.executable, "-m", "haiprof"]


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_haiprof(*args, cwd=None, timeout=180, env=None, **kw):
    """Run `python -m haiprof ARGS` as a real subprocess; returns CompletedProcess with text output."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([*HAIPROF, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e, **kw)


def terminal_signals():
    """preexec_fn for a child that a test signals as a terminal would: Ctrl-C and a hang-up at their default
    dispositions. The suite started as a background job (`make test &`, nohup) has them ignored, which children
    inherit and which python, and haiprof like it, then keep: a test of what Ctrl-C does would see nothing."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run_python(*args, cwd=None, timeout=120, **kw):
    """Run plain `python ARGS` as a real subprocess (the reference haiprof's run is compared with)."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def in_parallel(*calls):
    """Call each zero-argument callable in its own thread and return their results in order (an exception is
    raised again here). For independent subprocesses whose outputs or CPU times, not wall times, are compared, such
    as plain python beside `haiprof run`: most of each is torch's import, and two of them overlap on two cores."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(c) for c in calls]
        return [f.result() for f in futures]


def shared_once(tmp_path_factory, name: str, make):
    """`make(directory)` once per pytest run, its result (JSON, or a CompletedProcess) kept beside it: the xdist
    workers share it. The first worker to ask makes it while the others wait on a lock, then they read it. The
    session fixtures below are read by files on both workers, and each used to make them twice. Outside xdist,
    the session's own temporary directory (one run's, never an earlier run's)."""
    import fcntl
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-once"
    root.mkdir(exist_ok=True)
    d, done = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if d.exists():   # a worker whose make failed left it half made
                import shutil
                shutil.rmtree(d)
            d.mkdir()
            result = make(d)
            tmp = done.with_suffix(".tmp")
            tmp.write_text(json.dumps(_as_json(result)))
            tmp.replace(done)
    return d, _from_json(json.loads(done.read_text()))


def _as_json(x):
    if isinstance(x, subprocess.CompletedProcess):
        return {"__process__": [list(map(str, x.args)), x.returncode, x.stdout, x.stderr]}
    if isinstance(x, (list, tuple)):
        return [_as_json(v) for v in x]
    return x


def _from_json(x):
    if isinstance(x, dict) and "__process__" in x:
        return subprocess.CompletedProcess(*x["__process__"])
    if isinstance(x, list):
        return [_from_json(v) for v in x]
    return x


ARTIFACTS = Path(os.environ.get("HAIPROF_TEST_ARTIFACTS", REPO / "test-artifacts"))


def run_on_shaped_link(argv, rate: str = "1gbit", timeout: int = 200):
    """Run `argv` in a private network namespace whose loopback tc shapes to `rate` (benchmarks/shaped_net.py):
    the CompletedProcess, text output. Skips the test, with the reason, where the testbed cannot be built (root)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks import shaped_net
    ok, why = shaped_net.available()
    if not ok:
        pytest.skip(f"shaped network testbed unavailable: {why}")
    with shaped_net.shaped_loopback(rate) as net:
        assert "tbf" in net.qdisc()
        return net.run(list(argv), capture_output=True, text=True, timeout=timeout)


def artifact(name: str) -> str:
    """Where a browser test keeps its screenshot (test-artifacts/, or $HAIPROF_TEST_ARTIFACTS), so a person or a
    CI job can look at the page the assertions were made on; each run overwrites the last."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return str(ARTIFACTS / name)


def teardown_cupti_probe(tmp_path, target) -> Path:
    """A script that runs TARGET as __main__ and, at exit, prints whether TEARDOWN_CUPTI is still set in its
    environment (haiprof must leave the user's environment as it found it once the run is over: during the run it
    stays set on CUDA, since libkineto finishes the teardown on a later CUDA call and reads it then)."""
    script = tmp_path / "env_after.py"
    script.write_text(f"import atexit, os, runpy\n"
                      "atexit.register(lambda: print('TEARDOWN', 'TEARDOWN_CUPTI' in os.environ, flush=True))\n"
                      f"runpy.run_path({str(target)!r}, run_name='__main__')\n")
    return script


def phase_records(run_dir) -> list:
    """The run's phase records as lists, whatever file holds them (phases.bin; older runs phases.jsonl)."""
    from haiprof.rundir import RunDir
    return RunDir(run_dir).read_phase_records()


def load_summary(run_dir) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


@pytest.fixture(scope="session")
def seeded(tmp_path_factory):
    """seeded_train.py once under plain python and once under `haiprof run --quiet` (default tracing window), side
    by side: (plain result, run directory, haiprof's result). Shared by the tests of several files that only read
    them; a test that changes the run directory works on a copy."""
    def make(d):
        return in_parallel(lambda: run_python(SCRIPTS / "seeded_train.py"),
                           lambda: run_haiprof("run", "--quiet", "--out", d / "run", SCRIPTS / "seeded_train.py"))
    d, (plain, r) = shared_once(tmp_path_factory, "seeded", make)
    assert plain.returncode == 0, plain.stderr
    assert r.returncode == 0, r.stderr
    return plain, d / "run", r


@pytest.fixture(scope="session")
def seeded_sampled(tmp_path_factory):
    """seeded_train.py under `haiprof run --quiet --sample-interval 0.1`: the run directory, for the whole session.
    Tests only read it; one that changes it works on a copy."""
    d, r = shared_once(tmp_path_factory, "seeded-sampled", lambda d: run_haiprof(
        "run", "--quiet", "--sample-interval", "0.1", "--out", d / "run", SCRIPTS / "seeded_train.py"))
    assert r.returncode == 0, r.stderr
    return d / "run"


@pytest.fixture(scope="session")
def fix_pair(tmp_path_factory):
    """fix_workload.py --steps 12 under `haiprof run --quiet` (base/) and then, beside it, with --fix fused-optim
    (fixed/, whose baseline is base/): their parent directory, for the whole session. Tests only read or copy them."""
    workload, args = SCRIPTS / "fix_workload.py", ["--steps", "12"]

    def make(parent):
        base = run_haiprof("run", "--quiet", "--out", parent / "base", workload, *args)
        if base.returncode:
            return [base, None]
        return [base, run_haiprof("run", "--quiet", "--fix", "fused-optim", "--out", parent / "fixed", workload,
                                  *args, timeout=400)]
    parent, (base, fixed) = shared_once(tmp_path_factory, "fix-pair", make)
    assert base.returncode == 0, base.stderr
    assert fixed.returncode == 0, fixed.stderr
    return parent


GPU_RUNS = Path(os.environ.get("HAIPROF_GPU_RUNS", REPO.parent / "shared" / "gpu-runs"))


@pytest.fixture(scope="session")
def gpu_reports(tmp_path_factory):
    """Recorded H100 runs (GPU_RUNS/h100-2026-11-22), each copied once and re-analysed with `haiprof report`:
    `gpu_reports(names)` -> {name: (run directory, result)}. The analyses are independent and time nothing on this
    machine, so those not yet made run two at a time. Tests only read the directories."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor
    runs, done = GPU_RUNS / "h100-2026-11-22", {}
    if not runs.is_dir():   # a checkout without the recordings beside it: as test_gpu_runs.py, skipped and said
        pytest.skip(f"no recorded GPU runs at {runs}")

    def copy_and_report(parent, name):
        d = parent / name
        shutil.copytree(runs / name, d)
        for p in [d, *d.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        return run_haiprof("report", "--quiet", d, timeout=300)

    tmp_path_factory.getbasetemp()   # made here, once: the pool's two threads would race to make it

    def report(name):
        parent, r = shared_once(tmp_path_factory, f"gpu-run-{name}", lambda parent: copy_and_report(parent, name))
        return parent / name, r

    def get(names):
        todo = [n for n in names if n not in done]
        with ThreadPoolExecutor(max_workers=2) as pool:
            done.update(zip(todo, pool.map(report, todo)))
        return {n: done[n] for n in names}
    return get


EXAMPLE_ARGS = {"input_bound.py": ["--batches", "25"], "compute_bound.py": ["--steps", "15"]}


@pytest.fixture(scope="session")
def example_run(tmp_path_factory):
    """`example_run(name)`: one `haiprof run` of a bundled example (EXAMPLE_ARGS, verdict on stderr) for the whole
    session, (run directory, result); several files' tests read it, none changes it."""
    done = {}

    def get(example):
        if example not in done:
            parent, r = shared_once(tmp_path_factory, f"example-{example}", lambda parent: run_haiprof(
                "run", "--out", parent / example, EXAMPLES / example, *EXAMPLE_ARGS[example]))
            done[example] = parent / example, r
        return done[example]
    return get


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


@pytest.fixture(autouse=True)
def no_thread_leak():
    """Collector threads must not outlive what started them (pyinstrument does the same check)."""
    before = {t.ident for t in threading.enumerate()}
    yield
    leaked = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("haiprof")]
    for t in leaked:
        t.join(timeout=3)
    leaked = [t.name for t in leaked if t.is_alive()]
    assert not leaked, f"haiprof threads leaked: {leaked}"


def read_pty(master, proc, timeout, on_data=None) -> bytes:
    """Everything the terminal's master side gets until the process and every child holding the slave side are
    done; `on_data(bytes so far)` is called every tenth of a second (to answer a prompt, resize the terminal)."""
    import select
    import time

    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if on_data is not None:
            on_data(got)
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the slave side has closed it
                break
            if not chunk:
                break
            got += chunk
        elif proc.poll() is not None:
            break
    return got


def run_on_pty(args, timeout=120, on_pty=("stderr",)):
    """Run `python -m haiprof ARGS` with the streams in `on_pty` on one 120-column pseudo-terminal (the other on a
    pipe); returns (returncode, bytes seen on the terminal, bytes on the pipe or b"")."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    streams = {name: (slave if name in on_pty else subprocess.PIPE) for name in ("stdout", "stderr")}
    env = dict(os.environ, HAIPROF_PROGRESS="1", TERM="xterm")
    proc = subprocess.Popen([*HAIPROF, *map(str, args)], stdin=subprocess.DEVNULL, env=env, **streams)
    os.close(slave)
    got = read_pty(master, proc, timeout)
    os.close(master)
    pipe = proc.stdout if "stdout" not in on_pty else proc.stderr if "stderr" not in on_pty else None
    piped = pipe.read() if pipe is not None else b""
    proc.wait(timeout=30)
    return proc.returncode, got, piped
