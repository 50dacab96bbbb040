"""A long CUDA run (issue 21): more device steps than summary.json lists one by one. The device timeline, the
step chart on the device clock, the GPU busy chart and the slowest-steps table come from the device step
columns; a slow step injected on host and device heads the table with its GPU time. Written with the real phase
store writer (benchmarks/report_size.write_run, cuda=True: a CUDA-event span per forward, backward and
optimizer), then `haiprof report DIR` analyses it as any run."""
import json
import re
import sys

import pytest

from conftest import REPO, load_summary, run_haiprof

sys.path.insert(0, str(REPO))
from benchmarks.report_size import write_run  # noqa: E402

from haiprof.analysis.device import PER_STEP_MAX  # noqa: E402

N, SLOW = PER_STEP_MAX + 5_000, 17_321


@pytest.fixture(scope="module")
def cuda_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("long-cuda") / "run"
    write_run(out, N, SLOW, cuda=True)
    r = run_haiprof("report", "--quiet", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def _figures(run) -> dict:
    html = (run / "report.html").read_text()
    return json.loads(re.search(r'id="haiprof-figures">(.*?)</script>', html, re.S).group(1))


def test_long_cuda_run_is_analysed_on_the_device_timeline(cuda_run):
    s = load_summary(cuda_run)
    dev = s["device"]
    assert s["step_detection"]["timing"] == "cuda-events" and dev["timeline"] == "device"
    assert dev["steps_with_device_time"] >= N - 2          # every step but the first has its device end
    assert "per_step" not in dev and str(dev["steps_with_device_time"]) in dev["per_step_omitted"]
    # the device does 90% of each compute phase: busy is most of the step, never all of it (load + gaps idle)
    assert 0.5 < dev["busy_share"] < 0.95
    assert s["phase_share"]["dataloader"] > 0.05           # the GPU idles while the host loads
    assert abs(sum(s["phase_share"].values()) - 1) < 0.01
    # the slow step (300 ms more forward, on host and device) heads the table, with its GPU time
    top = s["slowest_steps"][0]
    assert top["step"] == SLOW and top["time_ms"] > 300


def test_long_cuda_report_charts_device_steps_in_buckets(cuda_run):
    figs = _figures(cuda_run)
    busy = figs["gpu-steps"]
    xs = busy["data"][0]["x"]
    assert 0 < len(xs) <= 2000 and "steps per bar" in busy["layout"]["title"]["text"]
    assert max(v for v in busy["data"][0]["y"] if v is not None) > 0
    html = (cuda_run / "report.html").read_text()
    row = re.search(rf'<tr data-step="{SLOW}">(.*?)</tr>', html, re.S).group(1)
    assert re.search(r"GPU busy [\d.]+ of [\d.]+ ms", row)
    assert "Device time per step" in json.dumps(figs["steps"]["layout"])
