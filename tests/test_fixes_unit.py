"""Each fix, installed in this process on real torch objects: it takes effect, or says why not, and undoes itself."""
import os
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from haiprof.analyzers.compare import compare_summaries, text_lines
from haiprof.analyzers.loss_guard import compare_losses
from haiprof.fixes import FixSpecError, install_fixes, parse_spec
from haiprof.fixes import amp as amp_fix
from haiprof.fixes import bucket, fused_optim, prefetch

from conftest import REPO


def _result(fixes, fix_id):
    return next(r for r in fixes.finish() if r["id"] == fix_id)


class WaitingDataset(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.002)   # storage latency: no CPU
        return torch.full((4,), float(i)), os.getpid()


class BusyDataset(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        t0 = time.process_time()
        while time.process_time() - t0 < 0.003:   # CPU-bound preprocessing
            pass
        return torch.full((4,), float(i))


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


def test_parse_spec_order_variants_and_errors():
    assert parse_spec("compress=powersgd, prefetch") == {"prefetch": None, "compress": "powersgd"}
    with pytest.raises(FixSpecError, match="unknown fix 'turbo'"):
        parse_spec("prefetch,turbo")
    with pytest.raises(FixSpecError):
        parse_spec(" , ")


def test_prefetch_waiting_loader_gets_more_workers_than_cores_and_they_really_load():
    fixes = install_fixes({"prefetch": None})
    try:
        loader = DataLoader(WaitingDataset(), batch_size=8)
        pids = {int(p) for _, pid in loader for p in pid}
    finally:
        res = _result(fixes, "prefetch")
    cores = len(os.sched_getaffinity(0))
    assert loader.num_workers == min(prefetch.MAX_WORKERS, prefetch.WAIT_WORKERS_PER_CORE * cores) > cores
    assert loader.persistent_workers and loader.prefetch_factor == prefetch.PREFETCH_FACTOR_WAITING
    assert os.getpid() not in pids and len(pids) > 1          # batches really came from worker processes
    assert res["status"] == "applied" and "mostly waits" in res["reason"]
    assert DataLoader(WaitingDataset()).num_workers == 0      # undone after finish()


def test_prefetch_cpu_bound_loader_gets_one_worker_per_available_core():
    fixes = install_fixes({"prefetch": None})
    try:
        loader = DataLoader(BusyDataset(), batch_size=8)
    finally:
        res = _result(fixes, "prefetch")
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        assert res["status"] == "skipped" and "compete" in res["reason"]
    else:
        assert loader.num_workers == cores, res
        assert "CPU-bound" in res["reason"]


def test_prefetch_skips_unsharded_iterable_and_explicit_workers():
    fixes = install_fixes({"prefetch": None})
    try:
        it_loader = DataLoader(Stream(), batch_size=2)
        own = DataLoader(TensorDataset(torch.zeros(8, 2)), num_workers=1)
    finally:
        res = _result(fixes, "prefetch")
    assert it_loader.num_workers == 0 and own.num_workers == 1
    assert res["status"] == "skipped"
    assert "IterableDataset without worker sharding" in res["reason"] and "already uses 1 worker" in res["reason"]


class ColdStartWaitingDataset(WaitingDataset):
    """Waits on storage, but its first fetch and one later fetch burn CPU (lazy import, a GC pause)."""
    def __init__(self):
        self.calls = 0

    def __getitem__(self, i):
        self.calls += 1
        if self.calls in (1, 3):
            t0 = time.thread_time()
            while time.thread_time() - t0 < 0.02:
                pass
        return super().__getitem__(i)


def test_prefetch_probe_ignores_a_cold_first_fetch_and_one_slow_outlier():
    frac = prefetch.probe_cpu_fraction(ColdStartWaitingDataset())
    assert frac is not None and frac < prefetch.CPU_BOUND_FRACTION
    assert prefetch.probe_cpu_fraction(BusyDataset()) >= prefetch.CPU_BOUND_FRACTION


def test_choose_workers_rules():
    assert prefetch.choose_workers(0.9, 4)[0] == 4
    assert prefetch.choose_workers(0.05, 2)[0] == 8
    assert prefetch.choose_workers(0.05, 8)[0] == prefetch.MAX_WORKERS


@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_fused_optim_makes_cpu_optimizers_fused(cls):
    model = nn.Linear(4, 2)
    fixes = install_fixes({"fused-optim": None})
    try:
        opt = cls((p for p in model.parameters()), lr=0.1)   # a generator: must still get every parameter
        explicit = cls(model.parameters(), lr=0.1, foreach=False)
    finally:
        res = _result(fixes, "fused-optim")
    # torch has fused CPU kernels for SGD/Adam/AdamW (one call for the whole update)
    assert opt.param_groups[0]["fused"] is True and len(opt.param_groups[0]["params"]) == 2
    # --fix fused-optim is what the user asked for: it overrides the script's foreach=False, and says so
    assert explicit.param_groups[0]["fused"] is True and not explicit.param_groups[0]["foreach"]
    assert res["status"] == "applied" and "fused=True" in res["reason"]
    assert any("overrides the script's foreach=False" in e["reason"] for e in res["events"])
    assert cls(model.parameters(), lr=0.1).param_groups[0]["foreach"] is None   # undone


def test_fused_optim_leaves_fused_and_differentiable_alone():
    model = nn.Linear(4, 2)
    fixes = install_fixes({"fused-optim": None})
    try:
        fused = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
        diff = torch.optim.SGD(model.parameters(), lr=0.1, differentiable=True)
    finally:
        res = _result(fixes, "fused-optim")
    assert fused.param_groups[0]["fused"] is True and not diff.param_groups[0].get("fused")
    assert res["status"] == "skipped"
    assert "already uses fused=True" in res["reason"] and "differentiable" in res["reason"]


def test_fused_optim_foreach_where_no_fused_kernel():
    assert fused_optim.choose([torch.zeros(2, dtype=torch.complex64)], torch)[0] == "foreach"
    assert fused_optim.choose([torch.zeros(2)], torch)[0] == "fused"


def test_fused_optim_same_updates_as_default():
    torch.manual_seed(0)
    a, b = nn.Linear(8, 3), nn.Linear(8, 3)
    b.load_state_dict(a.state_dict())
    x = torch.randn(16, 8)
    plain = torch.optim.Adam(a.parameters(), lr=1e-2)
    fixes = install_fixes({"fused-optim": None})
    try:
        fast = torch.optim.Adam(b.parameters(), lr=1e-2)
    finally:
        fixes.finish()
    for m, o in ((a, plain), (b, fast)):
        for _ in range(3):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q)


