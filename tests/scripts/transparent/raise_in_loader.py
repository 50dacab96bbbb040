import torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        if i == 5: raise ValueError("bad sample 5")
        return torch.randn(4)
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for x in DataLoader(D(), batch_size=2):
    opt.zero_grad(); m(x).sum().backward(); opt.step()
