"""Environment variables: what the script sees, sets, deletes and hands to a child.
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
import subprocess
import sys

print(sorted(k for k in os.environ if k.startswith(("TORCH", "KINETO", "CUDA", "PYTORCH", "TEARDOWN", "OMP"))))
os.environ["MY_FLAG"] = "1"
os.environ.pop("OMP_NUM_THREADS", None)
for i in range(6):
    step()
child = "import os; print(os.environ.get('MY_FLAG'), 'OMP_NUM_THREADS' in os.environ)"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
