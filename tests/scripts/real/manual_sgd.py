"""In the shape of a polynomial-regression example: no optimizer, parameters updated by hand after each
backward, a progress line per step."""
import sys

import torch

torch.manual_seed(0)
W, b = torch.randn(4, 1) * 5, torch.randn(1) * 5
fc = torch.nn.Linear(4, 1)
for step in range(1, int(sys.argv[1]) + 1):
    x = torch.randn(32, 1)
    feats = torch.cat([x ** i for i in range(1, 5)], 1)
    y = feats.mm(W) + b
    fc.zero_grad()
    loss = torch.nn.functional.smooth_l1_loss(fc(feats), y)
    loss.backward()
    with torch.no_grad():
        for p in fc.parameters():
            p.add_(-0.01 * p.grad)
    print(f"step {step} loss {loss.item():.4f}", flush=True)
