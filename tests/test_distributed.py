"""Distributed runs end to end: real torchrun, real gloo DDP on CPU, 2 ranks, a few steps each.

The communication-bound case runs on a real slow link: a private network namespace whose loopback is shaped to
1 Gbit/s with tc (benchmarks/shaped_net.py); it needs root and skips elsewhere with the reason.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, HAIPROF, in_parallel, load_summary, run_haiprof, run_on_shaped_link
from haiprof.rundir import DIGEST_FILES


EXAMPLE = EXAMPLES / "ddp_comm_bound.py"
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
# Compute-heavy enough that on a plain loopback the gradient sync hides behind compute; on 1 Gbit/s it cannot.
HEAVY = ["--steps", "5", "--batch-size", "256"]
# These jobs run 5-6 steps: the op-level tracing window (on by default in every rank) is turned off with
# --trace-steps 0, or it would leave too few untraced steps to compare ranks.
pytestmark = pytest.mark.timeout(240)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dist(s: dict) -> dict:
    return s["distributed"]


def _assert_report(out: Path):
    html = (out / "report.html").read_text()
    assert 'id="ranks"' in html and 'id="rank-table"' in html


def test_unshaped_compute_heavy_is_not_communication(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "2", EXAMPLE, *HEAVY, "--workers", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    s = load_summary(out)
    assert s["bottleneck"] != "communication", s["headline"]
    assert s["bottleneck"] == "compute", s["headline"]
    # One directory per rank; the DataLoader worker processes are not ranks.
    assert sorted(p.name for p in out.glob("rank-*")) == ["rank-0", "rank-1"]
    d = _dist(s)
    assert d["world_size"] == 2 and d["hosts"] == {socket.gethostname(): [0, 1]}
    for row in d["ranks"]:
        assert row["status"] == "ok" and row["steps"] == 5 and row["local_rank"] == row["rank"]
        assert abs(sum(row["phase_share"].values()) - 1) < 0.01
        assert row["phase_share"]["allreduce"] > 0      # DDP's sync inside backward was seen
    assert abs(sum(s["phase_share"].values()) - 1) < 0.01
    assert s["step_time_s"]["steady"] > 0 and s["step_time_s"]["median"] > 0   # the summary contract, for a job
    assert d["comm"]["steps_compared"] == 4 and d["ddp"]["comm_ms"] > 0
    meta = json.loads((out / "rank-1" / "meta.json").read_text())
    assert meta["rank"] == 1 and meta["local_rank"] == 1 and meta["host"] == socket.gethostname()
    _assert_report(out)


def test_shaped_loopback_is_communication_bound(tmp_path):
    out = tmp_path / "run"
    r = run_on_shaped_link([*HAIPROF, "run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "2", EXAMPLE,
                            *HEAVY])
    assert r.returncode == 0, r.stderr[-3000:]
    s = load_summary(out)
    assert s["bottleneck"] == "communication", s["headline"]
    comm = next(f for f in s["findings"] if f["kind"] == "communication")
    ev = comm["evidence"]
    # bucket's smaller gain is offered where the run can resolve it; a busy machine's spread can hide it (then said)
    assert comm["fixes"][0] == "compress"
    assert comm["fixes"] == ["compress", "bucket"] or \
        "below what this run can resolve" in ev.get("fixes_left_out", {}).get("bucket", ""), ev
    assert ev["exposed_comm_share"] >= 0.2 and ev["transfer_share"] >= 0.2
    assert 0 < ev["exposed_fraction_of_comm"] <= 1
    assert "exposed communication" in s["headline"]
    # both ranks behind the one shaped link: no single node's link is named (analyzers/slow_link.py)
    assert "slow_link" not in _dist(s) and "network link" not in s["headline"]
    _assert_report(out)


def test_straggler_on_rank1_named_with_its_dataloader(tmp_path):
    out = tmp_path / "run"
    # The wrapped-launcher form: an existing torchrun command line, unchanged, after `--`. 12 steps: the first
    # compared step's wait can hide in DDP's bucket rebuild (an untimed collective in step 2's forward), and the
    # culprit's chance test needs the rest to show rank 1 late
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--", TORCHRUN, "--nproc-per-node", "2", EXAMPLE, "--steps", "12",
                    "--batch-size", "16", "--layers", "2", "--slow-rank", "1", "--slow-ms", "250")
    assert r.returncode == 0, r.stderr[-3000:]
    s = load_summary(out)
    d = _dist(s)
    assert [x["rank"] for x in d["stragglers"]] == [1], d["comm"]
    st = d["stragglers"][0]
    assert st["cause"] == "dataloader" and st["host"] == socket.gethostname()
    finding = next(f for f in s["findings"] if f["kind"] == "straggler")
    assert "rank 1" in finding["message"] and "DataLoader" in finding["message"]
    assert d["comm"]["wait_ms_per_step"]["0"] > 150     # rank 0 waits for rank 1 at the sync
    assert s["bottleneck"] == "io"
    # the verdict and the first action follow the time: rank 1's loader, the others' wait as the gain
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "input"
    assert "waited for rank 1" in s["headline"] and "its DataLoader" in s["headline"], s["headline"]
    first = s["next_steps"][0]
    assert "rank 1" in first["title"] and first["fix"] == "prefetch", first
    assert first["gain_s"] > 0.15
    meta = json.loads((out / "meta.json").read_text())
    assert meta["launcher_argv"][:2] == ["--nproc-per-node", "2"]


def test_killed_rank_keeps_the_survivor_and_names_the_missing(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "2", EXAMPLE, "--steps", "30", "--batch-size", "16",
                    "--layers", "2", "--die-rank", "1", "--die-step", "4")
    assert r.returncode == 1
    s = load_summary(out)
    d = _dist(s)
    assert 1 in d["failed_ranks"]
    bad = next(p for p in d["problems"] if p["rank"] == 1)
    assert bad["exit_code"] == -9 and "SIGKILL" in bad["message"]
    # torchrun's agent SIGTERMs the survivor while it unwinds from the broken allreduce, often before the records
    # queued since its last periodic flush (all of its steps, in a job this short) are written: they must reach the
    # disk all the same, and so must its outcome in meta.json.
    rank0 = next(x for x in d["ranks"] if x["rank"] == 0)
    assert rank0["steps"] >= 3 and rank0["phase_share"]
    assert json.loads((out / "rank-0" / "meta.json").read_text())["exit_code"] is not None
    assert "rank 1 failed (exit -9 (SIGKILL))" in s["headline"]
    assert s["exit_code"] == 1
    html = (out / "report.html").read_text()
    assert "rank 1" in html and "SIGKILL" in html


def test_teardown_abort_is_a_failed_exit_not_communication(tmp_path):
    out = tmp_path / "run"
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "2", EXAMPLE, *HEAVY, "--abort-at-exit-rank", "1")
    assert r.returncode == 1
    s = load_summary(out)
    assert s["exit_code"] == 1 and s["bottleneck"] != "communication", s["headline"]
    bad = next(p for p in _dist(s)["problems"] if p["rank"] == 1)
    assert bad["status"] == "teardown-abort" and bad["exit_code"] == -6
    assert "training finished (5 steps)" in bad["message"]


def test_store_gather_with_separate_output_directories(tmp_path):
    """Two "nodes" with their own --out each (no shared filesystem): rank 1's data reaches rank 0 via the store."""
    port = str(_free_port())
    outs = [tmp_path / "node0", tmp_path / "node1"]
    procs = [subprocess.Popen([*HAIPROF, "run", "--trace-steps", "0", "--quiet", "--out", outs[i], "--nnodes", "2", "--node-rank", str(i),
                               "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", port,
                               EXAMPLE, "--steps", "4", "--batch-size", "16", "--layers", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    results = [p.communicate(timeout=200) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in results]
    # only rank 1's digest came through the store: its raw data (phases, samples, traces) stayed on its "node"
    came = {p.relative_to(outs[0] / "rank-1").as_posix() for p in (outs[0] / "rank-1").rglob("*") if p.is_file()}
    assert came == set(DIGEST_FILES), came
    assert (outs[1] / "rank-1" / "phases.bin").is_file()
    gather = json.loads((outs[0] / "gather.json").read_text())
    assert gather["ranks"]["1"].startswith("store"), gather
    s = load_summary(outs[0])
    d = _dist(s)
    rows = {x["rank"]: x for x in d["ranks"]}
    assert set(rows) == {0, 1} and rows[1]["steps"] == 4 and rows[1]["source"].startswith("store")
    assert rows[1]["node_rank"] == 1 and rows[0]["node_rank"] == 0
    # the merged report names every rank's host and its directory there
    assert rows[1]["dir"] == str((outs[1] / "rank-1").resolve()) and rows[1]["host"] == socket.gethostname()
    html = (outs[0] / "report.html").read_text()
    assert str((outs[1] / "rank-1").resolve()) in html and str((outs[0] / "rank-0").resolve()) in html
    # Node 1's directory holds only its own rank; it did not need rank 0's.
    assert sorted(p.name for p in outs[1].glob("rank-*")) == ["rank-1"]
    s1 = load_summary(outs[1])
    assert [x["status"] for x in _dist(s1)["ranks"]] == ["elsewhere", "ok"] and not _dist(s1)["problems"]


def test_bad_launcher_input_is_one_line(tmp_path):
    missing, no_python, both = in_parallel(   # three independent command lines, side by side
        lambda: run_haiprof("run", "--out", tmp_path / "x", "--", TORCHRUN, "--nproc-per-node", "2",
                            tmp_path / "nope.py"),
        lambda: run_haiprof("run", "--", TORCHRUN, "--no-python", "--nproc-per-node", "1", "echo"),
        lambda: run_haiprof("run", "--nproc-per-node", "2", "--", TORCHRUN, "--nproc-per-node", "2", EXAMPLE))
    r = missing
    assert r.returncode != 0 and "Traceback" not in r.stderr
    # a target python cannot open is said as python says it, once, before any rank starts
    assert "can't open file" in r.stderr and "nope.py" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = no_python
    assert r.returncode != 0 and "haiprof: error:" in r.stderr and "Traceback" not in r.stderr
    r = both
    assert r.returncode != 0 and "not both" in r.stderr


@pytest.mark.gpu
def test_nccl_ddp_on_gpu(tmp_path):
    import torch
    n = min(torch.cuda.device_count(), 2)
    script = tmp_path / "nccl_ddp.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "from torch import nn\n"
        "dist.init_process_group('nccl'); r = dist.get_rank(); torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
        "m = nn.parallel.DistributedDataParallel(nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(6)]).cuda())\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
        "for _ in range(8):\n"
        "    x = torch.randn(256, 2048).cuda(); opt.zero_grad(); m(x).sum().backward(); opt.step()\n"
        "dist.destroy_process_group()\n")
    out = tmp_path / "run"
    r = run_haiprof("run", "--out", out, "--nproc-per-node", str(n), script)
    assert r.returncode == 0, r.stderr[-3000:]
    s = load_summary(out)
    d = _dist(s)
    assert d["world_size"] == n and all(x["status"] == "ok" and x["steps"] == 8 for x in d["ranks"])
    # On CUDA the host-side tail undercounts (NCCL waits are stream waits); DDP's own CUDA-event timers do not.
    assert d["ddp"] is not None and d["ddp"]["comm_ms"] > 0
