"""Trains a tiny model for a while and prints its own lines to stdout and stderr as it goes (test_reliability_cli)."""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 16), torch.randn(64, 1)
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i % 20 == 0:
        stream = sys.stdout if (i // 20) % 2 == 0 else sys.stderr
        print(f"script-line {i}", file=stream, flush=True)
    time.sleep(0.002)
    i += 1
print("script-done", flush=True)
