"""A script that profiles itself while it trains (argv[1]: `setprofile`, its own counter, or `cprofile`) and says
whether its profiler is still installed at the end and how many train_step calls it counted (160 under python).
A checkpoint-like stall every 10 steps: haiprof's flight recorder opens a window there."""
import cProfile
import pstats
import sys
import threading
import time

import torch

model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
calls = [0]


def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "train_step":
        calls[0] += 1


def train_step(i):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    if i % 10 == 9:   # 150 ms: 3x the step and more, beside busy processes too (~40 ms steps counted there)
        time.sleep(0.15)


mode = sys.argv[1]
if mode == "setprofile":
    sys.setprofile(prof)
else:
    cp = cProfile.Profile()
    cp.enable()
for i in range(160):
    train_step(i)
if mode == "setprofile":
    print("still ours:", sys.getprofile() is prof, "calls", calls[0])
    sys.setprofile(None)
else:
    still = sys.getprofile() is cp
    cp.disable()
    counts = {k[2]: v[0] for k, v in pstats.Stats(cp).stats.items()}
    print("still ours:", still, "calls", counts.get("train_step", 0))
