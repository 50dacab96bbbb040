"""The script rewrites sys.argv and parses it with argparse.

args: --epochs 2 --name run1
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import argparse
import sys

sys.argv = sys.argv[:1] + ["--lr", "0.2"] + sys.argv[1:]
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--epochs", type=int)
p.add_argument("--name")
ns = p.parse_args()
print(vars(ns), p.prog)
for i in range(ns.epochs * 3):
    print(f"step {i} loss {step():.4f}")
