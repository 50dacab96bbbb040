"""A multiprocessing spawn Pool: children re-import __main__ from the script's path.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import multiprocessing as mp


def square(v):
    return v * v


if __name__ == "__main__":
    for i in range(4):
        step()
    with mp.get_context("spawn").Pool(2) as pool:
        print(pool.map(square, range(6)))
    print(f"loss {step():.4f}")
