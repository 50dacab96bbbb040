"""Real 2-rank torchrun/gloo jobs with a fault injected on rank 1 (examples/ddp_comm_bound.py's knobs): busy
processes on its CPU core, a pause every third step. Each job's verdict names rank 1 and the cause read from its own
record, and its first action is aimed at that cause. (A slow dataset on one rank: test_distributed.py.)

The faults are large next to the step (three busy processes on the rank's core: a quarter of it left to the rank,
whatever else the machine runs; 300 ms pauses in 50 ms steps), so a loaded machine does not erase them. The jobs
run one after the other: the busy-process case pins each rank to a core of its own, which a second job would crowd."""
import pytest

from conftest import EXAMPLES, load_summary, run_haiprof
from haiprof.analyzers import page_invariants

EXAMPLE = EXAMPLES / "ddp_comm_bound.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("culprit-jobs")
    out = {}
    for name, argv in (("hog", ["--steps", "10", "--batch-size", "64", "--layers", "4", "--hog-rank", "1",
                               "--hogs", "3"]),
                       ("pause", ["--steps", "12", "--batch-size", "16", "--layers", "2", "--pause-rank", "1",
                                  "--pause-ms", "300", "--pause-every", "3"])):
        r = run_haiprof("run", "--trace-steps", "0", "--out", root / name, "--nproc-per-node", "2", EXAMPLE, *argv,
                        timeout=240)
        assert r.returncode == 0, r.stderr[-3000:]
        out[name] = load_summary(root / name)
        # the page keeps its rules: every step time quoted is the steady step's, amounts are not step times
        html = (root / name / "report.html").read_text()
        assert page_invariants.check(out[name], None, html) == [], name
    return out


def test_busy_process_on_rank1s_core_is_its_run_queue_wait(jobs):
    s = jobs["hog"]
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "run-queue", s["headline"]
    assert s["bottleneck"] == "communication"
    assert "waited for rank 1" in s["headline"] and "another process shares its CPU cores" in s["headline"]
    first = s["next_steps"][0]
    assert first["kind"] == "straggler" and "rank 1's CPU cores" in first["title"] and first["fix"] is None
    assert first["gain_s"] == pytest.approx(s["culprit"]["gain_ms"] / 1e3)
    # compression is offered for the transfer share only, below the wait
    comm = [a for a in s["next_steps"] if a["fix"] == "compress"]
    assert all(a["gain_share"] < first["gain_share"] for a in comm)


def test_pause_every_third_step_on_rank1_is_named_as_a_pause(jobs):
    s = jobs["pause"]
    assert s["culprit"]["subject"] == "rank 1" and s["culprit"]["cause"] == "pause", s["headline"]
    assert "waited for rank 1" in s["headline"] and "pauses outside the training phases" in s["headline"]
    assert "in 4 of " in s["headline"]                  # steps 3, 6, 9, 12, after the warm-up
    first = s["next_steps"][0]
    assert "rank 1 does between steps" in first["title"]
    assert first["gain_s"] > 0.05                        # 300 ms every third step: ~100 ms/step the others wait
