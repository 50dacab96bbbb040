"""Lightning-style automatic optimization by hand: optimizer.step(closure), the closure does zero_grad, forward
and backward. Forward and backward take known times (sleeps), so their attribution can be checked.

Usage: closure_loop.py STEPS [--zero INIT_FILE]  (--zero: ZeroRedundancyOptimizer on a 1-rank gloo group, a
wrapper optimizer whose step calls an inner optimizer's step)
"""
import sys
import time

import torch

FORWARD_S, BACKWARD_S = 0.020, 0.030


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(BACKWARD_S)
        return grad


class SlowModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)

    def forward(self, x):
        time.sleep(FORWARD_S)
        return self.lin(SlowBackward.apply(x))


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = SlowModel()
    if "--zero" in sys.argv:
        import torch.distributed as dist
        from torch.distributed.optim import ZeroRedundancyOptimizer
        init_file = sys.argv[sys.argv.index("--zero") + 1]
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=0, world_size=1)
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16, requires_grad=True)
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            return loss
        opt.step(closure)
    print(f"done {steps}")


if __name__ == "__main__":
    main()
