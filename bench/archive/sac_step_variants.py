"""Probe: would torch.compile or bfloat16 autocast make a SAC gradient step faster on this CPU?

A standalone SAC step on Hopper-v5-sized shapes (obs 11, action 3, [256, 256] ReLU actor and
twin critics, batch 256, fused Adam, a polyak update, tuned temperature), written here without
SLM Lab's classes so that the three ways of running the same arithmetic are compared alone:
  eager     the step as written
  compiled  the two losses (forward and backward graphs) through torch.compile's default mode
  bf16      the step under torch.autocast("cpu", dtype=torch.bfloat16)
All three run in one process on one torch thread, interleaved round by round on the same
batches; each round times `--steps` gradient steps and prints milliseconds per step. The
medians and their ratios to eager come last. Compilation is timed separately (first steps).

usage: uv run python bench/sac_step_variants.py [--rounds 5] [--steps 50]
"""

import math
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Annotated

import torch
import torch.nn.functional as F
import typer
from torch import nn

OBS, ACT, HIDDEN, BATCH = 11, 3, 256, 256
GAMMA, POLYAK, LR = 0.99, 0.005, 3e-4
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def mlp(n_in: int, n_out: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(n_in, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, n_out),
    )


class Sac:
    """One copy of the nets and optimizers; `losses` picks eager or compiled loss functions."""

    def __init__(self, compiled: bool, bf16: bool) -> None:
        torch.manual_seed(0)
        self.actor, self.q1, self.q2 = mlp(OBS, 2 * ACT), mlp(OBS + ACT, 1), mlp(OBS + ACT, 1)
        self.t1, self.t2 = mlp(OBS + ACT, 1), mlp(OBS + ACT, 1)
        self.t1.load_state_dict(self.q1.state_dict())
        self.t2.load_state_dict(self.q2.state_dict())
        self.log_alpha = nn.Parameter(torch.zeros(()))
        self.critic_params = [*self.q1.parameters(), *self.q2.parameters()]
        self.target_params = [*self.t1.parameters(), *self.t2.parameters()]
        self.actor_optim = torch.optim.Adam(self.actor.parameters(), LR, fused=True)
        self.critic_optim = torch.optim.Adam(self.critic_params, LR, fused=True)
        self.alpha_optim = torch.optim.Adam([self.log_alpha], LR, fused=True)
        self.critic_loss: Callable = self.eager_critic_loss
        self.actor_loss: Callable = self.eager_actor_loss
        if compiled:
            self.critic_loss = torch.compile(self.eager_critic_loss)
            self.actor_loss = torch.compile(self.eager_actor_loss)
        self.bf16 = bf16

    def policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs).chunk(2, -1)
        log_std = log_std.clamp(-20, 2)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        log_prob = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob = log_prob - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), log_prob

    def eager_critic_loss(self, obs, actions, rewards, dones, next_obs) -> torch.Tensor:  # noqa: ANN001
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_actions, next_log_probs = self.policy(next_obs)
            x = torch.cat([next_obs, next_actions], -1)
            v = torch.min(self.t1(x), self.t2(x)).squeeze(-1) - alpha * next_log_probs
            y = rewards + GAMMA * (1 - dones) * v
        x = torch.cat([obs, actions], -1)
        q1, q2 = self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)
        return (F.mse_loss(q1, y, reduction="none") + F.mse_loss(q2, y, reduction="none")).mean()

    def eager_actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        alpha = self.log_alpha.detach().exp()
        actions, log_probs = self.policy(obs)
        x = torch.cat([obs, actions], -1)
        q = torch.min(self.q1(x), self.q2(x)).squeeze(-1)
        return (alpha * log_probs - q).mean(), log_probs

    def step(self, batch: tuple[torch.Tensor, ...]) -> None:
        context = torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else nullcontext()
        with context:
            loss = self.critic_loss(*batch)
            self.critic_optim.zero_grad()
            loss.backward()
            self.critic_optim.step()
            with torch.no_grad():
                torch._foreach_lerp_(self.target_params, self.critic_params, POLYAK)
            for p in self.critic_params:
                p.requires_grad_(False)
            actor_loss, log_probs = self.actor_loss(batch[0])
            for p in self.critic_params:
                p.requires_grad_(True)
            self.actor_optim.zero_grad()
            actor_loss.backward()
            self.actor_optim.step()
            alpha_loss = -(self.log_alpha.exp() * (log_probs.detach() - ACT)).mean()
            self.alpha_optim.zero_grad()
            alpha_loss.backward()
            self.alpha_optim.step()


def make_batch() -> tuple[torch.Tensor, ...]:
    return (
        torch.randn(BATCH, OBS),
        torch.rand(BATCH, ACT) * 2 - 1,
        torch.randn(BATCH),
        (torch.rand(BATCH) < 0.01).float(),
        torch.randn(BATCH, OBS),
    )


@app.command()
def main(
    rounds: Annotated[int, typer.Option(help="interleaved rounds")] = 5,
    steps: Annotated[int, typer.Option(help="gradient steps a round")] = 50,
) -> None:
    torch.set_num_threads(1)
    variants = {
        "eager": Sac(compiled=False, bf16=False),
        "compiled": Sac(compiled=True, bf16=False),
        "bf16": Sac(compiled=False, bf16=True),
    }
    warm = [make_batch() for _ in range(5)]
    for name, sac in variants.items():
        start = time.perf_counter()
        for batch in warm:
            sac.step(batch)
        print(
            f"{name}: first {len(warm)} steps {time.perf_counter() - start:.1f} s (compilation included)"
        )
    batches = [make_batch() for _ in range(steps)]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        for name, sac in variants.items():
            start = time.perf_counter()
            for batch in batches:
                sac.step(batch)
            times[name].append((time.perf_counter() - start) * 1e3 / steps)
        print(f"round {r + 1}: " + " | ".join(f"{n} {t[-1]:.2f} ms" for n, t in times.items()))
    eager = statistics.median(times["eager"])
    for name, t in times.items():
        median = statistics.median(t)
        print(f"{name}: median {median:.2f} ms a step, eager / {name} {eager / median:.2f}x")


if __name__ == "__main__":
    app()
