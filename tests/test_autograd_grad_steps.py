"""Training loops that take their gradients with torch.autograd.grad (no .backward()) have steps: each such call
that builds no higher-order graph ends one, timed as the backward pass; one with create_graph (a gradient
penalty) is part of its step."""
from conftest import in_parallel, load_summary, run_haiprof

LOOP = """\
import sys, torch
from torch.autograd import grad
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
params = list(model.parameters())
for step in range(12):
    x = torch.randn(16, 8, requires_grad=True)
    loss = model(x).pow(2).mean()
    if sys.argv[1] == "penalty":   # a gradient penalty: a grad with create_graph inside the step
        gx, = grad(loss, x, create_graph=True)
        loss = loss + gx.pow(2).sum()
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():   # updated by hand: no optimizer, no .backward()
        for p, g in zip(params, grads):
            p -= 0.01 * g
print("trained")
"""


def test_autograd_grad_loops_count_their_steps(tmp_path):
    script = tmp_path / "grad_loop.py"
    script.write_text(LOOP)
    plain, penalty = in_parallel(
        *[lambda kind=kind: run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", tmp_path / kind, script,
                                        kind) for kind in ("plain", "penalty")])
    for kind, r in (("plain", plain), ("penalty", penalty)):
        assert (r.returncode, r.stdout) == (0, "trained\n"), r.stderr
        s = load_summary(tmp_path / kind)
        assert s["steps"] == 12 and s["step_detection"]["boundary"] == "backward", (kind, s["headline"])
        assert s["phase_share"]["backward"] > 0
