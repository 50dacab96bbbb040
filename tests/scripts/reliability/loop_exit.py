"""Trains a tiny model for argv[1] steps, prints a line every 1000, then exits with code argv[2]. With argv[3]
set, the disk "fills" after that many phase-record chunks: haiprof's writer gets ENOSPC (a fake full disk)."""
import errno
import sys
import time

import torch

if len(sys.argv) > 3:
    from haiprof.rundir import ChunkAppender
    original, calls = ChunkAppender._write, [0]
    full_after = int(sys.argv[3])   # read now: the last flush runs after the script, when argv is haiprof's again

    def write(self, records):
        calls[0] += 1
        if calls[0] > full_after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, records)

    ChunkAppender._write = write
pace = 0.0003 if len(sys.argv) > 3 else 0.0   # the fake disk fills after flushes: last several flush periods
torch.set_num_threads(1)
m = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(4, 2)
for i in range(int(sys.argv[1])):
    opt.zero_grad()
    m(x).sum().backward()
    opt.step()
    if pace:
        time.sleep(pace)
    if i % 1000 == 0:
        print("step", i, flush=True)
sys.exit(int(sys.argv[2]))
