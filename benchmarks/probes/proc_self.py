"""Reads /proc/self: its name, status and stdio targets.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

for i in range(6):
    step()
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
print(status["Name"].strip(), status["State"].strip()[:1])
print([os.readlink(f"/proc/self/fd/{n}").split(":")[0] for n in (0, 1, 2)])
print(os.readlink("/proc/self/exe") == os.path.realpath(__import__("sys").executable))
