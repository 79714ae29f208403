"""The random policy's mean return B per env, used by the strength metrics.

A table for the envs we ship specs for is computed by this module and committed
(`python -m slm_lab.spec.random_baseline`); other envs are computed on first use and cached.
Atari's ALE v5 games come from a second table, `_random_baseline_ale.json`: SLM Lab v5's
published measurements (its `source` says how they were made), since a random game runs up to
27k steps and the 104 games would take hours to measure here (`python -m
slm_lab.spec.random_baseline --check-ale GAME...` measures some to compare).
Keyed by env id plus what changes the task: extra gymnasium kwargs (e.g. `continuous`), the
spec's `max_t` (episodes cut at that many steps) and `action_repeat` (each random action held
that many steps, the rewards summed, as the training env does). The table holds the defaults
(the env's own time limit, no repeat).
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from loguru import logger

from slm_lab import SPEC_DIR
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.registry import backend_module, family_of
from slm_lab.lib.config import parse
from slm_lab.lib.util import counted

TABLE_PATH = SPEC_DIR / "_random_baseline.json"
ALE_TABLE_PATH = SPEC_DIR / "_random_baseline_ale.json"
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


PLAYGROUND = "MuJoCo Playground"  # its DM Control envs: `--playground` adds them to the table
# env arguments that change how fast an env steps, not its task
NOT_TASK_KWARGS = {"num_threads", "thread_affinity_offset"}


def baseline_key(
    name: str, kwargs: dict[str, Any], max_t: int | None = None, action_repeat: int = 1
) -> str:
    """The env id, then the kwargs and any setting other than the default as JSON."""
    settings = {
        **{k: v for k, v in kwargs.items() if k not in NOT_TASK_KWARGS},
        **({"max_t": max_t} if max_t is not None else {}),
        **({"action_repeat": action_repeat} if action_repeat > 1 else {}),
    }
    return name + (json.dumps(settings, sort_keys=True) if settings else "")


def cache_path() -> Path:
    return (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "slm_lab"
        / "random_baseline.json"
    )


def compute(
    name: str,
    kwargs: dict[str, Any],
    episodes: int,
    max_t: int | None = None,
    action_repeat: int = 1,
    seed: int = 0,
) -> float:
    """The mean return of `episodes` episodes of uniformly random actions, on the env as the
    backend that trains on it builds it (one env, no reward transforms; a Playground env: as
    many as `episodes`, stepped together in one jitted call)."""
    num_envs = episodes if family_of(name).name == PLAYGROUND else 1
    env_spec = {
        "name": name,
        "max_frame": 1,
        "max_t": max_t,
        "action_repeat": action_repeat,
        "num_envs": num_envs,
    }
    config = parse(EnvConfig, {**env_spec, **kwargs}, "env")
    env = backend_module(name).make(config, seed, Clock(config.max_frame, num_envs), gamma=1.0)
    env.record_episodes()
    env.reset()
    returns: list[float] = []
    while len(returns) < episodes:
        env.step(env.info.sample_actions())
        returns += [r for f in env.pop_episodes() for r in f.returns.tolist()]
    env.close()
    return float(np.mean(returns[:episodes]))


def _read(path: Path) -> dict[str, float]:
    return json.loads(path.read_text()) if path.exists() else {}


def _table() -> dict[str, float]:
    """The committed baselines: ours, then ALE v5's means (keyed by game id, default settings)."""
    ale = json.loads(ALE_TABLE_PATH.read_text())["games"]
    return {**{k: v["mean"] for k, v in ale.items()}, **_read(TABLE_PATH)}


def get(
    name: str,
    kwargs: dict[str, Any] | None = None,
    max_t: int | None = None,
    action_repeat: int = 1,
) -> float:
    key = baseline_key(name, kwargs or {}, max_t, action_repeat)
    table = _table()
    if key in table:
        return table[key]
    path = cache_path()
    cache = _read(path)
    if key not in cache:
        logger.info(
            f"computing the random baseline of {key} ({CACHE_EPISODES} episodes), cached in {path}"
        )
        cache[key] = compute(name, kwargs or {}, CACHE_EPISODES, max_t, action_repeat)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=2))
        tmp.replace(path)
    return cache[key]


def check_ale(games: list[str], episodes: int = TABLE_EPISODES) -> None:
    """Measure games' random baselines here and print them beside the ALE table's."""
    table = json.loads(ALE_TABLE_PATH.read_text())["games"]
    for game in games:
        name = f"ALE/{game}-v5"
        ours = compute(name, {}, episodes)
        ref = table[name]
        print(
            f"{name}: here {ours:.2f} ({counted(episodes, 'episode')}), table {ref['mean']:.2f} ± {ref['std']:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-ale"]:
        check_ale(sys.argv[2:])
        sys.exit()
    if sys.argv[1:2] == ["--playground"]:  # the 25 DM Control envs, added to the table
        from slm_lab.env import playground_backend

        envs = [k for k, v in playground_backend.table()["envs"].items() if v is not None]
        table = _read(TABLE_PATH)
        for env in envs:
            name = playground_backend.PREFIX + env
            table[name] = compute(name, {}, TABLE_EPISODES)
            print(f"{name}: {table[name]:.3f}", flush=True)
        TABLE_PATH.write_text(json.dumps(table, indent=2) + "\n")
        sys.exit()
    kept = {k: v for k, v in _read(TABLE_PATH).items() if family_of(k).name == PLAYGROUND}
    table = {baseline_key(n, kw): compute(n, kw, TABLE_EPISODES) for n, kw in TABLE_ENVS}
    table = {**table, **kept}
    TABLE_PATH.write_text(json.dumps(table, indent=2) + "\n")
    print(json.dumps(table, indent=2))
