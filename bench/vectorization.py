"""Sync against async vector envs on this machine, and what `vectorization_mode: auto` picks.

For each ENV:N, times one env's step (the probe `auto` runs), then a Gymnasium sync and async
vector env of N envs (same-step autoreset, as SLM Lab builds them; random actions drawn before
the clock starts), and prints the frames per second of each, the async cost per env per step
that the two imply, and what auto picks for one session here (its free cores: the machine's less
the load average).

usage: uv run python bench/vectorization.py [Hopper-v5:8 CartPole-v1:4 ...] [--steps 500]
"""

import os
import time
from typing import Annotated

import gymnasium as gym
import typer
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from slm_lab.env import vectorization
from slm_lab.lib.util import machine_cpus

DEFAULT_CASES = ["Hopper-v5:8", "CartPole-v1:4"]
WARMUP_STEPS = 20

app = typer.Typer(add_completion=False, rich_markup_mode=None)


def vector_step_seconds(env_id: str, num_envs: int, vec_cls: type, steps: int) -> float:
    vec = vec_cls([lambda: gym.make(env_id)] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        vec.reset(seed=0)
        vec.action_space.seed(0)
        for _ in range(WARMUP_STEPS):
            vec.step(vec.action_space.sample())
        actions = [vec.action_space.sample() for _ in range(steps)]
        start = time.perf_counter()
        for a in actions:
            vec.step(a)
        return (time.perf_counter() - start) / steps
    finally:
        vec.close()


@app.command()
def main(
    cases: Annotated[list[str] | None, typer.Argument(help="ENV_ID:NUM_ENVS")] = None,
    steps: Annotated[int, typer.Option(help="vector steps timed per mode")] = 500,
) -> None:
    cpus = machine_cpus()
    free = vectorization.session_cpus(1)
    print(f"cores (affinity): {cpus} | free: {free} (1-min load {os.getloadavg()[0]:.1f})")
    for case in cases or DEFAULT_CASES:
        env_id, n = case.rsplit(":", 1)
        num_envs = int(n)
        one = vectorization.step_seconds(lambda env_id=env_id: gym.make(env_id))
        sync = vector_step_seconds(env_id, num_envs, SyncVectorEnv, steps)
        asyn = vector_step_seconds(env_id, num_envs, AsyncVectorEnv, steps)
        overhead = (asyn - sync / cpus) / num_envs
        pick = vectorization.auto_mode(one, num_envs, free)
        print(
            f"{env_id} x{num_envs}: one step {one * 1e6:.0f} us | sync {num_envs / sync:.0f} fps "
            f"| async {num_envs / asyn:.0f} fps ({sync / asyn:.2f}x sync) | async cost "
            f"~{overhead * 1e6:.0f} us per env per step | auto picks {pick}"
        )


if __name__ == "__main__":
    app()
