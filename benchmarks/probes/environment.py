"""Environment variables: what the script sees, sets, deletes and hands to a child.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import subprocess
import sys

print(sorted(k for k in os.environ if k.startswith(("TORCH", "KINETO", "CUDA", "PYTORCH", "TEARDOWN", "OMP"))))
os.environ["MY_FLAG"] = "1"
os.environ.pop("OMP_NUM_THREADS", None)
for i in range(6):
    step()
child = "import os; print(os.environ.get('MY_FLAG'), 'OMP_NUM_THREADS' in os.environ)"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
