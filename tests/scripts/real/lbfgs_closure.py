"""In the shape of pytorch/examples' LBFGS regression: few optimizer steps, each running its closure many times.

Usage: lbfgs_closure.py STEPS"""
import sys

import torch

torch.manual_seed(0)
x = torch.randn(256, 32)
y = x @ torch.randn(32, 1)
model = torch.nn.Linear(32, 1)
opt = torch.optim.LBFGS(model.parameters(), max_iter=20)
for step in range(int(sys.argv[1])):
    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss
    loss = opt.step(closure)
    print(f"step {step} loss {loss.item():.6f}")
