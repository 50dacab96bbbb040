"""A script that imports torch and does tensor math but never trains.
"""
a = torch.arange(12.0).reshape(3, 4)
print(a.sum().item(), (a @ a.T).trace().item())
