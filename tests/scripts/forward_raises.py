"""A model whose forward raises at step argv[1] (1: haiprof's first steps; 4: later), as a shape error would."""
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == int(sys.argv[1]):
            x = x[:, :3]   # the wrong width: Linear(8, 8) raises
        return self.body(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    print(f"step {i}")
