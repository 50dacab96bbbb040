"""Forks after the tracing window; the child trains one step and exits 0; the parent trains on and waits."""
import os
import sys

from train_lib import step

for i in range(8):
    step(i)
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    step(100)
    print("child done", flush=True)
    sys.exit(0)
for i in range(8, 14):
    step(i)
_, status = os.waitpid(pid, 0)
print("child status", os.waitstatus_to_exitcode(status))
print("parent done")
