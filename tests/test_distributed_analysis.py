"""The merge arithmetic on hand-built ranks: transfer vs wait, straggler causes, DDP timer samples, exit codes."""
import pytest

from haiprof.analyzers import distributed as D
from step_rows import step_columns
from haiprof.runtime.distributed import launcher_prefix_len
from haiprof.runtime.worker import parse

MS = 1_000_000


def _steps(n, **phase_ms):
    out, t = [], 0
    for i in range(n):
        ph = {p: int(v * MS) for p, v in phase_ms.items()}
        dur = sum(ph.values())
        ph.setdefault("other", 0)
        out.append((i, t, t + dur, ph))
        t += dur
    return step_columns(out)


def _rank(rank, steps, numel=1000, host="h"):
    return D.RankInput(rank, {"host": host, "local_rank": rank, "exit_code": 0, "end_time": 1.0}, steps,
                       len(steps), [numel] * len(steps))


def test_transfer_is_the_minimum_and_the_rest_is_waiting():
    fast = _rank(0, _steps(5, dataloader=10, forward=40, backward=40, allreduce=110))
    slow = _rank(1, _steps(5, dataloader=110, forward=40, backward=40, allreduce=10))
    split = D.comm_split([fast, slow])
    assert split["transfer_ms_per_step"] == pytest.approx(10)
    assert split["wait_ms_per_step"] == {"0": pytest.approx(100), "1": 0}
    assert split["last_to_arrive"] == {"0": 0, "1": 5}
    assert split["skew_share"] == pytest.approx(100 / 400)
    [s] = D.stragglers([fast, slow], split)
    assert s["rank"] == 1 and s["cause"] == "dataloader"


def test_compute_straggler_vs_data_imbalance():
    fast = _rank(0, _steps(5, forward=40, backward=40, allreduce=110))
    slow_same = _rank(1, _steps(5, forward=90, backward=90, allreduce=10))
    [s] = D.stragglers([fast, slow_same], D.comm_split([fast, slow_same]))
    assert s["cause"] == "compute"
    slow_big = _rank(1, _steps(5, forward=90, backward=90, allreduce=10), numel=2000)
    [s] = D.stragglers([fast, slow_big], D.comm_split([fast, slow_big]))
    assert s["cause"] == "data imbalance" and "2.00x" in s["reason"]


def test_no_straggler_when_ranks_are_even():
    a = _rank(0, _steps(5, forward=40, backward=40, allreduce=50))
    b = _rank(1, _steps(5, forward=41, backward=40, allreduce=49))
    assert D.stragglers([a, b], D.comm_split([a, b])) == []


def test_ddp_running_averages_are_unrolled_and_warmup_dropped():
    # DDP keeps running means: comm samples 1000 (warm-up), 100, 100 -> 1000, 550, 400; overlap 0, 60, 60.
    recs = [{"avg_backward_comm_time": c * MS, "avg_backward_compute_comm_overlap_time": o * MS, "model": 0}
            for c, o in ((1000, 0), (550, 30), (400, 40))]
    r = _rank(0, [])
    r.ddp_stats = recs + [recs[-1]]       # a repeated read adds nothing
    out = D.ddp_overlap([r])
    assert out["samples"] == 2 and out["comm_ms"] == pytest.approx(100)
    assert out["overlap_ms"] == pytest.approx(60) and out["exposed_fraction"] == pytest.approx(0.4)


def test_rank_rows_missing_killed_and_teardown_abort():
    ok = _rank(0, _steps(3, forward=10))
    aborted = _rank(1, _steps(3, forward=10))
    killed = _rank(2, _steps(2, forward=10))
    killed.meta.update(exit_code=None, end_time=None)
    failures = {"1": {"exitcode": -6}, "2": {"exitcode": -9}, "3": {"exitcode": 1}}
    rows, problems = D.rank_rows([ok, aborted, killed], [0, 1, 2, 3], failures)
    status = {r["rank"]: r["status"] for r in rows}
    assert status == {0: "ok", 1: "teardown-abort", 2: "failed", 3: "missing"}
    msgs = {p["rank"]: p["message"] for p in problems}
    assert "SIGABRT" in msgs[1] and "training finished (3 steps)" in msgs[1]
    assert "SIGKILL" in msgs[2] and "exit code 1" in msgs[3]


def test_launcher_detection_and_worker_argv():
    assert launcher_prefix_len(["torchrun", "--nproc-per-node", "2", "x.py"]) == 1
    assert launcher_prefix_len(["/usr/bin/torchrun", "x.py"]) == 1
    assert launcher_prefix_len(["python3", "-m", "torch.distributed.run", "x.py"]) == 3
    assert launcher_prefix_len(["train.py", "torchrun"]) == 0
    opts, target = parse(["--local-rank=1", "--run-dir", "d", "--steps", "3", "--", "t.py", "-a"])
    assert opts["run_dir"] == "d" and opts["steps"] == "3" and target == ["t.py", "--local-rank=1", "-a"]
    _, target = parse(["--run-dir", "d", "--", "-m", "pkg.mod", "x"])
    assert target == ["-m", "pkg.mod", "x"]
