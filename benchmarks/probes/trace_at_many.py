"""--trace-at on consecutive steps with 2-step windows that overlap each other and the default.

haiprof-args: --trace-at 1,2,3,4 --trace-steps 2
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
for i in range(12):
    print(f"step {i} loss {step():.4f}")
