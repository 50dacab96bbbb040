"""A forward hook the script registers raises at step 5.

expected_diff: the traceback's torch frames differ: haiprof's forward-timing hooks on the root module send its call
    through nn.Module._call_impl's hooked path (`return inner()`, line 1884) where python takes the plain one
    (`return forward_call(...)`, line 1789): the first difference, after 725 equal bytes
"""
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
