"""How far `precision: bf16-mixed` moves a trained net's gradients, layer by layer, and why.

Loads a run's latest checkpoint (a run of a ConvNet spec with discrete actions and a shared
actor-critic net, such as `ppo_atari`; its observation statistics too, if any), plays its
policy for a batch of real observations, and takes one loss's gradient in three ways on the same
minibatches:

- float32: the net as trained;
- bf16-mixed: the body under torch.autocast to bfloat16, as `precision: bf16-mixed` runs it;
- float32 at the rounded weights: float32 arithmetic, but the body's weights first rounded to
  bfloat16 (what autocast's forward sees of the float32 weights).

For each weight it prints the norm of the difference relative to the float32 gradient's norm:
bf16-mixed against float32, the rounded weights against float32 (the part the weights' rounding
alone makes), and bf16-mixed against the rounded weights (the part bfloat16 arithmetic adds).
It also prints how alike the bf16-mixed error is on different minibatches (cosine): an error
that is the same on every minibatch is a steady pull, not noise that averages out.

The loss is a PPO-shaped one with fixed random advantages and returns (the point is the
gradient's precision, not its content): -(log pi(a|s) * A) + 0.5 (V(s) - R)^2 - 0.01 H.

`--random-frames` replaces the observations by uniform random ones of the same shape and dtype
(the same net and loss): is it the frames or the net?

usage: uv run python bench/bf16_gradients.py <run folder> [--steps 64] [--minibatches 4]
           [--random-frames]
"""

import copy
import itertools
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from torch import nn

from slm_lab.env.clock import Clock
from slm_lab.experiment import record
from slm_lab.experiment.build import build
from slm_lab.experiment.checkpointer import Checkpointer
from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.task import SessionTask
from slm_lab.lib import io

MINIBATCH = 256
ENTROPY_COEF = 0.01
VALUE_COEF = 0.5
RETURN_SCALE = 0.5  # the fixed random returns' std
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def with_precision(nets: nn.Module, bf16: bool) -> nn.Module:
    """A copy of `nets` that runs its bodies in bf16-mixed (or float32): the same weights."""
    out = copy.deepcopy(nets)
    for module in out.modules():
        if hasattr(module, "bf16"):
            module.bf16 = bf16
            if hasattr(module, "in_dtype"):
                module.in_dtype = torch.bfloat16 if bf16 else torch.float32
    return out


def rounded_weights(nets: nn.Module) -> nn.Module:
    """A float32 copy whose bodies' weights are rounded to bfloat16 and back."""
    out = copy.deepcopy(nets)
    with torch.no_grad():
        for name, p in out.named_parameters():
            if ".body." in f".{name}":
                p.copy_(p.to(torch.bfloat16).float())
    return out


def gradients(
    nets: nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    advs: torch.Tensor,
    rets: torch.Tensor,
) -> dict[str, torch.Tensor]:
    nets.zero_grad()
    logits, _, values = nets.pdparam_value(obs)
    logp = torch.log_softmax(logits, -1)
    entropy = -(logp.exp() * logp).sum(-1)
    policy = -(logp.gather(1, actions[:, None]).squeeze(1) * advs)
    loss = (policy + VALUE_COEF * (values - rets) ** 2 - ENTROPY_COEF * entropy).mean()
    loss.backward()
    return {name: p.grad.flatten().clone() for name, p in nets.named_parameters()}


@app.command()
def main(
    run: Annotated[Path, typer.Argument(help="a run folder of a ConvNet spec (float32)")],
    steps: Annotated[int, typer.Option(help="vector steps of play for the observations")] = 64,
    minibatches: Annotated[int, typer.Option(help="minibatches of 256 compared", min=2)] = 4,
    seed: Annotated[int, typer.Option()] = 0,
    random_frames: Annotated[bool, typer.Option(help="random observations instead")] = False,
) -> None:
    torch.set_num_threads(1)
    spec, _ = record.read(run)
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    env, agent = build(SessionTask.detached(spec, seed), clock)
    checkpoint = Checkpointer(RunLayout(run, spec.name), 0, 0).latest[0]
    model = io.load_torch(checkpoint)
    stats = model["obs_rms"]
    if stats is not None:
        stats = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in stats.items()}
    env.set_obs_stats(stats, frozen=True)
    agent.load_model(model["nets"])
    observations, actions = [], []
    env.reset()
    for _ in range(steps):
        obs = env.obs.copy()
        action = agent.act(obs)
        observations.append(obs)
        actions.append(action)
        env.step(action)
    env.close()
    obs_all = torch.as_tensor(np.concatenate(observations))
    actions_all = torch.as_tensor(np.concatenate(actions)).long()
    if random_frames:
        obs_all = torch.randint(0, 256, obs_all.shape, dtype=obs_all.dtype)
    kind = "random observations shaped as" if random_frames else "observations of"
    typer.echo(f"{checkpoint.name}: {len(obs_all)} {kind} {spec.env.name}")

    float32 = with_precision(agent.algorithm.nets, bf16=False)
    bf16, rounded = with_precision(float32, bf16=True), rounded_weights(float32)
    g = torch.Generator().manual_seed(seed)
    advs, rets = (
        torch.randn(len(obs_all), generator=g),
        0.5 * torch.randn(len(obs_all), generator=g),
    )
    errors: dict[str, list[torch.Tensor]] = {}
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(minibatches):
        idx = torch.randperm(len(obs_all), generator=g)[:MINIBATCH]
        args = (obs_all[idx], actions_all[idx], advs[idx], rets[idx])
        g32, g16, g_rounded = (gradients(n, *args) for n in (float32, bf16, rounded))
        for name, ref in g32.items():
            norm = ref.norm()
            rows.setdefault(name, []).append(
                (
                    ((g16[name] - ref).norm() / norm).item(),
                    ((g_rounded[name] - ref).norm() / norm).item(),
                    ((g16[name] - g_rounded[name]).norm() / norm).item(),
                )
            )
            errors.setdefault(name, []).append(g16[name] - ref)
    typer.echo(
        "relative to the float32 gradient's norm (means over the minibatches):\n"
        f"{'weight':28s} {'bf16-mixed':>11s} {'rounded w':>10s} {'arithmetic':>11s} "
        f"{'error alike':>12s}"
    )
    for name, values in rows.items():
        if not name.endswith("weight"):
            continue
        mean = np.mean(values, axis=0)
        alike = np.mean(
            [
                nn.functional.cosine_similarity(a, b, 0).item()
                for a, b in itertools.combinations(errors[name], 2)
            ]
        )
        typer.echo(f"{name:28s} {mean[0]:11.3f} {mean[1]:10.3f} {mean[2]:11.3f} {alike:12.3f}")


if __name__ == "__main__":
    app()
