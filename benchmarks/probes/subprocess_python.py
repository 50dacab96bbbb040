"""The script runs python subprocesses (one failing) and relays their output.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import subprocess
import sys

for i in range(4):
    step()
ok = subprocess.run([sys.executable, "-c", "print('hello from child')"], capture_output=True, text=True)
bad = subprocess.run([sys.executable, "-c", "import sys; sys.exit('child failed')"], capture_output=True, text=True)
print(ok.returncode, ok.stdout.strip(), bad.returncode, bad.stderr.strip())
subprocess.run([sys.executable, "-c", "print('inherited stdout')"])
print(f"loss {step():.4f}")
