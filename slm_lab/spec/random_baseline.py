"""The random policy's mean return B per env, used by the strength metrics.

A table for the envs we ship specs for is computed by this module and committed
(`python -m slm_lab.spec.random_baseline`); other envs are computed on first use and cached.
Keyed by env id plus any extra gymnasium kwargs (e.g. `continuous`), since they change the task.
"""

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from loguru import logger

from slm_lab import SPEC_DIR

TABLE_PATH = SPEC_DIR / "_random_baseline.json"
TABLE_EPISODES = 100
CACHE_EPISODES = 20
TABLE_ENVS: list[tuple[str, dict[str, Any]]] = [
    ("CartPole-v1", {}),
    ("Acrobot-v1", {}),
    ("Pendulum-v1", {}),
    ("MountainCar-v0", {}),
    ("MountainCarContinuous-v0", {}),
    ("LunarLander-v3", {}),
    ("LunarLander-v3", {"continuous": True}),
    ("Hopper-v5", {}),
    ("HalfCheetah-v5", {}),
    ("Walker2d-v5", {}),
    ("Ant-v5", {}),
    ("Humanoid-v5", {}),
    ("Swimmer-v5", {}),
    ("Reacher-v5", {}),
    ("Pusher-v5", {}),
    ("InvertedPendulum-v5", {}),
    ("InvertedDoublePendulum-v5", {}),
    ("HumanoidStandup-v5", {}),
]


def baseline_key(name: str, kwargs: dict[str, Any]) -> str:
    return name + (json.dumps(kwargs, sort_keys=True) if kwargs else "")


def cache_path() -> Path:
    return (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "slm_lab"
        / "random_baseline.json"
    )


def compute(name: str, kwargs: dict[str, Any], episodes: int, seed: int = 0) -> float:
    env = gym.make(name, **kwargs)
    env.action_space.seed(seed)
    returns = []
    for i in range(episodes):
        env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def _read(path: Path) -> dict[str, float]:
    return json.loads(path.read_text()) if path.exists() else {}


def get(name: str, kwargs: dict[str, Any] | None = None) -> float:
    key = baseline_key(name, kwargs or {})
    table = _read(TABLE_PATH)
    if key in table:
        return table[key]
    path = cache_path()
    cache = _read(path)
    if key not in cache:
        logger.info(
            f"computing the random baseline of {key} ({CACHE_EPISODES} episodes), cached in {path}"
        )
        cache[key] = compute(name, kwargs or {}, CACHE_EPISODES)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=2))
        tmp.replace(path)
    return cache[key]


if __name__ == "__main__":
    table = {baseline_key(n, kw): compute(n, kw, TABLE_EPISODES) for n, kw in TABLE_ENVS}
    TABLE_PATH.write_text(json.dumps(table, indent=2) + "\n")
    print(json.dumps(table, indent=2))
