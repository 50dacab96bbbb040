"""Malformed control files (not JSON, a list, huge numbers, NUL bytes) while training (issue 29.4).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import time
from pathlib import Path

control = Path(os.environ["PROBE_RUN_DIR"]) / "control"
bad = [b"{not json", b"[1, 2]", b'{"steps": 1e999}', b'{"steps": "3"}', b"\x00\xff\xfe", b'{"at_step": -5}']
for i in range(12):
    if i < len(bad):
        control.mkdir(parents=True, exist_ok=True)
        (control / "trace-request.json").write_bytes(bad[i])
        time.sleep(0.05)
    print(f"step {i} loss {step():.4f}")
