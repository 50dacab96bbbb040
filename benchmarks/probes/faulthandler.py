"""faulthandler: its state as python leaves it, enabled by the script, dumping to a file.

expected_diff: the dumped stack shows haiprof's launcher frames below the script's <module> frame (12 File lines,
    python 1): the script runs inside haiprof's call stack, as with traceback_print_stack
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
import faulthandler

print("enabled at start", faulthandler.is_enabled())
faulthandler.enable()
for i in range(6):
    step()
with open("dump.txt", "w") as f:
    faulthandler.dump_traceback(f, all_threads=False)
print(open("dump.txt").read().count("File"))
