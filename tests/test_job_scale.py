"""`haiprof report` on synthetic jobs built from a real 2-rank gloo run (benchmarks/job_scale.py): the merge reads
the ranks' digests alone, re-analyses only stale ranks (in a process pool), and the 256-rank page in headless
Chromium draws its heatmaps and names the injected slow node and slow rank."""
import json
import os
import sys
import time

import pytest

from conftest import REPO, load_summary, run_haiprof
from test_report_browser import browser, open_report  # noqa: F401  (the module's Chromium fixture)

sys.path.insert(0, str(REPO))
from benchmarks import job_scale  # noqa: E402

pytestmark = pytest.mark.timeout(240)


def test_merge_reads_digests_and_reanalyses_only_stale_ranks(tmp_path):
    job = job_scale.build_job(tmp_path / "job", 16, slow_rank=9)
    # a fresh digest is all the merge reads: rank 5's raw phases could be anything
    past = time.time() - 60
    (job / "rank-5" / "phases.bin").write_bytes(b"not phases")
    os.utime(job / "rank-5" / "phases.bin", (past, past))
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr[-2000:]
    s = load_summary(job)
    d = s["distributed"]
    assert d["world_size"] == 16 and not d["problems"]
    assert [x["rank"] for x in d["outliers"]["ranks"]] == [9] or [x["rank"] for x in d["stragglers"]] == [9]
    digest5 = json.loads((job / "rank-5" / "summary.json").read_text())["rank_digest"]
    assert digest5["steps"] == 200                                # still the digest, not the scribbled file
    # rank 3's raw data is newer than its digest: re-analysed from it (its real steps), the others left alone
    before = {k: (job / f"rank-{k}" / "summary.json").stat().st_mtime_ns for k in range(16)}
    os.utime(job / "rank-3" / "phases.bin")
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr[-2000:]
    after = {k: (job / f"rank-{k}" / "summary.json").stat().st_mtime_ns for k in range(16)}
    assert [k for k in range(16) if after[k] != before[k]] == [3]
    row3 = next(x for x in load_summary(job)["distributed"]["ranks"] if x["rank"] == 3)
    assert row3["steps"] == 200 and row3["status"] == "ok"
    # rank 5's scribbled raw file, now newer than its digest, is what the rank is re-analysed from
    (job / "rank-5" / "phases.bin").write_bytes(b"not phases")
    r = run_haiprof("report", job)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    row5 = next(x for x in load_summary(job)["distributed"]["ranks"] if x["rank"] == 5)
    assert row5["steps"] == 0
    assert 'id="fig-rank-heat-step"' in (job / "report.html").read_text()   # the other ranks still have their rows


def test_stale_ranks_are_reanalysed_in_a_pool(tmp_path):
    from haiprof.analysis import rank_digest, ranks
    job = job_scale.build_job(tmp_path / "job", 4)
    dirs = sorted(job.glob("rank-*"))
    past = time.time() - 60
    for d in dirs:   # digests older than the raw data
        for name in ("summary.json", rank_digest.STEPS_FILE):
            os.utime(d / name, (past, past))
    assert not any(rank_digest.is_fresh(d) for d in dirs)
    assert ranks.refresh_stale(dirs) == {}
    assert all(rank_digest.is_fresh(d) for d in dirs)


