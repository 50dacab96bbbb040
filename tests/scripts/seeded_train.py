"""Seeded CPU training: prints the loss sequence (must be identical with and without haiprof)."""
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(1234)
x = torch.randn(256, 16)
y = (x[:, :4].sum(1) > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(2):
    for xb, yb in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        print(f"{loss.item():.10f}")
