"""An atexit handler raises: python prints 'Exception ignored in atexit callback' and exits 0.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import atexit


class Uploader:   # a repr of its own: python prints it, and a function's would carry an address
    def __repr__(self):
        return "<log uploader>"

    def __call__(self):
        raise OSError("could not upload logs")


atexit.register(Uploader())
for i in range(6):
    print(f"step {i} loss {step():.4f}")
