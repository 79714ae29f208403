"""The matrix products alone of one SAC gradient step on Hopper-v5-sized nets: the floor under it.

A SAC gradient step (twin critics and an actor, MLP [256, 256], batch 256) multiplies the same
matrices in any library. This times those products alone, as plain `addmm`/`mm` calls on one
torch thread with no autograd, no activations, no optimizer and no Python around them, and sums
them into the step's floor two ways:
- the actor's loss backpropagates into the critics' inputs only (the critics' weights frozen for
  it, as SLM Lab does);
- the actor's loss also makes the critics' weight gradients (Stable-Baselines3's SAC, which
  zeroes them before the critics' next step).
Set against `bench/sac_train_step.py` (milliseconds per SLM Lab gradient step) and
`bench/vs_sb3.py compare sac_hopper` (both libraries' training loops), it says how much of a step is
matrix products, which no rewrite of the rest can make faster.

usage: uv run --group bench python bench/sac_matmul_floor.py [--obs 11] [--act 3] [--reps 300]
"""

import time
from collections.abc import Callable
from typing import Annotated

import torch
import typer

BATCH, HIDDEN = 256, 256
WARMUP = 30
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def ms_per_call(fn: Callable[[], object], reps: int, warmup: int = WARMUP) -> float:
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps * 1e3


@app.command()
def main(
    obs: Annotated[int, typer.Option(help="observation size (Hopper-v5: 11)")] = 11,
    act: Annotated[int, typer.Option(help="action size (Hopper-v5: 3)")] = 3,
    reps: Annotated[int, typer.Option(help="timed calls of each part")] = 300,
) -> None:
    torch.set_num_threads(1)
    q_in = obs + act
    x_obs, x_q, h = torch.randn(BATCH, obs), torch.randn(BATCH, q_in), torch.randn(BATCH, HIDDEN)
    bias = torch.randn(HIDDEN)
    w1_actor, w1_q = torch.randn(HIDDEN, obs), torch.randn(HIDDEN, q_in)
    w2 = torch.randn(HIDDEN, HIDDEN)
    w3_actor, w3_q = torch.randn(2 * act, HIDDEN), torch.randn(1, HIDDEN)  # mean and log-std
    g_actor, g_q = torch.randn(BATCH, 2 * act), torch.randn(BATCH, 1)

    def actor_forward() -> None:
        torch.addmm(bias, torch.addmm(bias, x_obs, w1_actor.t()), w2.t()) @ w3_actor.t()

    def q_forward() -> None:
        torch.addmm(bias, torch.addmm(bias, x_q, w1_q.t()), w2.t()) @ w3_q.t()

    def q_backward_weights() -> torch.Tensor:  # every weight's gradient (the critics' own step)
        g2 = g_q @ w3_q
        g_q.t() @ h
        g1 = g2 @ w2
        g2.t() @ h
        g1.t() @ x_q
        return g1

    def q_backward_all() -> None:  # the weights' and the action's gradients (SB3's actor loss)
        q_backward_weights() @ w1_q

    def q_backward_inputs() -> None:  # the gradient reaches the action through frozen weights
        (g_q @ w3_q @ w2) @ w1_q

    def actor_backward() -> None:
        g2 = g_actor @ w3_actor
        g_actor.t() @ h
        g1 = g2 @ w2
        g2.t() @ h
        g1.t() @ x_obs

    part = {
        name: ms_per_call(fn, reps)
        for name, fn in [
            ("actor forward", actor_forward),
            ("critic forward", q_forward),
            ("critic backward, weights", q_backward_weights),
            ("critic backward, inputs only", q_backward_inputs),
            ("critic backward, both", q_backward_all),
            ("actor backward", actor_backward),
        ]
    }
    for name, ms in part.items():
        typer.echo(f"{name:30s} {ms:6.3f} ms")
    # actor forwards: on the next and the current observations; critic forwards: 2 critics x
    # (target on next, online on current, online on the actor's actions)
    shared = 2 * part["actor forward"] + 6 * part["critic forward"] + part["actor backward"]
    critic_step = 2 * part["critic backward, weights"]
    frozen = shared + critic_step + 2 * part["critic backward, inputs only"]
    unfrozen = shared + critic_step + 2 * part["critic backward, both"]
    typer.echo(
        f"floor of one gradient step: {frozen:.3f} ms with the critics frozen for the actor's "
        f"loss | {unfrozen:.3f} ms with their weight gradients made there too"
    )


if __name__ == "__main__":
    app()
