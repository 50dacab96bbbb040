"""Raw non-UTF-8 bytes and lone surrogates written to stdout and stderr.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(6):
    step()
sys.stdout.buffer.write(b"\xff\xfe raw \x80\n")
sys.stdout.flush()
sys.stderr.buffer.write(b"err \xc3\x28\n")
sys.stderr.flush()
print("lone \udcff".encode("utf-8", "surrogateescape"))
print("nul \x00 inside")
