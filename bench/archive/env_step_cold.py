"""One env step's cost warm (steps in a tight loop, as the floor measures its env part) and cold
(each step after a gradient step, as a run that trains between steps pays it): SLM Lab's
Gymnasium backend against Gymnasium's raw sync vector env, one Pendulum-v1 env, random actions.

usage: PYTHONPATH=bench uv run --group bench python bench/archive/env_step_cold.py [--steps 2000]
"""

import time
from collections.abc import Callable
from typing import Annotated

import gymnasium as gym
import numpy as np
import torch
import typer
from vs_sb3 import COMPARISONS, pin_torch_threads

from slm_lab.env.clock import Clock
from slm_lab.env.registry import backend_module
from slm_lab.spec import spec_util

WORK = "sac_pendulum"  # its spec's env: Pendulum-v1, one env
HIDDEN = 256  # the gradient step between env steps: a [HIDDEN, HIDDEN] MLP on a batch of HIDDEN
SEED = 0
NEVER = 10**12  # the clock's run length: never reached here


def gradient_step(obs_dim: int) -> Callable[[], None]:
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, 1),
    )
    optim = torch.optim.Adam(net.parameters(), fused=True)
    x = torch.randn(HIDDEN, obs_dim)

    def step() -> None:
        loss = net(x).pow(2).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()

    return step


def us_per_step(
    env_step: Callable[[np.ndarray], object],
    actions: np.ndarray,
    between: Callable[[], None] | None = None,
) -> float:
    spent = 0.0
    for a in actions:
        if between is not None:
            between()
        start = time.process_time()
        env_step(a)
        spent += time.process_time() - start
    return spent / len(actions) * 1e6


def main(
    steps: Annotated[int, typer.Option(min=1, help="env steps per measurement")] = 2000,
) -> None:
    """Microseconds of CPU per env step: SLM Lab's backend and the raw vector env, warm and cold."""
    pin_torch_threads()
    spec = COMPARISONS[WORK].slm_lab_spec(steps, SEED)
    config = spec_util.validate(spec, spec["name"])
    backend = backend_module(config.env.name).make(
        config.env, SEED, Clock(NEVER, config.env.num_envs), config.agent.algorithm.gamma
    )
    backend.record_episodes()
    backend.reset()
    raw = gym.make_vec(
        config.env.name,
        config.env.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    raw.reset(seed=SEED)
    rng = np.random.default_rng(SEED)
    agent_actions = rng.uniform(-1, 1, (steps, config.env.num_envs, 1)).astype(np.float32)
    env_actions = agent_actions * float(raw.single_action_space.high[0])  # the env's bounds
    train = gradient_step(int(np.prod(raw.single_observation_space.shape)))
    backend.step(agent_actions[0])  # first calls off the clock
    raw.step(env_actions[0])
    for label, between in (("warm", None), ("cold", train)):
        ours = us_per_step(backend.step, agent_actions, between)
        bare = us_per_step(raw.step, env_actions, between)
        typer.echo(f"{label}: SLM Lab's backend {ours:.1f} us a step, raw {bare:.1f} us")
    backend.close()
    raw.close()


if __name__ == "__main__":
    typer.run(main)