def test_amp_autocast_active_in_root_forward_and_output_float32():
    seen = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            h = self.fc(x)
            seen["autocast"], seen["dtype"] = torch.is_autocast_enabled("cpu"), h.dtype
            return h

    net = Net()
    fixes = install_fixes({"amp": None})
    try:
        out = net(torch.randn(2, 8))
        loss_fn_out = nn.MSELoss()(out, torch.zeros_like(out))   # a parameterless root call: not autocast
    finally:
        res = _result(fixes, "amp")
    if amp_fix.cpu_bf16_flags():
        assert res["status"] == "applied" and "bf16" in res["reason"]
        assert seen == {"autocast": True, "dtype": torch.bfloat16}
        assert out.dtype == torch.float32 and loss_fn_out.dtype == torch.float32
    else:
        assert res["status"] == "skipped" and "no native bf16" in res["reason"]
    assert not torch.is_autocast_enabled("cpu")
    net(torch.randn(2, 8))
    assert seen["autocast"] is False   # hooks removed


def test_amp_plan_skips_cpu_without_bf16(tmp_path):
    info = tmp_path / "cpuinfo"
    # Format of /proc/cpuinfo (Linux arch/x86/kernel/cpu/proc.c): "flags\t\t: fpu vme ..."
    info.write_text("processor\t: 0\nflags\t\t: fpu vme sse sse2 avx2 avx512f\n\n")
    dtype, why = amp_fix.plan(torch, "cpu", str(info))
    assert dtype is None and "no native bf16" in why
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n\n")
    assert amp_fix.plan(torch, "cpu", str(info))[0] is torch.bfloat16


