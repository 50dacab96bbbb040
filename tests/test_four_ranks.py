"""A real 4-rank torchrun/gloo job with a slow dataset on rank 2 (examples/ddp_comm_bound.py --slow-rank 2): the
three other ranks wait for it at every gradient sync, so every rank shows the same step time. The job's verdict
names rank 2 and its DataLoader, the first action is aimed at rank 2's loader, and the page keeps its rules.

The fault is large next to the step (250 ms of loading per batch against a ~80 ms step of two 1024x1024 layers),
so four ranks crowding two loaded cores do not erase it. It runs 12 steps: the verdict follows a culprit only when
its lateness is more than chance over the compared steps (analyzers/culprit.chance_late, times the world size), and
in the first compared step the others wait for rank 2 inside DDP's bucket rebuild (a collective of its own, outside
the timed sync), so that step does not show rank 2 late; over 7 compared steps that put the chance at 4 x 2/128,
above the 5% the verdict needs, in one run of three. One job, module-scoped (~35 s wall here)."""
import pytest

from conftest import EXAMPLES, load_summary, run_haiprof
from haiprof.analyzers import page_invariants

EXAMPLE = EXAMPLES / "ddp_comm_bound.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("four-ranks") / "run"
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, "--nproc-per-node", "4", EXAMPLE, "--steps", "12",
                    "--batch-size", "16", "--layers", "2", "--slow-rank", "2", "--slow-ms", "250", timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return load_summary(out), (out / "report.html").read_text()


def test_four_rank_job_names_rank2s_dataloader_in_the_verdict(job):
    s, _ = job
    d = s["distributed"]
    assert d["world_size"] == 4 and [row["status"] for row in d["ranks"]] == ["ok"] * 4
    assert s["bottleneck"] == "io", s["headline"]
    assert s["culprit"]["subject"] == "rank 2" and s["culprit"]["cause"] == "input", s["headline"]
    assert "waited for rank 2" in s["headline"] and "its DataLoader waits" in s["headline"], s["headline"]
    # the three others wait at the sync for rank 2, which arrives last and waits least
    wait = d["comm"]["wait_ms_per_step"]
    assert min(wait[k] for k in ("0", "1", "3")) > 150 and wait["2"] < 50, wait
    assert max(d["comm"]["last_to_arrive"], key=d["comm"]["last_to_arrive"].get) == "2"


def test_four_rank_jobs_first_action_is_rank2s_loader(job):
    s, _ = job
    first = s["next_steps"][0]
    assert first["kind"] == "straggler" and "rank 2" in first["title"] and first["fix"] == "prefetch", first
    assert "DataLoader" in first["title"]
    assert first["gain_s"] == pytest.approx(s["culprit"]["gain_ms"] / 1e3) and first["gain_s"] > 0.15


def test_four_rank_jobs_page_keeps_its_rules(job):
    s, html = job
    assert page_invariants.check(s, None, html) == []
