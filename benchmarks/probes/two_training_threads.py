"""Two threads train their own models at once (issue 29.8).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import threading


def train(seed, m, out):
    g = torch.Generator().manual_seed(seed)
    o = torch.optim.SGD(m.parameters(), lr=0.05)
    xs = torch.randn(16, 8, generator=g)
    for _ in range(8):
        o.zero_grad()
        loss = m(xs).pow(2).mean()
        loss.backward()
        o.step()
    out[seed] = round(loss.item(), 4)


torch.manual_seed(1)
out = {}
# the models are built here, in order: built in the threads, they drew from the global RNG in whichever order the
# threads ran, and the losses differed from run to run under python alone
models = {s: torch.nn.Linear(8, 2) for s in (1, 2)}
threads = [threading.Thread(target=train, args=(s, models[s], out)) for s in (1, 2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(out.items()))
