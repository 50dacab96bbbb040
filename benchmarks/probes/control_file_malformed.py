"""Malformed control files (not JSON, a list, huge numbers, NUL bytes) while training (issue 29.4).
"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 2)


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
import os
import time
from pathlib import Path

control = Path(os.environ["PROBE_RUN_DIR"]) / "control"
bad = [b"{not json", b"[1, 2]", b'{"steps": 1e999}', b'{"steps": "3"}', b"\x00\xff\xfe", b'{"at_step": -5}']
for i in range(12):
    if i < len(bad):
        control.mkdir(parents=True, exist_ok=True)
        (control / "trace-request.json").write_bytes(bad[i])
        time.sleep(0.05)
    print(f"step {i} loss {step():.4f}")
