"""stderr ends without a newline: haiprof's lines must not be glued to it.

expected_diff: haiprof's verdict line follows the script's unterminated last stderr line on the same line: on a pipe
    haiprof cannot see what the script wrote to fd 2 (os.write included), so it cannot know a newline is missing
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
import sys

for i in range(6):
    print(f"step {i} loss {step():.4f}")
sys.stderr.write("progress 100%")
sys.stderr.flush()
