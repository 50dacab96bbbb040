"""Launch-bound CUDA training: many tiny kernels per step, the GPU waits on the host (tests/test_gpu_phases.py)."""
import torch
from torch import nn

torch.manual_seed(0)
dev = torch.device("cuda")
model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)) for _ in range(16)]).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
x, y = torch.randn(8, 64, device=dev), torch.randn(8, 64, device=dev)
for step in range(60):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("ok")
