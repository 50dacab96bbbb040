"""haiprof's recorder starts when the script's own `import torch` has loaded torch, not before the script
(runtime/torch_import.py): what torch's libraries read as they load is what the script set, as under python.
Real processes, each compared with plain python."""
from __future__ import annotations

import importlib
import subprocess
import sys

from conftest import load_summary, run_haiprof

from haiprof.runtime.torch_import import AfterTorchImport


# Sets the thread count before its own `import torch`; Adam, so that --fix fused-optim has an optimizer to fuse
THREADS_SET_BEFORE_IMPORT = """
import os
os.environ["OMP_NUM_THREADS"] = "1"
import torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(8):
    opt.zero_grad()
    model(torch.randn(16, 8)).pow(2).mean().backward()
    opt.step()
print("threads", torch.get_num_threads())
"""


def _both(tmp_path, source: str, *haiprof_args):
    script = tmp_path / "script.py"
    script.write_text(source)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    ours = run_haiprof("run", "--quiet", *haiprof_args, "--out", tmp_path / "r", script, cwd=tmp_path)
    return plain, ours


def test_thread_settings_made_before_import_torch_are_the_scripts(tmp_path):
    # OpenMP reads OMP_NUM_THREADS once, as torch loads it: loaded before the script, the run trained with the
    # machine's thread count instead of the one the script asked for
    plain, ours = _both(tmp_path, THREADS_SET_BEFORE_IMPORT)
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout == "threads 1\n"
    s = load_summary(tmp_path / "r")
    assert s["steps"] >= 6, s["steps"]   # the recorder started at the import, before the first step
    import json
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["torch"] and meta["conditions"]["torch_threads"] == 1   # the run's condition, as the script set it


def test_a_script_that_never_imports_torch_runs_without_it_and_says_so(tmp_path):
    plain, ours = _both(tmp_path, "import sys\nprint('torch' in sys.modules)\n")
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout == "False\n"
    status = (tmp_path / "r" / "status.jsonl").read_text()
    assert "the script never imported torch" in status
    s = load_summary(tmp_path / "r")
    assert s["bottleneck"] == "none" and s["exit_code"] == 0


def test_torch_imported_in_a_function_later_is_recorded_from_there(tmp_path):
    plain, ours = _both(tmp_path, """
import time
def train():
    from torch import nn, optim, randn
    model = nn.Linear(8, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):
        opt.zero_grad()
        model(randn(16, 8)).pow(2).mean().backward()
        opt.step()
time.sleep(0.2)
train()
print("done")
""")
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout
    assert load_summary(tmp_path / "r")["steps"] >= 8


def _package(tmp_path, name: str, body: str):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    (pkg / "data.txt").write_text("resource")
    return pkg


