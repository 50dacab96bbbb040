"""Inference only: eval() under torch.no_grad and inference_mode, never a backward.
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
model.eval()
with torch.no_grad():
    for i in range(20):
        out = model(x)
with torch.inference_mode():
    out2 = model(x)
print(f"{out.sum().item():.4f} {out2.sum().item():.4f}")
