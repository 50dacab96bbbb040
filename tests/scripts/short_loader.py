"""A short-lived DataLoader with num_workers=2 feeding a few training steps (test_reliability_cli): its workers
live for about a second, between two samples of the system sampler."""
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        time.sleep(0.01)  # reading a sample: the training loop waits on the loader
        return torch.randn(16), torch.randn(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Slow(), batch_size=4, num_workers=2):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("trained")
