"""Trains; in `finally:` saves final_model.pt and appends a line to train.log (as many scripts do). With argv[2]
set, crashes at that step instead."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1])
crash_at = int(sys.argv[2]) if len(sys.argv) > 2 else None
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(steps * 4, 8), torch.randn(steps * 4, 1)), batch_size=4)
try:
    for i, (x, y) in enumerate(data):
        if i == crash_at:
            raise RuntimeError(f"bad batch {i}")
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        print("step", i, flush=True)
finally:
    torch.save(model.state_dict(), "final_model.pt")
    with open("train.log", "a") as f:
        f.write(f"ended after step {i}\n")