def test_cuda_graphs_skipped_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: see test_fixes_gpu.py")
    fixes = install_fixes({"cuda-graphs": None})
    res = _result(fixes, "cuda-graphs")
    assert res == {"id": "cuda-graphs", "status": "skipped", "reason": "no CUDA device",
                   "events": [{"status": "skipped", "target": None, "reason": "no CUDA device"}]}


def test_fix_error_is_reported_not_raised(monkeypatch):
    fixes = install_fixes({"prefetch": None})
    monkeypatch.setattr(prefetch, "probe_cpu_fraction", lambda *a: 1 / 0)
    try:
        loader = DataLoader(WaitingDataset(), batch_size=8)
    finally:
        res = _result(fixes, "prefetch")
    assert loader.num_workers == 0
    assert res["status"] == "skipped" and "internal error" in res["reason"] and "ZeroDivisionError" in res["reason"]


def test_bucket_size_rule():
    assert bucket.choose_bucket_mb(400 * 2**20) == 100.0
    assert bucket.choose_bucket_mb(1000) == bucket.MIN_BUCKET_MB
    assert bucket.choose_bucket_mb(10 * 2**30) == bucket.MAX_BUCKET_MB


def test_loss_guard_flags_divergence_and_accepts_noise():
    base = [2.3, 2.2, 2.1, 2.0, 1.9, 1.8]
    ok = compare_losses(base, [x * 1.004 for x in base])
    assert ok["status"] == "ok" and ok["steps_compared"] == 6
    bad = compare_losses(base, [x * 1.5 for x in base])
    assert bad["status"] == "diverged" and "beyond tolerance" in bad["message"]
    assert compare_losses(base, base[:3] + [float("nan")])["status"] == "diverged"
    assert compare_losses([], base)["status"] == "unavailable"


def test_compare_summaries_phases_and_verdict():
    a = {"step_time_s": {"median": 0.2}, "bottleneck": "io", "steps": 10,
         "phase_share": {"dataloader": 0.5, "forward": 0.25, "backward": 0.25}}
    b = {"step_time_s": {"median": 0.1}, "bottleneck": "compute", "steps": 10,
         "phase_share": {"dataloader": 0.0, "forward": 0.5, "backward": 0.5}}
    c = compare_summaries(a, b)
    assert c["speedup"] == pytest.approx(2.0) and c["verdict_changed"]
    assert c["phases"]["dataloader"]["delta_s"] == pytest.approx(-0.1)
    text = "\n".join(text_lines(c))
    assert "2.00x" in text and "io -> compute (changed)" in text


def _compiled(model) -> bool:
    return hasattr(model.__dict__.get("forward"), "_torchdynamo_orig_callable")


def test_compile_decides_at_first_backward_not_first_call():
    # nanoGPT-style: an eval pass (eval mode, no_grad) before training must not make the fix give up.
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    fixes = install_fixes({"compile": None})
    try:
        model.eval()
        with torch.no_grad():
            model(torch.randn(4, 8))
        assert not _compiled(model)
        model.train()
        out = model(torch.randn(4, 8))
        assert not _compiled(model)                # a forward alone is not training yet
        out.square().mean().backward()
        assert _compiled(model)                    # the first backward decided: compiled from the next call on
    finally:
        res = _result(fixes, "compile")
    assert res["status"] == "applied" and "first backward" in res["reason"], res
    assert not _compiled(model)                    # undone


def test_compile_skips_inference_only_scripts():
    model = nn.Linear(8, 1)
    fixes = install_fixes({"compile": None})
    try:
        model(torch.randn(2, 8)).detach()          # grad enabled, but no backward ever runs
        with torch.no_grad():
            model(torch.randn(2, 8))
    finally:
        res = _result(fixes, "compile")
    assert not _compiled(model)
    assert res["status"] == "skipped" and "never ran backward" in res["reason"], res
