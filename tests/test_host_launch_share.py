"""On the host clock the launch finding comes from the few traced steps and every other share from the steady
steps: carried onto the steady step (verdict.host_launch_on_the_step), the bound classes stay one partition.
The case the page audit found: a prefetching loader whose queue was full during the window (traced steps without
input wait: framework overhead 83%) beside steady steps that wait for input 96% of the time."""
from haiprof.analyzers import verdict
from haiprof.analyzers.findings import bound
from haiprof.analyzers.page_invariants import check


HEADLINE = "Input-bound (high): the training loop waited for input 96% of the 52.5 ms step."


def launch(share: float, traced_loader: float = 0.0, heavy: float = 0.1) -> dict:
    return bound("launch", "high", share, "83% of step time is framework overhead (dispatching tiny ops and the "
                 "Python between them): 115 ops per step", {"dataloader_share": traced_loader, "heavy_share": heavy,
                                                            "steps": 3})


def test_a_window_without_input_wait_is_carried_onto_a_waiting_step():
    share = {"dataloader": 0.956, "h2d": 0.0, "forward": 0.011, "backward": 0.012, "optimizer": 0.013, "other": 0.008}
    findings = verdict.phase_findings(share, 13, 0.0525, 0.0525) + [launch(0.833)]
    verdict.host_launch_on_the_step(findings, share)
    got = next(f for f in findings if f["kind"] == "launch")
    assert abs(got["share"] - 0.833 * 0.044) < 1e-6 and got["severity"] == "low"
    assert got["evidence"]["traced_framework_share"] == 0.833
    summary = {"bottleneck": "io", "headline": HEADLINE, "phase_share": share, "findings": findings,
               "step_time_s": {"steady": 0.0525}}
    assert check(summary) == []


def test_traced_steps_like_the_steady_ones_keep_their_share():
    share = {"dataloader": 0.05, "h2d": 0.0, "forward": 0.3, "backward": 0.4, "optimizer": 0.2, "other": 0.05}
    findings = [launch(0.70, traced_loader=0.05)]
    verdict.host_launch_on_the_step(findings, share)
    assert findings[0]["share"] == 0.70 and findings[0]["severity"] == "high"


def test_the_old_partition_is_what_the_checker_refuses():
    share = {"dataloader": 0.956, "forward": 0.044}
    findings = verdict.phase_findings(share, 13, 0.0525, 0.0525) + [launch(0.833)]
    summary = {"bottleneck": "io", "headline": HEADLINE, "phase_share": share | {"h2d": 0.0}, "findings": findings,
               "step_time_s": {"steady": 0.0525}}
    assert any("add up to 179%" in v for v in check(summary))
