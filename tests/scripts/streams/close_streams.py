"""Ends by closing or replacing its standard streams, as argv[1] says."""
import io
import os
import sys

import torch

m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    m(torch.randn(2, 4)).sum().backward()
    opt.step()
print("trained", flush=True)
how = sys.argv[1]
if how == "close-stdout":
    sys.stdout.close()
elif how == "close-stderr":
    sys.stderr.close()
elif how == "os-close-1":
    sys.stdout.flush()
    os.close(1)
elif how == "stringio":
    sys.stdout = io.StringIO()
    print("kept in memory")
elif how == "none":
    sys.stdout = None
