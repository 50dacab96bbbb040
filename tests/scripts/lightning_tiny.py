"""A real LightningModule trained by lightning.Trainer (automatic optimization: optimizer.step(closure)).

Usage: lightning_tiny.py ROOT_DIR [MAX_STEPS]. Prints the Trainer's own global step count as JSON last.
"""
import json
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TinyRegressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        # wide enough that forward and backward are a clear part of a step beside Lightning's own Python
        self.net = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    root = sys.argv[1]
    max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    torch.manual_seed(0)
    x = torch.randn(128 * max_steps, 64)
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=128, num_workers=0)
    trainer = L.Trainer(default_root_dir=root, max_steps=max_steps, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(TinyRegressor(), loader)
    print(json.dumps({"global_step": trainer.global_step}))


if __name__ == "__main__":
    main()
