"""A training loop whose FLOPs are known by hand: DEPTH square linear layers (no bias) of WIDTH on BATCH rows, in
DTYPE, SGD. Prints `FLOPS_PER_STEP <n>` and `OWN_CLOCK mfu steps_per_s=... step_ms=...` (the device synchronized
only at both ends of the clocked steps, after SKIP steps so haiprof's default tracing window is not in them).

FLOPs a step (matmuls only, 2 per multiply-add): forward DEPTH x 2·B·W·W; backward the weight gradient of every
layer (2·B·W·W) and the input gradient of every layer but the first (its input needs none).
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cuda")
ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
ap.add_argument("--width", type=int, default=8192)
ap.add_argument("--batch", type=int, default=8192)
ap.add_argument("--depth", type=int, default=4)
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--skip", type=int, default=12)
a = ap.parse_args()
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(a.width, a.width, bias=False) for _ in range(a.depth)])
model = model.to(device=a.device, dtype=dtype)
opt = torch.optim.SGD(model.parameters(), lr=1e-6)
x = torch.randn(a.batch, a.width, device=a.device, dtype=dtype)
mm = 2 * a.batch * a.width * a.width
print(f"FLOPS_PER_STEP {a.depth * mm + a.depth * mm + (a.depth - 1) * mm}", flush=True)


def sync():
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()


for step in range(a.steps):
    if step == a.skip:
        sync()
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    model(x).float().square().mean().backward()
    opt.step()
sync()
n = a.steps - a.skip
dt = time.perf_counter() - t0
print(f"OWN_CLOCK mfu steps_per_s={n / dt:.4f} step_ms={1e3 * dt / n:.4f}", flush=True)
