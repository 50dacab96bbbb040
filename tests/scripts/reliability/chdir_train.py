"""Changes directory after the first step (before haiprof's tracing window), then trains on."""
import os
import sys
import tempfile

from train_lib import step

here = os.path.abspath(__file__)
step(0)
os.chdir(sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir())
for i in range(1, 12):
    print(f"{step(i):.8f}")
print("file still found:", os.path.exists(os.path.abspath(__file__)), os.path.abspath(__file__) == here)
