"""A multiprocessing spawn Pool: children re-import __main__ from the script's path.
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
import multiprocessing as mp


def square(v):
    return v * v


if __name__ == "__main__":
    for i in range(4):
        step()
    with mp.get_context("spawn").Pool(2) as pool:
        print(pool.map(square, range(6)))
    print(f"loss {step():.4f}")
