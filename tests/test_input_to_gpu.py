"""Input to a GPU, the parts a CPU can check: pageable host-to-device copies found in recorded trace events, and
DataLoader workers sized from the measured cost per batch (loading + moving it between processes)."""
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from haiprof.analyzers.h2d import pageable_copies, pageable_finding
from haiprof.fixes import install_fixes, prefetch

# Kineto's memcpy events as torch.profiler writes them (cat gpu_memcpy; kind in the name; newer: in args)
EVENTS = [
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "dur": 2400.0,
     "args": {"device": 0, "stream": 7, "bytes": 77 << 20, "memory bandwidth (GB/s)": 33.6}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "dur": 1500.0,
     "args": {"device": 0, "stream": 13, "bytes": 4 << 20}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "dur": 10.0,
     "args": {"bytes": 1024, "src_kind": "Pageable", "dst_kind": "Device"}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "dur": 5.0, "args": {"bytes": 4}},
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "dur": 300.0, "args": {}},
]


def test_pageable_copies_from_trace_events():
    c = pageable_copies(EVENTS)
    assert (c["copies"], c["pageable"], c["pinned"]) == (3, 2, 1)
    assert c["pageable_bytes"] == (77 << 20) + 1024 and c["pageable_us"] == pytest.approx(2410.0)
    f = pageable_finding(c, loader_pin_memory=None, traced_us=10_000.0)   # weighed against the traced steps
    assert f["kind"] == "pageable-h2d" and f["fixes"] == ["prefetch"] and "2 of 3" in f["message"]


@pytest.mark.parametrize("events,pin,found", [
    ([], None, False),
    ([], False, True),              # pin_memory=False on the DataLoader is enough
    (EVENTS[1:2], True, False),     # pinned copies only
])
def test_pageable_finding_sources(events, pin, found):
    assert (pageable_finding(pageable_copies(events), pin) is not None) == found


@pytest.mark.parametrize("fetch,ipc,compute,frac,cores,expected", [
    (0.100, 0.001, 0.020, 0.9, 8, 6),      # CPU-bound: ceil(101/20) = 6 workers, not 8 cores
    (0.100, 0.001, 0.020, 0.9, 4, 4),      # ... capped at the cores
    (0.100, 0.001, 0.200, 0.9, 8, 1),      # compute is slower than loading: one worker keeps up
    (0.100, 0.001, 0.005, 0.05, 2, 8),     # waiting: up to 4 per core
    (0.030, 0.036, 0.010, 0.9, 16, 0),     # big batches: moving one costs more than loading it -> no workers
    (0.100, 0.001, None, 0.9, 8, None),    # no measured step: the core-count rule decides
])
def test_workers_for_cost(fetch, ipc, compute, frac, cores, expected):
    n, why = prefetch.workers_for_cost(fetch, ipc, compute, frac, cores)
    assert n == expected, why
    assert why


class BigBatches(Dataset):
    """Cheap to make, large to move: 4 MiB samples."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.full((1 << 20,), float(i))


def test_prefetch_sizes_workers_from_measured_cost_with_a_diagnosis(monkeypatch):
    # Diagnosis: 10 ms steps, 90% waiting for input -> 1 ms of compute per step.
    diagnosis = {"step_time_s": {"steady": 0.010}, "phase_share": {"dataloader": 0.9, "forward": 0.1}}
    fixes = install_fixes({"prefetch": None}, diagnosis)
    try:
        loader = DataLoader(BigBatches(), batch_size=4)
    finally:
        res = next(r for r in fixes.finish() if r["id"] == "prefetch")
    assert prefetch.sample_bytes(BigBatches()[0]) == 4 << 20
    assert prefetch.compute_s_from(diagnosis) == pytest.approx(0.001)
    # either workers sized from the measured cost, or none because moving costs as much as making the batch
    if res["status"] == "applied":
        assert "to move between processes" in res["reason"] and loader.num_workers >= 1, res
    else:
        assert "costs as much as loading it" in res["reason"] and loader.num_workers == 0, res


@pytest.mark.gpu
def test_pageable_and_pinned_copies_in_a_real_cuda_trace(tmp_path):
    import json

    from torch.profiler import ProfilerActivity, profile
    pageable, pinned = torch.randn(1 << 20), torch.randn(1 << 20).pin_memory()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        pageable.to("cuda")
        pinned.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    c = pageable_copies(json.loads((tmp_path / "t.json").read_text())["traceEvents"])
    assert c["pageable"] >= 1 and c["pinned"] >= 1, c


def test_the_dataloader_says_whether_batches_arrive_pinned(tmp_path):
    # The phase collector records each DataLoader's pin_memory beside num_workers; the analysis reads it back.
    import json

    from conftest import phase_records, run_haiprof
    from haiprof.analyzers.h2d import loader_pin_memory

    script = tmp_path / "pinless.py"
    script.write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for x, y in DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, "
        "pin_memory=False):\n"
        "    opt.zero_grad(); torch.nn.functional.mse_loss(m(x), y).backward(); opt.step()\n")
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, script)
    assert r.returncode == 0, r.stderr
    records = phase_records(out)
    assert [rec[3:] for rec in records if rec[0] == "@loader"] == [[0, False]]
    assert loader_pin_memory(records) is False
    assert loader_pin_memory([["@loader", 1, 1, 2, True]]) is True
    assert loader_pin_memory([["@loader", 1, 1, 2]]) is None     # recorded before the flag existed


def test_a_few_empty_pageable_copies_are_no_finding():
    # launch_base's trace: 6 pageable copies of 0 bytes, 5.5 µs in all, over 3 steps of ~30 ms.
    tiny = [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "dur": 0.9,
             "args": {"bytes": 0}}] * 6
    assert pageable_finding(pageable_copies(tiny), None, traced_us=90_000.0) is None
    # the same copies taking 5% of the traced time are a finding, with their share in it
    f = pageable_finding(pageable_copies(EVENTS), None, traced_us=2410.0 / 0.05)
    assert f["severity"] == "moderate" and f["share"] == pytest.approx(0.05) and "5% of the traced time" in f["message"]
