"""Several optimizers in one iteration (a GAN's discriminator and generator, Muon beside AdamW, WGAN's critic
steps): a training step is their whole cycle, as the script's own clock counts it, not each optimizer's step."""
import re

from conftest import load_summary, run_haiprof
from haiprof.collectors.optimizer_cycle import OptimizerCycle


class Opt:   # an optimizer as the cycle sees it: any weak-referenceable object
    pass


def _ends(cycle, sequence):
    return [cycle.ends_step(o) for o in sequence]


def test_one_optimizer_ends_every_step():
    a = Opt()
    assert _ends(OptimizerCycle(), [a] * 5) == [True] * 5


def test_two_optimizers_in_turn_end_a_step_once_a_cycle():
    d, g = Opt(), Opt()
    ends = _ends(OptimizerCycle(), [d, g] * 20)
    assert ends[:2] == [True, True]          # before g first steps, d is all there is
    assert ends[2:] == [False, True] * 19    # then the step closes at g's


def test_five_critic_steps_and_one_generator_step_are_one_step():
    d, g = Opt(), Opt()
    ends = _ends(OptimizerCycle(), ([d] * 5 + [g]) * 6)
    assert ends[:6] == [True] * 6                          # the first cycle, before g is known
    assert ends[6:] == ([False] * 5 + [True]) * 5


def test_an_optimizer_that_steps_once_merges_a_bounded_number_of_steps():
    a, once = Opt(), Opt()
    cycle = OptimizerCycle(window=16)
    ends = _ends(cycle, [a] * 10 + [once] + [a] * 40)
    assert ends[10] is True and ends[11:26] == [False] * 15   # the one-off closes steps while it is recent
    assert all(ends[26:])                                     # then a's steps end them again


def test_an_optimizer_made_afresh_each_epoch_costs_one_short_step_an_epoch():
    g, seq, made = Opt(), [], []
    for epoch in range(3):
        made.append(Opt())   # the script builds a new one each epoch; the old one is still referenced
        seq += [made[-1], g] * 8
    ends = _ends(OptimizerCycle(), seq)
    # a step a cycle, plus at most one half-cycle step where a new d first steps
    assert len(seq) // 2 <= sum(ends) <= len(seq) // 2 + len(made) + 1, ends
    for epoch in range(3):   # within an epoch, after the new d's first step: one end a cycle
        within = ends[16 * epoch + 1:16 * (epoch + 1)]
        assert all(a != b for a, b in zip(within, within[1:])), ends


GAN = """import time, torch
torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
D = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt_g, opt_d = torch.optim.Adam(G.parameters(), 1e-3), torch.optim.Adam(D.parameters(), 1e-3)
bce = torch.nn.BCEWithLogitsLoss()
ms = []
for it in range(30):
    t = time.perf_counter()
    real, fake = torch.randn(128, 64), G(torch.randn(128, 64))
    opt_d.zero_grad()
    (bce(D(real), torch.ones(128, 1)) + bce(D(fake.detach()), torch.zeros(128, 1))).backward()
    opt_d.step()
    opt_g.zero_grad()
    bce(D(fake), torch.ones(128, 1)).backward()
    opt_g.step()
    ms.append((time.perf_counter() - t) * 1e3)
print(f"median iteration {sorted(ms[5:])[len(ms[5:]) // 2]:.3f} ms")
"""


def test_a_gan_step_is_one_discriminator_and_one_generator_step(tmp_path):
    # counted per optimizer step, 30 iterations were 60 steps of half the script's own iteration time
    script, out = tmp_path / "gan.py", tmp_path / "gan"
    script.write_text(GAN)
    r = run_haiprof("run", "--quiet", "--out", out, script)
    assert r.returncode == 0, r.stderr
    own_ms = float(re.search(r"median iteration ([\d.]+) ms", r.stdout).group(1))
    s = load_summary(out)
    assert s["steps"] == 31, s["steps"]      # the first iteration is two: d's step came before g was known
    ratio = s["step_time_s"]["median"] * 1e3 / own_ms
    assert 0.7 < ratio < 1.4, (s["step_time_s"], own_ms)   # per optimizer step it read 0.5
    assert s["step_detection"]["optimizer_steps_per_step"] == 2, s["step_detection"]
    assert "a step is one cycle of 2 optimizer steps" in (out / "report.html").read_text()
