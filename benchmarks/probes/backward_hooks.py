"""Full backward hooks and tensor hooks registered by the script.
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
seen = []
model[2].register_full_backward_hook(lambda m, gi, go: seen.append("module"))
model[0].weight.register_hook(lambda g: seen.append("tensor"))
model[0].weight.register_post_accumulate_grad_hook(lambda p: seen.append("post"))
for i in range(6):
    print(f"step {i} loss {step():.4f}")
print(seen.count("module"), seen.count("tensor"), seen.count("post"))