def test_no_pool_means_serial(tmp_path, monkeypatch):
    from haiprof.analysis import rank_digest, ranks

    def no_pool(*a, **k):
        raise OSError("no semaphores here")
    monkeypatch.setattr(ranks, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(ranks.os, "cpu_count", lambda: 4)
    job = job_scale.build_job(tmp_path / "job", 3)
    dirs = sorted(job.glob("rank-*"))
    for d in dirs:
        (d / "summary.json").unlink()
    assert ranks.refresh_stale(dirs) == {}
    assert all(rank_digest.is_fresh(d) for d in dirs)


@pytest.mark.slow
def test_256_rank_page_names_the_slow_node_and_rank(browser, tmp_path):  # noqa: F811
    job = job_scale.build_job(tmp_path / "job", 256, slow_node=13, slow_rank=200)
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr[-2000:]
    s = load_summary(job)
    d = s["distributed"]
    assert [n["host"] for n in d["outliers"]["nodes"]] == ["node013"]
    named = [f["message"] for f in s["findings"] if f["kind"] == "straggler"]
    assert any("node node013's 8 slow ranks (104-111)" in m for m in named), named
    assert any("for rank 200 (node025, local rank 0)" in m for m in named), named
    assert not any(m.startswith(f"rank {k} ") for m in named for k in range(104, 112)), named   # not 8 findings
    page, problems, _ = open_report(browser, job / "report.html")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_timeout(500)
    assert problems == []
    for key in ("step", "data", "comm"):   # plotly drew each heatmap (its image layer)
        assert page.locator(f"#fig-rank-heat-{key} .heatmaplayer image").count() == 1, key
    for key in ("work", "dataloader", "comm"):
        assert page.locator(f"#fig-rank-dist-{key} .bars path").count() >= 2, key
    outliers = page.locator("#rank-outliers").inner_text()
    assert "Slow node node013" in outliers and "Slow rank 200 (node025, local rank 0)" in outliers
    # the table shows the named ranks; all 256 a click away
    table = page.locator("#rank-table")
    assert table.locator("tr").count() == 1 + 9
    assert not page.locator("#rank-table-full").is_visible()
    page.locator("#rank-table-all summary").click()
    assert page.locator("#rank-table-full").is_visible() and page.locator("#rank-table-full tr").count() == 257
    assert "node013" in page.locator("#node-table-slow").inner_text()
    page.close()


def test_nodes_carry_their_infiniband_rates(tmp_path):
    job = job_scale.build_job(tmp_path / "job", 16)
    for rank in (8, 9):   # node001's ranks: the first sampled no ports, the second an HDR port
        p = job / f"rank-{rank}" / "summary.json"
        s = json.loads(p.read_text())
        s["hardware"]["links"] = {"infiniband": {}, "nic": {}} if rank == 8 else {"infiniband": {"mlx5_0:1": {
            "rate_gbps": 200.0, "tx_bytes_per_s_mean": 3.1e9, "rx_bytes_per_s_mean": 2.9e9,
            "peak_share_of_capacity": 0.4}}, "nic": {}}
        p.write_text(json.dumps(s))
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr[-2000:]
    nodes = {n["host"]: n for n in load_summary(job)["distributed"]["nodes"]}
    assert nodes["node001"]["ranks"] == list(range(8, 16))
    assert nodes["node001"]["links"]["infiniband"]["mlx5_0:1"]["rx_bytes_per_s_mean"] == 2.9e9
    assert not nodes["node000"]["links"]["infiniband"]
    assert "IB mlx5_0:1: tx 3100.0 rx 2900.0 MB/s of 200 Gb/s, peak 40%" in (job / "report.html").read_text()


def test_a_jobs_verdict_quotes_its_fixes_prediction_as_a_runs_does(tmp_path):
    """The merged job summary predicts each offered fix from the job's own step (analyzers/whatif.py), and its
    headline, "do this next" and console quote that one prediction (the recorded 2-rank gloo job: exposed
    communication, --fix compress)."""
    import shutil
    job = tmp_path / "job"
    shutil.copytree(REPO / "tests" / "data" / "ddp_rank200", job)
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr[-2000:]
    s = load_summary(job)
    assert s["bottleneck"] == "communication"
    p = s["predictions"]["compress"]
    step = s["step_time_s"]["steady"]
    comm = next(f for f in s["findings"] if f["kind"] == "communication")
    assert 0 < p["gain_share"] <= p["touches_share"] <= comm["share"] + 1e-9
    assert p["step_s"] == step
    assert f"predicted {p['gain_share'] * step * 1e3:.1f} ms" in s["headline"]
    first = s["next_steps"][0]
    assert first["fix"] == "compress" and first["predicted"]["text"] == p["text"]
    assert p["text"] in r.stderr   # the console line quotes the same
