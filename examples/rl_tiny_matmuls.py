"""A reinforcement-learning loop of tiny matmuls: one episode a training step, one small policy forward per
environment step, the torch threads left at their default (one per core).

Each forward is a few matmuls of a few µs of work, too small for intra-op threads to pay: with several threads the
ops wait on thread wake-ups, and the same script runs faster with `OMP_NUM_THREADS=1`. Plain PyTorch, no haiprof
import. `haiprof run examples/rl_tiny_matmuls.py` should advise `torch.set_num_threads(1)`.
"""
import argparse
import time

import torch
from torch import nn


class Corridor:
    """A toy environment: a noisy position on a line, rewarded for the action that matches its sign pattern."""

    def __init__(self, obs: int, actions: int, gen: torch.Generator):
        self.obs, self.actions, self.gen = obs, actions, gen
        self.state = torch.zeros(obs)

    def reset(self) -> torch.Tensor:
        self.state = torch.randn(self.obs, generator=self.gen)
        return self.state

    def step(self, action: int) -> tuple[torch.Tensor, float]:
        reward = float(action == int(self.state[0] > 0) + 2 * int(self.state[1] > 0))
        self.state = torch.tanh(self.state + 0.3 * torch.randn(self.obs, generator=self.gen))
        return self.state, reward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--horizon", type=int, default=64, help="environment steps per episode")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    env = Corridor(8, 4, torch.Generator().manual_seed(args.seed))
    policy = nn.Sequential(nn.Linear(8, args.hidden), nn.Tanh(), nn.Linear(args.hidden, args.hidden), nn.Tanh(),
                           nn.Linear(args.hidden, 4))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    ticks = []   # the script's own clock: end of every episode
    for episode in range(args.episodes):
        s, logps, rewards = env.reset(), [], []
        for _ in range(args.horizon):
            dist = torch.distributions.Categorical(logits=policy(s.unsqueeze(0)))
            a = dist.sample()
            logps.append(dist.log_prob(a))
            s, r = env.step(int(a.item()))
            rewards.append(r)
        returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
        loss = -(torch.cat(logps) * (returns - returns.mean())).sum()   # REINFORCE with a mean baseline
        opt.zero_grad()
        loss.backward()
        opt.step()
        ticks.append(time.perf_counter())
        print(f"episode {episode} return {sum(rewards):.0f} loss {loss.item():.3f}")

    # Mean episode time by this script's own clock, past warm-up and the profiler's window (the first quarter of
    # the episodes, at least 6).
    skip = max(6, len(ticks) // 4)
    if len(ticks) > skip + 1:
        n = len(ticks) - 1 - skip
        print(f"OWN_CLOCK steps={n} step_ms={(ticks[-1] - ticks[skip]) / n * 1e3:.3f} threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()
