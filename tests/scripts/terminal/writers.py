"""Trains while writing to the terminal every way a script can: print, os.write on fd 1 and fd 2, a child
process, a line left open; then waits at an input() prompt and answers."""
import os
import subprocess
import sys
import time

import torch

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(int(sys.argv[1])):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    time.sleep(0.05)
    if i % 8 == 0:
        print(f"print line {i}", flush=True)
        os.write(1, f"os.write stdout line {i}\n".encode())
        os.write(2, f"os.write stderr line {i}\n".encode())
        subprocess.run([sys.executable, "-c", f"print('child line {i}')"], check=True)
        os.write(1, f"open line {i} ...".encode())   # finished on the next step, as a slow "..." log does
        time.sleep(0.3)
        os.write(1, b" done\n")
name = input("your name? ")
print(f"hello {name}")
