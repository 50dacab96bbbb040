"""A script that already does what haiprof would advise: bf16 autocast, a fused (or foreach) AdamW, a compiled
model, a DataLoader with pin_memory=True. Each is switched off by its flag (--no-amp, --no-fused, --no-compile)."""
import sys
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore", message=".*pin_memory.*")   # no accelerator on a CPU machine: torch says so
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
if "--no-compile" not in sys.argv:
    # dynamo alone: haiprof sees the compiled module either way, and this keeps inductor's C++ build (~15 s on
    # a 2-core machine) out of the suite
    model = torch.compile(model, backend="eager")
fused = "--no-fused" not in sys.argv
try:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused or None)
except (RuntimeError, TypeError):   # no fused kernel for this device in this torch: foreach is the next best
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=fused or None)
data = DataLoader(TensorDataset(torch.randn(512, 256)), batch_size=32, pin_memory=True)
amp = "--no-amp" not in sys.argv
for epoch in range(2):
    for (x,) in data:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
print("done")
