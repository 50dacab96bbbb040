"""haiprof.load / haiprof.profile: the run directory round-trips into DataFrames with units in column names."""
import json
import shutil
import subprocess
import sys

import pytest

import haiprof
from conftest import load_summary, phase_records
from haiprof.rundir import ALL_PHASES, NotARunDir


@pytest.fixture(scope="module")
def seeded_run(seeded_sampled):
    return seeded_sampled   # seeded_train.py under `haiprof run --quiet --sample-interval 0.1` (conftest), only read


def test_import_haiprof_stays_cheap():
    # `import haiprof` runs in every `haiprof run`: the API's pandas (and torch) must load only on first use.
    code = "import sys, haiprof; print(json.dumps(sorted(m for m in ('pandas', 'torch') if m in sys.modules)))"
    r = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
    assert callable(haiprof.load) and callable(haiprof.profile)


def test_load_round_trips_the_run(seeded_run):
    summary = load_summary(seeded_run)
    run = haiprof.load(seeded_run)
    assert run.summary == summary and run.bottleneck == summary["bottleneck"]
    steps = run.steps
    assert len(steps) == summary["steps"] == 16  # 2 epochs x 8 batches
    assert list(steps.columns) == ["step", "start_s", "end_s", "duration_ms",
                                   *(f"{p}_ms" for p in ALL_PHASES), "warmup", "traced", "in_stats"]
    # Every nanosecond of a step goes to exactly one phase.
    parts = steps[[f"{p}_ms" for p in ALL_PHASES]].sum(axis=1)
    assert (parts - steps["duration_ms"]).abs().max() < 1e-3
    assert steps["warmup"].sum() == summary["warmup_steps_excluded"]
    # The shares in summary.json follow from the steps table.
    assert steps["traced"].sum() == summary["traced_steps_excluded"] > 0   # the tracing window is on by default
    steady = steps[steps["in_stats"]]
    assert len(steady) == summary["steps_analyzed"]
    for p in ALL_PHASES:
        assert steady[f"{p}_ms"].sum() / steady["duration_ms"].sum() == pytest.approx(
            summary["phase_share"][p], abs=1e-4)
    assert run.phase_share.sum() == pytest.approx(1.0, abs=0.01)
    assert steady["duration_ms"].median() / 1e3 == pytest.approx(summary["step_time_s"]["median"], rel=1e-6)
    assert (steps["start_s"] >= 0).all() and (steps["end_s"] > steps["start_s"]).all()
    duration_s = (run.meta["end_monotonic_ns"] - run.meta["start_monotonic_ns"]) / 1e9
    assert steps["end_s"].max() <= duration_s


def test_load_tables_match_the_files(seeded_run):
    run = haiprof.load(seeded_run)
    raw = phase_records(seeded_run)
    intervals = [r for r in raw if not r[0].startswith("@")]
    assert len(run.phases) == len(intervals)
    assert set(run.phases["phase"]) >= {"dataloader", "forward", "backward", "optimizer"}
    assert set(run.phases["timing"]) == {"host"}
    assert run.phases["start_s"].is_monotonic_increasing
    assert (run.phases["duration_ms"] >= 0).all()
    n_samples = len((seeded_run / "samples" / "system.jsonl").read_text().splitlines())
    system = run.samples["system"]
    assert len(system) == n_samples > 0
    assert {"t_s", "cost_ms", "cpu_main_pct", "rss_bytes"} <= set(system.columns)
    assert "t_ns" not in system.columns
    assert list(run.findings["kind"]) == [f["kind"] for f in load_summary(seeded_run)["findings"]]
    assert run.status.set_index("collector").loc["system", "available"]


def test_load_without_summary_recomputes(seeded_run, tmp_path):
    # A run killed before its end has no summary.json: load() derives the same verdict from the raw files.
    copy = tmp_path / "copy"
    shutil.copytree(seeded_run, copy)
    (copy / "summary.json").unlink()
    run = haiprof.load(copy)
    assert run.summary["steps"] == load_summary(seeded_run)["steps"]
    assert run.summary["phase_share"] == load_summary(seeded_run)["phase_share"]


def test_load_bad_path(tmp_path):
    with pytest.raises(NotARunDir, match="no such directory"):
        haiprof.load(tmp_path / "missing")
    with pytest.raises(NotARunDir, match="not a haiprof run directory"):
        haiprof.load(tmp_path)


def test_profile_context_manager_writes_a_run(tmp_path):
    import torch
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with haiprof.profile(out=tmp_path / "nb", sample_interval_s=0.1) as prof:
        assert prof.path == tmp_path / "nb"
        for _ in range(7):
            opt.zero_grad()
            model(torch.randn(8, 16)).pow(2).mean().backward()
            opt.step()
    run = prof.run
    assert len(run.steps) == 7 and run.summary["exit_code"] == 0
    assert run.meta["how"] == "profile()"
    assert (tmp_path / "nb" / "report.html").is_file()
    # The hooks are gone after the block: more steps are not recorded.
    before = (tmp_path / "nb" / "phases.bin").read_bytes()
    opt.step()
    assert (tmp_path / "nb" / "phases.bin").read_bytes() == before


def test_profile_exception_propagates_and_run_is_kept(tmp_path):
    import torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="boom"):
        with haiprof.profile(out=tmp_path / "err", sample_interval_s=0.1):
            for _ in range(3):
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
            raise RuntimeError("boom")
    run = haiprof.load(tmp_path / "err")
    assert run.summary["exit_code"] == 1 and len(run.steps) == 3
    assert "RuntimeError: boom" in run.meta["error"]


def test_ranks_of_a_distributed_layout(tmp_path, seeded_run):
    import torch
    for rank in (1, 0):
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with haiprof.profile(out=tmp_path / "job" / f"rank-{rank}", sample_interval_s=0.1):
            for _ in range(2 + rank):
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
    (tmp_path / "job" / "meta.json").write_text(json.dumps({"distributed": True}))
    ranks = haiprof.load(tmp_path / "job").ranks
    assert list(ranks) == [0, 1] and [len(r.steps) for r in ranks.values()] == [2, 3]
    assert haiprof.load(seeded_run).ranks == {}


def test_profile_quiet_prints_nothing(tmp_path):
    code = ("import torch, haiprof\nm = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            f"with haiprof.profile(out={str(tmp_path / 'q')!r}, quiet=True):\n"
            "    for _ in range(5):\n        o.zero_grad(); m(torch.randn(2, 2)).sum().backward(); o.step()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr
    assert (tmp_path / "q" / "report.html").is_file()
