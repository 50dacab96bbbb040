"""Device-agnostic stream/event code paths on CPU (torch.cpu.Stream, synchronize, pin_memory checks).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
stream = torch.cpu.Stream() if dev.type == "cpu" else torch.cuda.Stream()
for i in range(8):
    with torch.cpu.stream(stream):
        xb = x.to(dev, non_blocking=True)
        loss = step()
    torch.cpu.synchronize()
    print(f"step {i} loss {loss:.4f}", xb.device, torch.cuda.is_available())
