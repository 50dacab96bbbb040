"""torch.save of the whole model, optimizer and state dicts into the working directory.
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
import io

for i in range(6):
    step()
torch.save(model, "model.pt")
torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ckpt.pt")
buf = io.BytesIO()
torch.save(opt.state_dict(), buf)
print(len(buf.getvalue()) > 0, sorted(opt.state_dict()))
m2 = torch.load("model.pt", weights_only=False)
print(f"{torch.nn.functional.mse_loss(m2(x), y).item():.4f}")
