"""logging.basicConfig(DEBUG) on the root logger: any library's log record is printed.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import logging

logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
logging.getLogger("train").info("starting")
for i in range(10):
    print(f"step {i} loss {step():.4f}")
logging.getLogger("train").info("done")
