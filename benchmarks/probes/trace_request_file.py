"""The script asks for a window itself, as `haiprof trace` would, while the default window is open.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import json
import os
from pathlib import Path

control = Path(os.environ["PROBE_RUN_DIR"]) / "control"
for i in range(12):
    if i == 3:
        control.mkdir(parents=True, exist_ok=True)
        (control / "trace-request.json").write_text(json.dumps({"steps": 2, "at_step": 4}))
    print(f"step {i} loss {step():.4f}")
