"""A training loop with slow moments: a checkpoint written every 20 steps, and one slow step of its own.

The steps themselves are short (an MLP on random batches, ~10 ms on one CPU thread); every `--every` steps the
loop saves its model and optimizer state synchronously (torch.save, then fsync: the step after waits for the
disk), and once, at `--hiccup-step`, one step waits `--hiccup-ms` on something outside training (a slow log
upload, say). Plain PyTorch, no haiprof import. `haiprof run examples/slow_moments.py` should see the periodic
stall, trace one occurrence of it (the flight recorder) and explain it from that trace: file I/O in
save_checkpoint.

`--every-s T` checkpoints on a clock instead (every T seconds of time.monotonic(), as a trainer saving every
half hour does), and `--slow-after-s S` makes each step slower from S seconds on (a larger batch: the step time
changes mid-run), so the stall's period in steps changes while its period in time holds; `--upload-ms` makes
each of those checkpoints wait that long after the write too (an upload to remote storage).
"""
import argparse
import os
import tempfile
import time

import torch
from torch import nn


def save_checkpoint(model, opt, path, pad_mb):
    """What a real checkpoint does: the state to a file, flushed to the disk before training goes on.
    `pad_mb` of extra bytes stand for the larger state of a real model."""
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f)
        if pad_mb:
            f.write(bytes(pad_mb << 20))
        f.flush()
        os.fsync(f.fileno())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--every", type=int, default=20, help="checkpoint every this many steps (0: never)")
    ap.add_argument("--pad-mb", type=int, default=24, help="extra MB written with each checkpoint")
    ap.add_argument("--hiccup-step", type=int, default=33, help="the one step that waits (-1: none)")
    ap.add_argument("--hiccup-ms", type=float, default=150.0)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every-s", type=float, default=0.0, help="checkpoint every this many seconds (0: by steps)")
    ap.add_argument("--slow-after-s", type=float, default=0.0, help="from this many seconds on, a larger batch")
    ap.add_argument("--slow-batch-size", type=int, default=112)
    ap.add_argument("--run-s", type=float, default=0.0, help="stop after this many seconds (0: after --steps)")
    ap.add_argument("--upload-ms", type=float, default=0.0, help="each checkpoint then waits this long (an upload)")
    args = ap.parse_args()
    if args.every_s:
        args.every = 0
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)   # one core per run: the step time stays steady on a shared machine
    model = nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, args.width),
                          nn.ReLU(), nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch_size, args.width)
    y = torch.randint(0, 10, (args.batch_size,))
    ckpt_dir = tempfile.mkdtemp(prefix="slow-moments-")
    path = os.path.join(ckpt_dir, "checkpoint.pt")
    ticks = []
    start = time.monotonic()
    due = start + args.every_s
    try:
        for step in range(args.steps if not args.run_s else 1 << 62):
            if args.run_s and time.monotonic() - start >= args.run_s:
                break
            if args.slow_after_s and time.monotonic() - start >= args.slow_after_s and len(x) == args.batch_size:
                x = torch.randn(args.slow_batch_size, args.width)
                y = torch.randint(0, 10, (args.slow_batch_size,))
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if args.every and step % args.every == args.every - 1:
                save_checkpoint(model, opt, path, args.pad_mb)
            if args.every_s and time.monotonic() >= due:
                save_checkpoint(model, opt, path, args.pad_mb)
                time.sleep(args.upload_ms / 1e3)
                due += args.every_s
            if step == args.hiccup_step:
                time.sleep(args.hiccup_ms / 1e3)
            ticks.append(time.perf_counter())
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}")
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(ckpt_dir)
    if len(ticks) > 2:
        print(f"OWN_CLOCK steps={len(ticks) - 1} step_ms={(ticks[-1] - ticks[0]) / (len(ticks) - 1) * 1e3:.3f}")


if __name__ == "__main__":
    main()
