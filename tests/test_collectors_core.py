"""The phase collector against real torch, the system sampler against real /proc, the side process for real."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from haiprof.collectors.phases import PhaseRecorder, StepLimitReached
from haiprof.collectors.system import SystemSampler
from haiprof.rundir import RunDir, read_jsonl


def _train(steps=3, workers=0):
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(steps * 4, 8), torch.randn(steps * 4, 1))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(ds, batch_size=4, num_workers=workers):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


@pytest.fixture
def recorder():
    records = []
    rec = PhaseRecorder(records.append).install()
    yield rec, records
    rec.uninstall()


def test_records_every_phase_once_per_step(recorder):
    rec, records = recorder
    _train(steps=3)
    names = [r[0] for r in records]
    assert names.count("@step") == 3 and rec.steps == 3
    assert names.count("forward") == 3          # only the outermost module call, not each Linear
    assert names.count("backward") == 3 and names.count("@backward") == 3
    assert names.count("dataloader") == 4       # 3 batches + the StopIteration
    assert names.count("optimizer") == 6        # step + zero_grad
    assert all(r[1] <= r[2] for r in records)  # dataloader records carry extra CPU fields


def test_uninstall_restores_torch(recorder):
    rec, records = recorder
    rec.uninstall()
    _train(steps=2)
    assert records == []
    assert not hasattr(torch.autograd.backward, "__haiprof_wrapped__")


def test_dataloader_workers_do_not_record(recorder):
    rec, records = recorder
    _train(steps=2, workers=2)
    assert [r[0] for r in records].count("@step") == 2


def test_step_limit_raises_clean_exit():
    records = []
    rec = PhaseRecorder(records.append, max_steps=2).install()
    try:
        with pytest.raises(StepLimitReached) as exc:
            _train(steps=5)
        assert exc.value.code == 0 and isinstance(exc.value, SystemExit)
    finally:
        rec.uninstall()
    assert [r[0] for r in records].count("@step") == 2


def test_system_sampler_counts_children_cpu_and_io(tmp_path):
    # The child burns CPU until told to stop, so it is alive for both samples however loaded the machine is. The
    # sampler's figure is checked against the child's own CPU time over the same window (psutil, independently):
    # what the code reports from its inputs, not how much CPU a busy machine happened to give the child.
    import psutil
    stop = tmp_path / "stop"
    burn = (f"import os\nwhile not os.path.exists({str(stop)!r}): pass\n"
            f"open({str(tmp_path / 'f')!r},'wb').write(os.urandom(4<<20))\n")
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        s = SystemSampler(os.getpid())
        cp = psutil.Process(child.pid)
        s.sample()
        t0, c0 = time.monotonic(), sum(cp.cpu_times()[:2])
        time.sleep(1.0)
        rec = s.sample()
        t1, c1 = time.monotonic(), sum(cp.cpu_times()[:2])
    finally:
        stop.touch()
        child.wait()
    assert rec["procs"] >= 2
    own = 100 * (c1 - c0) / (t1 - t0)   # the child's CPU over the window, as % of one core
    assert own > 0 and rec["cpu_children_pct"] > 0
    assert rec["cpu_children_pct"] == pytest.approx(own, rel=0.25, abs=5)
    assert rec["rss_bytes"] > 10 << 20
    assert len(rec["cpu_cores_pct"]) == os.cpu_count()
    later = s.sample()  # the child exited: its io is kept as retired, totals never go backwards
    assert later["proc_write_bytes"] >= rec["proc_write_bytes"]


def test_sidecar_samples_and_stops_on_stdin_close(tmp_path):
    rd = RunDir.create(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "haiprof.runtime.sidecar", str(tmp_path), str(os.getpid()), "0.1"],
                            stdin=subprocess.PIPE)
    time.sleep(1.5)
    proc.stdin.close()
    assert proc.wait(timeout=5) == 0
    samples = rd.read_samples("system")
    assert len(samples) >= 3 and all("t_ns" in s and "cost_ns" in s for s in samples)
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(samples, samples[1:])]
    assert len(set(round(g / 1e6) for g in gaps)) > 1  # jittered, not a fixed period
    assert rd.read_status()["system"]["available"] is True


def test_sidecar_exits_when_parent_dies(tmp_path):
    RunDir.create(tmp_path)
    code = (f"import subprocess,sys,time,os\n"
            f"p=subprocess.Popen([sys.executable,'-m','haiprof.runtime.sidecar',{str(tmp_path)!r},str(os.getpid()),'0.1'],"
            f"stdin=subprocess.PIPE)\nprint(p.pid,flush=True)\ntime.sleep(0.5)\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    pid = int(out.stdout.split()[0])
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("side sampler outlived its parent")


def test_torn_last_line_is_skipped(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('["forward",1,2]\n["backward",2,3]\n["optim')
    assert read_jsonl(p) == [["forward", 1, 2], ["backward", 2, 3]]


def test_appender_flushes_in_background(tmp_path):
    rd = RunDir.create(tmp_path)
    app = rd.phase_appender().start()
    app.append(("forward", 1, 2))
    time.sleep(1.0)
    assert rd.read_phase_records() == [["forward", 1, 2]]  # before close
    app.close()


def test_narrows_to_root_modules_after_warmup(recorder):
    import torch.nn.modules.module as nn_module
    rec, records = recorder
    _train(steps=5)
    assert rec.narrowed_to == 1                               # the Sequential; MSE is functional
    assert not nn_module._global_forward_hooks                # the slow path is gone for every module
    assert [r[0] for r in records].count("forward") == 5      # still timed once per step after narrowing
