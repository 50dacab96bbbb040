"""A small CUDA training loop: batches built on the host and copied to the GPU every step."""
import torch

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(512, 1024), torch.randint(0, 10, (512,))) for _ in range(4)]
loader = torch.utils.data.DataLoader(data, batch_size=None)
for epoch in range(5):
    for x, y in loader:
        x, y = x.to(dev, non_blocking=True), y.to(dev)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
torch.cuda.synchronize()
print("ok")
