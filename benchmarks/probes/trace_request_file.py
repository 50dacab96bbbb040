"""The script asks for a window itself, as `haiprof trace` would, while the default window is open.
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
import json
import os
from pathlib import Path

control = Path(os.environ["PROBE_RUN_DIR"]) / "control"
for i in range(12):
    if i == 3:
        control.mkdir(parents=True, exist_ok=True)
        (control / "trace-request.json").write_text(json.dumps({"steps": 2, "at_step": 4}))
    print(f"step {i} loss {step():.4f}")
