"""On-policy memories: preallocated arrays, written a whole env vector at a time.

OnPolicyBatchReplay collects `batch_steps` vector steps (a [T, N] batch) then hands it over.
OnPolicyReplay collects whole episodes per env and hands them over once `batch_steps` episodes
(the algorithm's training_frequency) have finished; partial episodes stay for the next batch.
"""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.memory.base import Batch, Layout, Transition, UnprioritizedMemory
from slm_lab.agent.memory.config import MemoryConfig


def _alloc(shape_prefix: tuple[int, ...], layout: Layout) -> dict[str, np.ndarray]:
    """Arrays named as Batch's fields, each shape_prefix + the field's own shape."""
    return {
        "obs": np.zeros(shape_prefix + layout.obs_shape, dtype=layout.obs_dtype),
        "actions": np.zeros(shape_prefix + layout.action_shape, dtype=layout.action_dtype),
        "rewards": np.zeros(shape_prefix, dtype=np.float32),
        "next_obs": np.zeros(shape_prefix + layout.obs_shape, dtype=layout.obs_dtype),
        "terminateds": np.zeros(shape_prefix, dtype=np.bool_),
        "dones": np.zeros(shape_prefix, dtype=np.bool_),
    }


def _batch(arrays: dict[str, np.ndarray], device: torch.device) -> Batch:
    return Batch(**{k: torch.as_tensor(v, device=device) for k, v in arrays.items()})


class OnPolicyBatchReplay(UnprioritizedMemory):
    """A [size, num_envs] batch of consecutive steps from every env."""

    def __init__(
        self, config: MemoryConfig, layout: Layout, batch_steps: int, max_frame: int
    ) -> None:
        self.size = batch_steps
        self.num_envs = layout.num_envs
        self.data = _alloc((batch_steps, layout.num_envs), layout)
        self.ptr = 0

    def add(self, t: Transition) -> None:
        d, i = self.data, self.ptr
        d["obs"][i] = t.obs
        d["actions"][i] = t.actions
        d["rewards"][i] = t.rewards
        d["next_obs"][i] = t.next_obs
        d["terminateds"][i] = t.terminateds
        np.logical_or(t.terminateds, t.truncateds, out=d["dones"][i])
        self.ptr += 1

    def ready(self) -> bool:
        return self.ptr >= self.size

    def mark_truncated(self) -> None:
        """End every env's stored episode at the last step (after a resume that restarted them)."""
        if self.ptr > 0:
            self.data["dones"][self.ptr - 1] = True

    def sample(self, device: torch.device) -> Batch:
        """The whole batch as [T, N, ...] tensors; the memory starts over."""
        self.ptr = 0
        return _batch(self.data, device)

    def state_dict(self) -> dict[str, Any]:
        """The rows written since the last batch (none right after one), as views of the
        memory's arrays: save it before the next `add`. The rows after them are never read
        before they are written again."""
        return {
            "ptr": self.ptr,
            "data": {k: torch.from_numpy(v[: self.ptr]) for k, v in self.data.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The saved rows, into the first rows (a checkpoint written before only the written
        rows were saved holds the whole batch)."""
        self.ptr = state["ptr"]
        for k, v in state["data"].items():
            self.data[k][: len(v)] = v.numpy()


class OnPolicyReplay(UnprioritizedMemory):
    """Whole episodes from every env; ready once `training_frequency` episodes have ended.

    Each env writes into its own row at its own pointer, so episodes stay contiguous; a batch is
    every env's finished episodes laid end to end as one [B, 1] sequence, episode ends marked.
    """

    INITIAL_CAPACITY = 1024

    def __init__(
        self, config: MemoryConfig, layout: Layout, batch_steps: int, max_frame: int
    ) -> None:
        self.training_frequency = batch_steps  # episodes per batch
        self.num_envs = num_envs = layout.num_envs
        self.layout = layout
        self.capacity = self.INITIAL_CAPACITY
        self.data = _alloc((num_envs, self.capacity), layout)
        self.ptr = np.zeros(num_envs, dtype=np.int64)
        self.last_end = np.zeros(
            num_envs, dtype=np.int64
        )  # index after each env's last finished episode
        self.num_episodes = 0
        self._rows = np.arange(num_envs)

    def _grow(self) -> None:
        new = _alloc((self.num_envs, self.capacity * 2), self.layout)
        for k, v in self.data.items():
            new[k][:, : self.capacity] = v
        self.data, self.capacity = new, self.capacity * 2

    def add(self, t: Transition) -> None:
        if self.ptr.max() >= self.capacity:
            self._grow()
        d, rows, cols = self.data, self._rows, self.ptr
        d["obs"][rows, cols] = t.obs
        d["actions"][rows, cols] = t.actions
        d["rewards"][rows, cols] = t.rewards
        d["next_obs"][rows, cols] = t.next_obs
        d["terminateds"][rows, cols] = t.terminateds
        dones = t.terminateds | t.truncateds
        d["dones"][rows, cols] = dones
        self.ptr += 1
        if dones.any():
            self.last_end[dones] = self.ptr[dones]
            self.num_episodes += int(dones.sum())

    def ready(self) -> bool:
        return self.num_episodes >= self.training_frequency

    def mark_truncated(self) -> None:
        """End every env's unfinished episode at its last step (after a resume that restarted them)."""
        open_envs = self.ptr > self.last_end
        self.data["dones"][open_envs, self.ptr[open_envs] - 1] = True
        self.last_end[open_envs] = self.ptr[open_envs]
        self.num_episodes += int(open_envs.sum())

    def sample(self, device: torch.device) -> Batch:
        """Every finished episode as a [B, 1, ...] sequence; unfinished ones stay."""
        batch = {
            k: np.concatenate([v[e, : self.last_end[e]] for e in range(self.num_envs)])[:, None]
            for k, v in self.data.items()
        }
        for e in range(self.num_envs):  # move each env's unfinished episode to the front
            end, ptr = self.last_end[e], self.ptr[e]
            for v in self.data.values():
                v[e, : ptr - end] = v[e, end:ptr]
        self.ptr -= self.last_end
        self.last_end[:] = 0
        self.num_episodes = 0
        return _batch(batch, device)

    def state_dict(self) -> dict[str, Any]:
        """Each env's steps up to the longest env's pointer (copies), not the whole capacity."""
        width = int(self.ptr.max())
        return {
            "ptr": torch.from_numpy(self.ptr.copy()),
            "last_end": torch.from_numpy(self.last_end.copy()),
            "num_episodes": self.num_episodes,
            "capacity": self.capacity,
            "data": {k: torch.from_numpy(v[:, :width].copy()) for k, v in self.data.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The saved steps, into arrays of the saved capacity (a checkpoint written before only
        the written steps were saved holds all of it)."""
        self.capacity = state["capacity"]
        self.data = _alloc((self.num_envs, self.capacity), self.layout)
        for k, v in state["data"].items():
            self.data[k][:, : v.shape[1]] = v.numpy()
        self.ptr, self.last_end = state["ptr"].numpy().copy(), state["last_end"].numpy().copy()
        self.num_episodes = state["num_episodes"]
