"""In the shape of a DCGAN script: a generator and a discriminator, two optimizers, both models trained each
step; at the end the generator is saved whole (torch.save(model)) and copied (an EMA-style deepcopy)."""
import copy
import sys

import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
D = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(int(sys.argv[1])):
    real = torch.randn(16, 16)
    fake = G(torch.randn(16, 8))
    opt_d.zero_grad()
    loss_d = bce(D(real), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = bce(D(fake), torch.ones(16, 1))
    loss_g.backward()
    opt_g.step()
torch.save(G, sys.argv[2])
ema = copy.deepcopy(G)
print("saved", type(torch.load(sys.argv[2], weights_only=False)).__name__, type(ema).__name__)
