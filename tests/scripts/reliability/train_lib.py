"""A tiny CPU training step shared by the reliability scripts (imported beside them, as python would)."""
import torch

torch.set_num_threads(1)   # a forked child cannot use an OpenMP pool its parent started
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 16, generator=g)
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss.item()
