"""NVML collector on real hardware (skipped without a CUDA GPU)."""
import os

import pytest

from haiprof.analyzers import devices


@pytest.mark.gpu
def test_nvml_samples_device_and_process_memory():
    import torch
    from haiprof.collectors.gpu_nvml import NvmlSampler

    assert NvmlSampler.available() == (True, "")
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # 256 MiB owned by this process
    torch.cuda.synchronize()
    s = NvmlSampler(os.getpid())
    recs = []
    for _ in range(3):
        y = x.float().sum()  # keep the SMs busy between samples
        torch.cuda.synchronize()
        r = s.sample()
        r["t_ns"] = len(recs) * 10**9
        recs.append(r)
    d0 = recs[0]["devices"][0]
    assert recs[0]["info"][0]["name"]
    assert 0 < d0["mem_used_bytes"] <= d0["mem_total_bytes"]
    assert d0["power_mw"] > 0 and d0["sm_clock_mhz"] > 0 and "temperature_c" in d0
    own = [d.get("proc_mem_bytes") for r in recs for d in r["devices"] if d.get("proc_mem_bytes")]
    if not own:
        pytest.skip(f"NVML hides per-process memory here (pid namespace?): {s.unsupported}")
    assert max(own) >= 256 * 2**20
    summary, tl = devices.gpus(recs)
    assert summary["devices"]["0"]["power_w_mean"] > 0 and tl["util"]
    s.nvml.shutdown()
    del x, y


@pytest.mark.gpu
def test_haiprof_run_records_gpu_energy(tmp_path):
    from conftest import EXAMPLES, load_summary, run_haiprof
    out = tmp_path / "run"
    r = run_haiprof("run", "--quiet", "--out", out, EXAMPLES / "compute_bound.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["hardware"]["collectors"]["gpu"]["available"]
    assert s["hardware"]["gpu"]["devices"]
