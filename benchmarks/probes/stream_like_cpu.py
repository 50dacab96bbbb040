"""Device-agnostic stream/event code paths on CPU (torch.cpu.Stream, synchronize, pin_memory checks).
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
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
stream = torch.cpu.Stream() if dev.type == "cpu" else torch.cuda.Stream()
for i in range(8):
    with torch.cpu.stream(stream):
        xb = x.to(dev, non_blocking=True)
        loss = step()
    torch.cpu.synchronize()
    print(f"step {i} loss {loss:.4f}", xb.device, torch.cuda.is_available())
