"""A Hugging Face Trainer run, unmodified: a tiny GPT-2 built from a config (no downloads) on random token ids.

Usage: hf_trainer_tiny.py OUTPUT_DIR [MAX_STEPS]. Prints the Trainer's own global step count as JSON last.
"""
import json
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    """Tokenizer-free causal-LM data: random token ids, labels = inputs (the model shifts them)."""

    def __init__(self, n, seq_len, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main():
    out = sys.argv[1]
    max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir=out, max_steps=max_steps, per_device_train_batch_size=8, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(8 * max_steps, 32, 256))
    result = trainer.train()
    print(json.dumps({"global_step": result.global_step, "trainer_state_step": trainer.state.global_step}))


if __name__ == "__main__":
    main()
