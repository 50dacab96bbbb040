"""An atexit handler raises: python prints 'Exception ignored in atexit callback' and exits 0.
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
import atexit


class Uploader:   # a repr of its own: python prints it, and a function's would carry an address
    def __repr__(self):
        return "<log uploader>"

    def __call__(self):
        raise OSError("could not upload logs")


atexit.register(Uploader())
for i in range(6):
    print(f"step {i} loss {step():.4f}")
