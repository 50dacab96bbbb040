"""Copies, pickles and saves its model at step 2, step 10 and after the loop, as early stopping, EMA and whole-model
checkpoints do; then loads the saved model in a plain python (no haiprof importable) and uses the copies.
Prints what happened, so the output can be compared with plain python's."""
import copy
import io
import os
import pickle
import subprocess
import sys
import tempfile

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
saved = os.path.join(tempfile.mkdtemp(), "model.pt")


def probe(when):
    ema = copy.deepcopy(model)
    blob = pickle.dumps(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    torch.save(model, saved)
    again = pickle.loads(blob)
    x = torch.ones(2, 8)
    same = torch.equal(ema(x), model(x).detach()) and torch.equal(again(x), model(x).detach())
    hooks = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in (ema, again))
    print(when, "copies ok", same, "hooks on copies", hooks, flush=True)


for step in range(12):
    opt.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()
    if step + 1 in (2, 10):
        probe(f"step {step + 1}")
probe("after")
# Load the saved model where haiprof cannot be imported: the pickle must not refer to it.
code = ("import sys, torch; sys.modules['haiprof'] = None; m = torch.load(sys.argv[1], weights_only=False); "
        "print('loaded', type(m).__name__, [k for k, v in sys.modules.items() if k.startswith('haiprof') and v])")
out = subprocess.run([sys.executable, "-c", code, saved], capture_output=True, text=True, cwd=tempfile.gettempdir())
print(out.stdout.strip() or out.stderr.strip().splitlines()[-1])
