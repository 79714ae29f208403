"""Stable-Baselines3 alone, as a user runs it: one RL Zoo training run per process.

`ppo`, `dqn`, `ppo_hopper` and `sac_hopper` build the env and model (RL Zoo's hyperparameters;
ppo_hopper: the shipped ppo_mujoco's) exactly as the `run_sb3` runners of
bench/ppo_cartpole_vs_sb3.py, bench/dqn_cartpole_vs_sb3.py, bench/ppo_hopper_vs_sb3.py and
bench/sac_hopper_vs_sb3.py do (they are those runners: one torch thread, DummyVecEnv of
Monitor-wrapped envs), train, print
`mean_return: <mean return of the last 100 finished episodes>` and exit. bench/whole_process.py
times this whole process against the `slm-lab` CLI.

usage: uv run --group bench python bench/sb3_zoo.py ppo|dqn|ppo_hopper|sac_hopper --frames N [--seed 0]
"""

from typing import Annotated, Any

import dqn_cartpole_vs_sb3
import ppo_cartpole_vs_sb3
import ppo_hopper_vs_sb3
import sac_hopper_vs_sb3
import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

Frames = Annotated[int, typer.Option(help="training frames (env steps over all envs)")]
Seed = Annotated[int, typer.Option(help="random seed")]


def report(result: dict[str, Any]) -> None:
    typer.echo(f"frames: {result['frames']}")
    typer.echo(f"episodes: {result['episodes']}")
    typer.echo(f"mean_return: {result['mean_return']}")


@app.command()
def ppo(frames: Frames, seed: Seed = 0) -> None:
    """PPO on CartPole-v1 with RL Zoo's hyperparameters."""
    report(ppo_cartpole_vs_sb3.run_sb3(frames, seed))


@app.command()
def dqn(frames: Frames, seed: Seed = 0) -> None:
    """DQN on CartPole-v1 with RL Zoo's hyperparameters."""
    report(dqn_cartpole_vs_sb3.run_sb3(frames, seed))


@app.command("ppo_hopper")
def ppo_hopper(frames: Frames, seed: Seed = 0) -> None:
    """PPO on Hopper-v5 with the shipped ppo_mujoco's settings."""
    report(ppo_hopper_vs_sb3.run_sb3(frames, seed))


@app.command("sac_hopper")
def sac_hopper(frames: Frames, seed: Seed = 0) -> None:
    """SAC on Hopper-v5 with RL Zoo's hyperparameters but learning_starts 1e3."""
    report(sac_hopper_vs_sb3.run_sb3(frames, seed))


if __name__ == "__main__":
    app()