def test_the_call_comes_after_the_module_ran_and_leaves_python_as_it_was(tmp_path, monkeypatch):
    _package(tmp_path, "fakepkg_ok", "import sys\nLOADED = True\nfrom . import sub  # noqa\n")
    (tmp_path / "fakepkg_ok" / "sub.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def on_loaded():
        mod = sys.modules["fakepkg_ok"]
        seen.append((getattr(mod, "LOADED", False), "fakepkg_ok.sub" in sys.modules))

    finder = AfterTorchImport.install(on_loaded, name="fakepkg_ok")
    try:
        import fakepkg_ok
        assert seen == [(True, True)]
        assert finder not in sys.meta_path   # once: off the path after the import
        # the module's own loader, as python gives it: resources and reloads work through it
        assert type(fakepkg_ok.__loader__).__name__ == "SourceFileLoader"
        assert fakepkg_ok.__spec__.loader is fakepkg_ok.__loader__
        from importlib.resources import files
        assert (files("fakepkg_ok") / "data.txt").read_text() == "resource"
        importlib.reload(fakepkg_ok)
        assert seen == [(True, True)]
    finally:
        finder.remove()
        for k in [k for k in sys.modules if k.startswith("fakepkg_ok")]:
            del sys.modules[k]


def test_a_failing_import_fails_as_under_python_and_calls_nothing(tmp_path, monkeypatch):
    _package(tmp_path, "fakepkg_bad", "raise ImportError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []
    finder = AfterTorchImport.install(lambda: calls.append(1), name="fakepkg_bad")
    try:
        try:
            import fakepkg_bad  # noqa: F401
        except ImportError as e:
            assert str(e) == "broken on purpose"
        else:
            raise AssertionError("the import should have failed")
        assert calls == [] and "fakepkg_bad" not in sys.modules
    finally:
        finder.remove()


def test_an_error_in_the_call_never_fails_the_import(tmp_path, monkeypatch):
    _package(tmp_path, "fakepkg_err", "VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    finder = AfterTorchImport.install(lambda: 1 / 0, name="fakepkg_err")
    try:
        import fakepkg_err
        assert fakepkg_err.VALUE == 3
    finally:
        finder.remove()
        sys.modules.pop("fakepkg_err", None)


def test_each_rank_gets_the_thread_settings_its_script_made_as_under_torchrun(tmp_path):
    from test_rank_isolation import DDP_FIVE_STEPS, TORCHRUN, _assert_profiled, _run
    script = tmp_path / "train.py"
    # torchrun sets 1 for each rank; the script asks for 2 before its own import of torch
    script.write_text("import os\nos.environ['OMP_NUM_THREADS'] = '2'\n"
                      "import sys\nimport torch\nimport torch.distributed as dist\n" + DDP_FIVE_STEPS +
                      "sys.stdout.write(f\"RANK {os.environ['RANK']} threads {torch.get_num_threads()}\\n\")\n"
                      "sys.stdout.flush()\n")
    plain = _run([TORCHRUN, "--nproc-per-node", "2", script], tmp_path)
    out = tmp_path / "job"
    ours = _run([sys.executable, "-m", "haiprof", "run", "--quiet", "--out", out, "--nproc-per-node", "2", script],
                tmp_path, out)
    assert plain.returncode == 0 and ours.returncode == 0, (plain.stderr[-2000:], ours.stderr[-2000:])

    def lines(r):
        return sorted(x for x in r.stdout.splitlines() if x.startswith("RANK "))
    assert lines(ours) == lines(plain) and len(lines(plain)) == 2, (ours.stdout, plain.stdout)
    _assert_profiled(out)


def test_a_fix_checks_its_baseline_without_loading_torch_before_the_script(tmp_path):
    """A --fix run with a baseline compares the two runs' set-up conditions before the script starts. Measured by
    importing torch in the launching process, they had that process's threads, not the ones the script sets
    before its own import: a baseline the same script recorded read as 'torch threads 1 -> 2', was re-measured
    for nothing, and the fixed run's own conditions said 2 threads where it trained with 1."""
    import json

    import pytest
    import torch
    if torch.get_num_threads() < 2:
        pytest.skip("one thread by default here: the script's setting changes nothing")
    script = tmp_path / "script.py"
    script.write_text(THREADS_SET_BEFORE_IMPORT)
    base = run_haiprof("run", "--quiet", "--out", tmp_path / "base", script, cwd=tmp_path)
    assert base.returncode == 0, base.stderr
    fixed = run_haiprof("run", "--fix", "fused-optim", "--out", tmp_path / "fixed", script, cwd=tmp_path)
    assert fixed.returncode == 0 and fixed.stdout.endswith("threads 1\n"), fixed.stderr
    assert "re-measuring" not in fixed.stderr and "torch threads" not in fixed.stderr, fixed.stderr
    s = load_summary(tmp_path / "fixed")   # (the load beside each run may differ: said, not a set-up difference)
    assert not s["fixes"].get("remeasured"), s["fixes"]
    assert s["comparison"]["baseline_run"] == str((tmp_path / "base").resolve()), s["comparison"]
    meta = json.loads((tmp_path / "fixed" / "meta.json").read_text())
    assert meta["conditions"]["torch_threads"] == 1 and meta["torch"] == torch.__version__
