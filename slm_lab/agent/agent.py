"""Agent: an algorithm (with its nets and memory) and the metrics it reports."""

import math
import random
from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.registry import ALGORITHMS
from slm_lab.agent.net import net_util
from slm_lab.env.vec_env import VecEnv


class Agent:
    def __init__(self, agent_spec: dict[str, Any], env: VecEnv) -> None:
        device = net_util.get_device((agent_spec.get("net") or {}).get("gpu", "auto"))
        self.algorithm = ALGORITHMS[agent_spec["algorithm"]["name"]](agent_spec, env, device)
        self.env = env

    def act(self, obs: Any) -> Any:
        return self.algorithm.act(obs)

    def update(
        self, obs: Any, actions: Any, rewards: Any, next_obs: Any, terminateds: Any, truncateds: Any
    ) -> None:
        self.algorithm.update(obs, actions, rewards, next_obs, terminateds, truncateds)

    def set_eval(self) -> None:
        self.algorithm.eval_mode = True
        self.algorithm.update_schedules()


class MetricsTracker:
    """Builds one row per checkpoint (DESIGN §5) and keeps them."""

    MA_WINDOW = 100  # total_reward_ma: mean of total_reward over this many checkpoint rows

    def __init__(self, env: VecEnv, agent: Agent) -> None:
        self.env = env
        self.agent = agent
        self.rows: list[dict[str, float]] = []
        self._last_frame = 0
        self._last_wall = 0.0

    def add_row(self) -> dict[str, float]:
        clock = self.env.clock
        wall_t = clock.wall_t
        elapsed = wall_t - self._last_wall
        fps = (clock.frame - self._last_frame) / elapsed if elapsed > 0 else math.nan
        self._last_frame, self._last_wall = clock.frame, wall_t
        total_reward = self.env.total_reward
        recent = [r["total_reward"] for r in self.rows[-(self.MA_WINDOW - 1) :]] + [total_reward]
        recent = [r for r in recent if not math.isnan(r)]
        row = {
            "frame": clock.frame,
            "t": clock.t,
            "epi": clock.epi,
            "opt_step": clock.opt_step,
            "wall_t": wall_t,
            "fps": fps,
            "total_reward": total_reward,
            "total_reward_ma": sum(recent) / len(recent) if recent else math.nan,
            **self.agent.algorithm.metrics(),
        }
        self.rows.append(row)
        return row

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [dict(r) for r in self.rows], "last_frame": self._last_frame}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = [dict(r) for r in state["rows"]]
        self._last_frame = state["last_frame"]
        self._last_wall = self.env.clock.wall_t


def rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype("int64")), *np_state[2:]),
        "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype("uint32"), *rest))
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
