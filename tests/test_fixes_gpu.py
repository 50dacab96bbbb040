"""GPU-only paths of the fixes (run wherever CUDA is available; skipped on CPU-only machines)."""
import os
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from haiprof.fixes import install_fixes

pytestmark = pytest.mark.gpu


def _res(fixes, fix_id):
    return next(r for r in fixes.finish() if r["id"] == fix_id)


class Waiting(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.full((256,), float(i)), i % 2


def test_prefetch_pins_memory_and_device_prefetcher_overlaps_copy():
    model = nn.Linear(256, 2).cuda()
    fixes = install_fixes({"prefetch": None})
    try:
        loader = DataLoader(Waiting(), batch_size=8)
        seen = []
        for x, y in loader:
            seen.append(x.device.type)
            x, y = x.cuda(), y.cuda()       # the script's own copy: a no-op once batches arrive on the GPU
            nn.functional.cross_entropy(model(x), y).backward()
            assert x[:, 0].tolist() == [float(v) for v in range(len(seen) * 8 - 8, len(seen) * 8)]
    finally:
        res = _res(fixes, "prefetch")
    assert loader.pin_memory and loader.num_workers > 0
    assert seen[0] == "cpu" and set(seen[2:]) == {"cuda"}     # watched one batch, then prefetched to the device
    assert "device prefetcher" in res["reason"] and len(seen) == 8


def test_fused_optim_uses_fused_kernels_on_cuda():
    model = nn.Linear(8, 4).cuda()
    fixes = install_fixes({"fused-optim": None})
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    finally:
        res = _res(fixes, "fused-optim")
    assert opt.param_groups[0]["fused"] is True and "fused=True" in res["reason"]


def test_amp_on_cuda_bf16_or_fp16_and_tf32():
    seen = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            h = self.fc(x)
            seen["dtype"] = h.dtype
            return h

    net = Net().cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    fixes = install_fixes({"amp": None})
    try:
        out = net(torch.randn(8, 64, device="cuda"))
        out.square().mean().backward()
        opt.step()
        tf32 = torch.backends.cuda.matmul.allow_tf32
    finally:
        res = _res(fixes, "amp")
    assert res["status"] == "applied" and out.dtype == torch.float32
    major, _ = torch.cuda.get_device_capability()
    assert seen["dtype"] == (torch.bfloat16 if major >= 8 else torch.float16)
    assert tf32 == (major >= 8)


def test_cuda_graphs_and_compile_reduce_overhead():
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32, device="cuda")
    fixes = install_fixes({"cuda-graphs": None})
    try:
        for _ in range(5):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        compiled = hasattr(model.__dict__.get("forward"), "_torchdynamo_orig_callable")
    finally:
        res = _res(fixes, "cuda-graphs")
    assert res["status"] == "applied" and "reduce-overhead" in res["reason"] and compiled
