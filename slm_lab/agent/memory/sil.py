"""Self-imitation replay (Oh et al. 2018): past transitions with their episodes' true returns.

Each env's running episode is staged (obs, action, reward) until it ends. Then its discounted
returns are computed backwards over the whole episode,
  R_t = r_t + gamma * R_{t+1},   R_T = r_T + gamma * (0 if terminated else V(s_final)),
(a time-limit truncation bootstraps from the critic's value of the true final observation, given
by the caller) and the episode's transitions enter a circular store of `max_size` (obs, action,
return) rows, sampled uniformly in batches of `batch_size`. `use_cer` puts the newest rows (at
most one per env) at the end of every batch. Only finished episodes are sampled: a return is
known only once its episode is over.

Staging arrays grow by doubling (an episode's length is not known in advance); the staged
observations and actions of an env are a ring of at most max_size steps (older ones could not
be stored). The store is preallocated.
"""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.memory.base import Batch, Layout, Transition, UnprioritizedMemory
from slm_lab.agent.memory.config import SILMemoryConfig
from slm_lab.lib.math_util import calc_returns
from slm_lab.lib.util import counted

INITIAL_STAGE_STEPS = 256


class SILReplay(UnprioritizedMemory):
    def __init__(self, config: SILMemoryConfig, layout: Layout, gamma: float) -> None:
        self.max_size = config.max_size
        self.batch_size = config.batch_size
        self.use_cer = config.use_cer
        self.gamma = gamma
        self.num_envs = num_envs = layout.num_envs
        obs_shape, obs_dtype = layout.obs_shape, layout.obs_dtype
        action_shape, action_dtype = layout.action_shape, layout.action_dtype
        self.data = {
            "obs": np.zeros((self.max_size,) + obs_shape, dtype=obs_dtype),
            "actions": np.zeros((self.max_size,) + action_shape, dtype=action_dtype),
            "returns": np.zeros(self.max_size, dtype=np.float32),
        }
        # the running episodes: observations and actions in a per-env ring that grows up to
        # max_size (older steps could not be stored anyway), rewards in full (for the returns)
        stage_steps = min(INITIAL_STAGE_STEPS, self.max_size)
        self.stage = {
            "obs": np.zeros((num_envs, stage_steps) + obs_shape, dtype=obs_dtype),
            "actions": np.zeros((num_envs, stage_steps) + action_shape, dtype=action_dtype),
        }
        self.stage_rewards = np.zeros((num_envs, INITIAL_STAGE_STEPS), dtype=np.float64)
        self.stage_len = np.zeros(num_envs, dtype=np.int64)
        self.head = 0  # the row the next write goes to
        self.size = 0
        self.written = 0  # rows written so far, to tell which `newest` rows were overwritten
        self.newest: list[int] = []  # rows of the latest finished episodes' last steps (CER)
        self.rng = np.random.default_rng(torch.initial_seed())

    @property
    def stage_steps(self) -> int:
        return self.stage["obs"].shape[1]

    def add(self, t: Transition, final_values: np.ndarray | None = None) -> None:
        """Stage one vector step; move every episode that ended into the store.

        `final_values[e]` is V(s_final) of env e, read only where e was truncated (not terminated).
        """
        obs, actions, rewards, terminateds, truncateds = (
            t.obs,
            t.actions,
            t.rewards,
            t.terminateds,
            t.truncateds,
        )
        longest = int(self.stage_len.max())
        if longest == self.stage_steps < self.max_size:
            self.stage = {
                k: _grown(a, min(2 * a.shape[1], self.max_size)) for k, a in self.stage.items()
            }
        if longest == self.stage_rewards.shape[1]:
            self.stage_rewards = _grown(self.stage_rewards, 2 * longest)
        envs = np.arange(self.num_envs)
        t = self.stage_len
        pos = t % self.stage_steps  # wraps only once the ring holds max_size steps
        self.stage["obs"][envs, pos] = obs
        self.stage["actions"][envs, pos] = actions
        self.stage_rewards[envs, t] = rewards
        self.stage_len += 1
        dones = np.logical_or(terminateds, truncateds)
        if dones.any():
            ends = []
            for e in np.flatnonzero(dones):
                bootstrap = 0.0
                if not terminateds[e] and final_values is not None:
                    bootstrap = float(final_values[e])
                ends.append((self._store_episode(int(e), bootstrap), self.written))
            # an episode end overwritten by a later episode of this same step is not the newest
            self.newest = [row for row, at in ends if self.written - at < self.max_size]

    def _store_episode(self, e: int, bootstrap: float) -> int:
        """Write env e's finished episode into the store; returns the row of its last step."""
        n = int(self.stage_len[e])
        rewards = torch.from_numpy(self.stage_rewards[e, :n, None])  # [n, 1]: one episode
        returns = calc_returns(
            rewards, torch.zeros_like(rewards, dtype=torch.bool), self.gamma, bootstrap
        )[:, 0].numpy()
        m = min(n, self.max_size)  # only the episode's last max_size steps fit
        src = (n - m + np.arange(m)) % self.stage_steps
        rows = (self.head + np.arange(m)) % self.max_size
        self.data["obs"][rows] = self.stage["obs"][e, src]
        self.data["actions"][rows] = self.stage["actions"][e, src]
        self.data["returns"][rows] = returns[n - m :]
        self.head = int((self.head + m) % self.max_size)
        self.size = min(self.size + m, self.max_size)
        self.written += m
        self.stage_len[e] = 0
        return int(rows[-1])

    def mark_truncated(self) -> None:
        """Drop the staged partial episodes (after a resume that restarted the env's episodes)."""
        self.stage_len[:] = 0

    def ready(self) -> bool:
        return self.size >= self.batch_size

    def sample(self, device: torch.device) -> Batch:
        """obs, actions and, in `rewards`, the discounted returns R of sampled steps."""
        n_cer = min(len(self.newest), self.batch_size) if self.use_cer else 0
        idxs = self.rng.integers(0, self.size, size=self.batch_size - n_cer)
        if n_cer:
            idxs = np.concatenate([idxs, np.asarray(self.newest[:n_cer])])
        data = {k: torch.as_tensor(v[idxs], device=device) for k, v in self.data.items()}
        return Batch(data["obs"], data["actions"], data["returns"])

    def state_dict(self) -> dict[str, Any]:
        """Arrays are shared with the memory as tensors, not copied: save before the next `add`."""
        n, longest = self.size, int(self.stage_len.max())
        return {
            "max_size": self.max_size,
            "num_envs": self.num_envs,
            "data": {k: torch.from_numpy(v[:n]) for k, v in self.data.items()},
            "stage_steps": self.stage_steps,
            "stage": {k: torch.from_numpy(v[:, :longest]) for k, v in self.stage.items()},
            "stage_rewards": torch.from_numpy(self.stage_rewards[:, :longest]),
            "stage_len": torch.from_numpy(self.stage_len),
            "head": self.head,
            "size": n,
            "written": self.written,
            "newest": list(self.newest),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = (state["max_size"], state["num_envs"])
        if saved != (self.max_size, self.num_envs):
            raise ValueError(
                f"max_size: the checkpoint's self-imitation replay holds {counted(saved[0], 'row')} for "
                f"{counted(saved[1], 'env')}, this one {self.max_size} for {self.num_envs}; resume with the same max_size and num_envs"
            )
        n = self.size = int(state["size"])
        for k, v in state["data"].items():
            self.data[k][:n] = v.numpy()
        self.stage_len = state["stage_len"].numpy().copy()
        for k, v in state["stage"].items():
            self.stage[k] = _grown(self.stage[k][:, :0], state["stage_steps"])
            self.stage[k][:, : v.shape[1]] = v.numpy()
        rewards = state["stage_rewards"].numpy()
        self.stage_rewards = _grown(rewards, max(INITIAL_STAGE_STEPS, 2 * rewards.shape[1]))
        self.head, self.written = int(state["head"]), int(state["written"])
        self.newest = list(state["newest"])
        self.rng.bit_generator.state = state["rng"]


def _grown(a: np.ndarray, steps: int) -> np.ndarray:
    """`a` ([num_envs, steps_now, ...]) copied into zeros of [num_envs, steps, ...]."""
    out = np.zeros((a.shape[0], steps) + a.shape[2:], dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out
