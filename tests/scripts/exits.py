"""Ends the way argv[1] says: ok, exit3, raise, sigterm-self, loop (trains until killed)."""
import os
import signal
import sys
import time

import torch

mode = sys.argv[1]
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    if mode == "loop":
        time.sleep(0.05)
        if i == 3:
            print("ready", flush=True)


def inner():
    raise ValueError("user error from the script")


if mode == "exit3":
    sys.exit(3)
elif mode == "raise":
    inner()
elif mode == "sigterm-self":
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
print("done")
