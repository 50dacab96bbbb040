import torch
class Bad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x * 2
    @staticmethod
    def backward(ctx, g): raise RuntimeError("backward broke")
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(5):
    opt.zero_grad()
    loss = Bad.apply(m(torch.randn(2, 4))).sum()
    loss.backward()
    opt.step()
