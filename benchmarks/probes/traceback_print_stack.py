"""traceback.print_stack() at module level: the frames a script sees under python.

expected_diff: haiprof runs the script in its own process under runpy: print_stack shows haiprof's launcher frames
    above the script's (python shows none); hiding them would need a frame-rewriting hook
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
import traceback

for i in range(4):
    step()
traceback.print_stack()
