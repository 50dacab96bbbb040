"""RLIMIT_NOFILE lowered to 64 by the script, which then opens files until refused.
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
import resource

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
for i in range(6):
    step()
held = []
try:
    while len(held) < 200:
        held.append(open(__file__))
except OSError as e:
    print("refused", e.errno)
for f in held:
    f.close()
print(f"loss {step():.4f}")
