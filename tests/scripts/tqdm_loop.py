"""A training loop with its own tqdm progress bar on stderr (as HF Trainer and Lightning draw by default)."""
import sys
import time

import torch
from tqdm import tqdm

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in tqdm(range(int(sys.argv[1])), desc="train", mininterval=0.1):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    time.sleep(0.05)
print("done")
