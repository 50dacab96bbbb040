"""The script runs python subprocesses (one failing) and relays their output.
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
import subprocess
import sys

for i in range(4):
    step()
ok = subprocess.run([sys.executable, "-c", "print('hello from child')"], capture_output=True, text=True)
bad = subprocess.run([sys.executable, "-c", "import sys; sys.exit('child failed')"], capture_output=True, text=True)
print(ok.returncode, ok.stdout.strip(), bad.returncode, bad.stderr.strip())
subprocess.run([sys.executable, "-c", "print('inherited stdout')"])
print(f"loss {step():.4f}")
