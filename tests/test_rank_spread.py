"""Ranks at scale on hand-built step tables: outliers, a slow node named once, the heatmap grid; the rank digest's
step table stays bounded, and a digest is stale when its raw data is newer or another analysis version wrote it."""
import json
import os
import time

import numpy as np
import pytest

from haiprof.analysis import rank_digest
from haiprof.analyzers import rank_spread
from haiprof.analyzers.steps import ALL_PHASES
from step_rows import step_columns

MS = 1e6


def _table(n, rng, dataloader=1.0, forward=3.0, backward=4.0, allreduce=10.0):
    cols = {p: np.zeros(n) for p in rank_digest.COLUMNS}
    cols["dataloader"][:] = dataloader * MS
    cols["forward"][:] = forward * MS * (1 + rng.normal(0, 0.02, n))
    cols["backward"][:] = backward * MS * (1 + rng.normal(0, 0.02, n))
    cols["allreduce"][:] = allreduce * MS
    cols["duration_ns"] = sum(cols[p] for p in ALL_PHASES)
    cols["first_step"] = np.arange(n, dtype=float)
    cols["steps"] = np.ones(n)
    return cols


def _job(world, per_node=8, slow_node=None, slow_rank=None, extra=20.0, seed=1):
    rng = np.random.default_rng(seed)
    ranks, tables = [], []
    for r in range(world):
        slow = (slow_node is not None and r // per_node == slow_node) or r == slow_rank
        t = _table(50, rng, dataloader=1.0 + (extra if slow else 0.0))
        tables.append(t)
        ranks.append({"rank": r, "host": f"n{r // per_node}", "local_rank": r % per_node, "node_rank": r // per_node,
                      **rank_spread.rank_medians(t)})
    return ranks, tables


def test_slow_node_is_one_finding_and_a_slow_rank_another():
    ranks, _ = _job(64, slow_node=3, slow_rank=50)
    out = rank_spread.outliers(ranks)
    assert [n["host"] for n in out["nodes"]] == ["n3"]
    assert out["nodes"][0]["slow_ranks"] == list(range(24, 32)) and out["nodes"][0]["cause"] == "dataloader"
    assert [r["rank"] for r in out["ranks"]] == [50]
    assert out["ranks"][0]["host"] == "n6" and out["ranks"][0]["local_rank"] == 2
    assert out["nodes"][0]["excess_ms"] == pytest.approx(20, rel=0.1)


def test_two_slow_ranks_on_a_node_of_eight_are_ranks_not_the_node():
    ranks, _ = _job(32)
    for r in ranks[9:11]:    # node n1, 2 of its 8 ranks
        r["work_ms"] += 15
        r["dataloader_ms"] += 15
    out = rank_spread.outliers(ranks)
    assert out["nodes"] == [] and sorted(r["rank"] for r in out["ranks"]) == [9, 10]


def test_even_ranks_and_noise_name_nobody():
    ranks, _ = _job(128, seed=7)
    out = rank_spread.outliers(ranks)
    assert out["nodes"] == [] and out["ranks"] == []
    assert rank_spread.outliers(ranks[:2])["note"]      # two ranks: the straggler logic's job


def test_grid_is_ranks_by_buckets_of_ms():
    _, tables = _job(16, slow_rank=5)
    g = rank_spread.grid(tables, 10)
    assert g["step"].shape == (16, 10) and g["buckets"][0] == 0 and len(g["buckets"]) == 10
    assert g["data"][5].mean() == pytest.approx(21, rel=0.01) and g["data"][4].mean() == pytest.approx(1, rel=0.01)
    assert g["comm"][0].mean() == pytest.approx(10, rel=0.01)


def _steps(n):
    return step_columns([(i, i * 100, i * 100 + 10 * MS, {"forward": 4 * MS, "allreduce": 6 * MS}) for i in range(n)])


def test_step_table_is_exact_up_to_max_rows_then_bucketed():
    small = rank_digest.step_table(_steps(100))
    assert len(small["duration_ns"]) == 100 and small["steps"].sum() == 100
    big = rank_digest.step_table(_steps(100_000))
    assert len(big["duration_ns"]) <= rank_digest.MAX_ROWS and big["steps"].sum() == 100_000
    assert big["allreduce"].mean() == pytest.approx(6 * MS)
    assert len(rank_digest.pack(big)) < 300_000


def test_digest_is_stale_when_raw_data_is_newer_or_version_differs(tmp_path):
    d = tmp_path / "rank-3"
    d.mkdir()
    (d / "phases.bin").write_bytes(b"x")
    table = rank_digest.step_table(_steps(10))
    (d / rank_digest.STEPS_FILE).write_bytes(rank_digest.pack(table))
    digest = {"analysis_version": rank_digest.ANALYSIS_VERSION, "columns": list(rank_digest.COLUMNS)}
    (d / "summary.json").write_text(json.dumps({"rank_digest": digest}))
    past = time.time() - 100
    os.utime(d / "phases.bin", (past, past))
    summary, got = rank_digest.load_fresh(d)
    assert np.array_equal(got["duration_ns"], table["duration_ns"])
    os.utime(d / "phases.bin")                       # raw data newer than the digest
    assert rank_digest.load_fresh(d) is None
    os.utime(d / "phases.bin", (past, past))
    (d / "summary.json").write_text(json.dumps({"rank_digest": {**digest, "analysis_version": "0.0+digest0"}}))
    assert rank_digest.load_fresh(d) is None          # another version's digest, raw data here: analyse again
    (d / "phases.bin").unlink()
    assert rank_digest.load_fresh(d) is not None      # ...but it is all there is of a rank whose raw data stayed away


def test_digest_keeps_sync_statistics_bounded():
    reducer = [["@ddp", 0, 0, {"avg_backward_comm_time": c, "model": 0}] for c in (5, 5, 4, 4, 3)]
    sharded = [["@ddp", 0, 0, {"source": "fsdp", "comm_ns": i}] for i in range(5000)]
    batches, ddp = rank_digest._rank_records(reducer + sharded + [["@batch", 0, 0, 64]])
    assert batches == [64]
    assert [r["avg_backward_comm_time"] for r in ddp if "avg_backward_comm_time" in r] == [5, 4, 3]
    per_step = [r for r in ddp if r.get("source") == "fsdp"]
    assert len(per_step) <= rank_digest.MAX_ROWS and per_step[0]["comm_ns"] == 0 and per_step[-1]["comm_ns"] > 4900


def test_step_table_splits_device_time_into_busy_and_idle():
    host = _steps(3)
    device = step_columns([(1, 0, 10, {"forward": 3 * MS, "idle:inside_spans": 1 * MS, "idle:dataloader": 2 * MS})])
    t = rank_digest.step_table(host, device)
    assert list(t["device_busy_ns"]) == [0, 3 * MS, 0] and list(t["device_idle_ns"]) == [0, 3 * MS, 0]
