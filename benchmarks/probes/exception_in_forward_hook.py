"""A forward hook the script registers raises at step 5: python's traceback, torch's frames included (haiprof's
hooks on the root module take torch's hooked call path there; runtime/call_path.py shows the plain one, as python)."""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
calls = [0]


def hook(module, inputs, output):
    calls[0] += 1
    if calls[0] == 5:
        raise RuntimeError("hook says stop")


model[0].register_forward_hook(hook)
for i in range(8):
    print(f"step {i} loss {step():.4f}")
