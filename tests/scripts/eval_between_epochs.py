"""A small CNN trained for a few epochs on CPU, with an evaluation pass (model.eval(), torch.no_grad()) over a
validation loader after each epoch: haiprof must report that time as `eval`, not as training `forward`."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = DataLoader(TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(256, 3, 64, 64), torch.randint(0, 10, (256,))), batch_size=32)
for epoch in range(3):
    model.train()
    for x, y in train:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in val)
    print(f"epoch {epoch} val acc {correct / 256:.2f}")
