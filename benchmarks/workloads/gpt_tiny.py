"""A small GPT-style training script, host-bound on a big GPU: a few million parameters, short sequences, bf16
autocast on CUDA, AdamW. Plain PyTorch, no haiprof import. Prints the shared protocol's line,
`OWN_CLOCK gpt_tiny steps_per_s=... step_ms=...`: steps/s between step --warm and the last step, with a device
synchronize only at both ends (benchmarks/gpu_overhead.py reads it, with and without `haiprof run`).

    python benchmarks/workloads/gpt_tiny.py [--steps 300] [--warm 20] [--device cuda|cpu]
"""
import argparse
import contextlib
import math
import time

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=512, ctx=64, d=256, layers=6, heads=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    data = torch.randint(0, 512, (64, args.batch_size, 65))    # host-side batches, copied each step
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    t0 = None
    for step in range(args.steps):
        if step == args.warm:
            sync()
            t0 = time.perf_counter()
        batch = data[step % len(data)]
        x, y = batch[:, :-1].to(dev, non_blocking=True), batch[:, 1:].to(dev, non_blocking=True)
        with amp:
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    sync()
    n = args.steps - args.warm
    dt = time.perf_counter() - t0
    print(f"OWN_CLOCK gpt_tiny steps_per_s={n / dt:.3f} step_ms={1000 * dt / n:.3f}", flush=True)
    print("final loss", round(loss.item(), 4), "ln(vocab)", round(math.log(512), 4))


if __name__ == "__main__":
    main()
