"""Raw non-UTF-8 bytes and lone surrogates written to stdout and stderr.
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
    step()
sys.stdout.buffer.write(b"\xff\xfe raw \x80\n")
sys.stdout.flush()
sys.stderr.buffer.write(b"err \xc3\x28\n")
sys.stderr.flush()
print("lone \udcff".encode("utf-8", "surrogateescape"))
print("nul \x00 inside")
