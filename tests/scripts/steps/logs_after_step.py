"""A loop that logs after optimizer.step() and evaluates every 4th step, as most training scripts do; with
`bare` in argv the whole step sits in a bare `except:` that swallows everything."""
import sys
import time

import torch

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)   # a multi-tensor optimizer: fused-optim is done
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4000, 8)), batch_size=4)
bare = "bare" in sys.argv
if bare:   # no DataLoader: the stop can only come from inside the try (the model's forward)
    data = [(torch.randn(4, 8),) for _ in range(1000)]
try:
    for i, (x,) in enumerate(data):
        try:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            print(f"step {i + 1} done", flush=True)
            if (i + 1) % 4 == 0:
                model.eval()
                with torch.no_grad():
                    model(x)
                model.train()
                print(f"eval after step {i + 1}", flush=True)
            time.sleep(0.01)
        except:  # noqa: E722 (the point of this script)
            if not bare:
                raise
finally:
    print("finally ran", flush=True)
print("after the loop", flush=True)
