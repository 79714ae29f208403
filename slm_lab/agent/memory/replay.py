"""Off-policy replay memories: `Replay` (uniform, optional CER) and `PrioritizedReplay` (PER).

Storage: preallocated circular arrays of shape [capacity_steps, num_envs, ...], one row per vector
step, capacity_steps = ceil(max_size / num_envs) (so up to num_envs - 1 transitions more than
max_size fit). `add` writes a whole row at once. A transition is addressed by its flat index
row * num_envs + env, which is also its sum-tree leaf in PER.

Next observations are not stored twice. The successor of transition (row t, env e) is:
- obs[t + 1, e], the obs the same env passed to the next `add`, when the episode went on;
- a slot of the `finals` ring when the transition ended an episode (terminated or truncated):
  the next obs of that env is a reset obs, so the true final obs is kept apart. The ring is a
  FIFO in row order, filled only by episode ends: `final_idx[t, e]` names the slot (-1: none).
  When a row is overwritten its slots are the ring's oldest, so they are released from its head;
  the ring doubles (up to capacity) when more episode ends are live than it holds, which is rare
  and sized by how often episodes end, never by the frames (no full-size second frame store);
- `latest_next_obs[e]` for the newest row, whose next row is not written yet.
Overwriting row t makes it the newest row, so the old successors of row t - 1 stay right (obs of
row t is the new obs that followed) and no transition ever reads a stale or cross-episode frame.
On `load_state_dict`, the newest row's successors are copied into the ring too, so a resume
whose env restarts its episodes (next obs no longer the successor) cannot corrupt them.

Frame stacks (`Layout.frame_stack` k > 1, Atari's 4 x 84 x 84 uint8) are not stored whole: an
obs overlaps the one before it in all but its newest frame, so `stacks` (frame_stacks.FrameStacks)
keeps one frame per env and step, plus the older frames of stacks that do not continue the one
before (none for a reset's zero padding), and the `finals` ring keeps the final obs's newest
frame only. `sample` rebuilds obs and next_obs, bit for bit what the whole stacks were: about 1/k
of the memory, the same batches from the same draws. Indices, rows and CER are unchanged. A
resume pins the newest row's successors the same way, and its first `add` compares the obs with
the saved last one, so an env that restarted its episodes starts new stacks.

Sampling draws with replacement from the memory's own numpy Generator, seeded from
`torch.initial_seed()` at construction (a seeded session samples the same batches); its state is
part of `state_dict`. `use_cer` (combined experience replay, Zhang & Sutton 2017) puts the newest
row's transitions (one per env, at most batch_size) at the end of every batch.

`state_dict` shares the memory's arrays rather than copying them (a million-frame buffer would
otherwise double in RAM at each checkpoint): save it before the next `add`.
"""

import math
from typing import Any

import numpy as np
import torch

from slm_lab.agent.memory.base import Batch, Layout, Transition
from slm_lab.agent.memory.config import PrioritizedReplayConfig, ReplayConfig
from slm_lab.agent.memory.frame_stacks import FrameStacks, take_or_copy
from slm_lab.agent.memory.layout import INITIAL_FINAL_SLOTS
from slm_lab.agent.memory.ring import Ring
from slm_lab.agent.memory.sum_tree import SumTree
from slm_lab.lib.util import counted


def _flat(rows: np.ndarray, capacity: int) -> np.ndarray:
    """A [capacity_steps, num_envs, ...] array as [capacity, ...]: a view, the memory's arrays
    being contiguous (allocated so, and `take_or_copy` keeps a loaded one only if it is)."""
    return rows.reshape(capacity, *rows.shape[2:])


def _to_numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


class Replay:
    """Uniform experience replay over the last `max_size` transitions of all envs."""

    def __init__(
        self, config: ReplayConfig, layout: Layout, batch_steps: int, max_frame: int
    ) -> None:
        self.max_size = config.max_size
        self.batch_size = config.batch_size
        self.use_cer = config.use_cer
        self.num_envs = num_envs = layout.num_envs
        obs_shape, obs_dtype = layout.obs_shape, layout.obs_dtype
        action_shape, action_dtype = layout.action_shape, layout.action_dtype
        self.capacity_steps = math.ceil(self.max_size / num_envs)
        self.capacity = self.capacity_steps * num_envs
        self.obs_shape, self.obs_dtype = obs_shape, obs_dtype
        rows = (self.capacity_steps, num_envs)
        # frame stacks: one frame per env and step in `stacks`, the final ring holds frames
        self.stacks = (
            FrameStacks(self.capacity_steps, num_envs, obs_shape, obs_dtype)
            if layout.frame_stack > 1
            else None
        )
        self.data = {
            "actions": np.zeros(rows + action_shape, dtype=action_dtype),
            "rewards": np.zeros(rows, dtype=np.float32),
            "terminateds": np.zeros(rows, dtype=np.bool_),
            "dones": np.zeros(rows, dtype=np.bool_),
        }
        if self.stacks is None:
            self.data["obs"] = np.zeros(rows + obs_shape, dtype=obs_dtype)
        self.final_idx = np.full(rows, -1, dtype=np.int32)
        final_shape = obs_shape if self.stacks is None else obs_shape[1:]
        self.finals = Ring(
            INITIAL_FINAL_SLOTS, final_shape, obs_dtype, self.capacity, [self.final_idx]
        )
        self.latest_next_obs = np.zeros((num_envs,) + obs_shape, dtype=obs_dtype)
        self.head = 0  # the row the next add writes
        self.num_rows = 0
        self.rng = np.random.default_rng(torch.initial_seed())

    # -- writing -----------------------------------------------------------------------------
    def add(self, t: Transition) -> None:
        d, r = self.data, self.head
        if self.num_rows == self.capacity_steps:  # row r is the oldest: release its final obs
            self.finals.release(int(np.count_nonzero(self.final_idx[r] >= 0)))
            self.final_idx[r] = -1
        if self.stacks is None:
            d["obs"][r] = t.obs
        else:
            self.stacks.add(r, t.obs)
        d["actions"][r] = t.actions
        d["rewards"][r] = t.rewards
        d["terminateds"][r] = t.terminateds
        dones = np.logical_or(t.terminateds, t.truncateds, out=d["dones"][r])
        if dones.any():
            self.final_idx[r, dones] = self._push_finals(dones, t.next_obs[dones])
        self.latest_next_obs[...] = t.next_obs
        self.head = (r + 1) % self.capacity_steps
        self.num_rows = min(self.num_rows + 1, self.capacity_steps)

    def _push_finals(self, ended: np.ndarray, finals: np.ndarray) -> np.ndarray:
        """Ring slots of the final obs `finals` of the newest row's envs `ended` (a mask)."""
        if self.stacks is not None:
            finals = self.stacks.add_finals(ended, finals)
        return self.finals.push(finals)

    # -- reading -----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.num_rows * self.num_envs

    @property
    def nbytes(self) -> int:
        """Bytes of the memory's arrays (see layout.replay_bytes for a new one's)."""
        arrays = [*self.data.values(), self.final_idx, self.finals.values, self.latest_next_obs]
        return sum(a.nbytes for a in arrays) + (0 if self.stacks is None else self.stacks.nbytes)

    def ready(self) -> bool:
        return self.size >= self.batch_size

    def _newest_idxs(self) -> np.ndarray:
        """Flat indices of the newest row's transitions, at most batch_size of them."""
        newest_row = (self.head - 1) % self.capacity_steps
        return newest_row * self.num_envs + np.arange(min(self.num_envs, self.batch_size))

    def _sample_idxs(self) -> np.ndarray:
        return self.rng.integers(0, self.size, size=self.batch_size)

    def _batch_idxs(self) -> np.ndarray:
        idxs = self._sample_idxs()
        if self.use_cer:
            newest = self._newest_idxs()
            idxs[-len(newest) :] = newest
        return idxs

    def _gather(self, idxs: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        """The transitions at flat indices `idxs`, as tensors named as Batch's fields.

        The [capacity_steps, num_envs, ...] arrays are read as [capacity, ...] (a view of the
        same memory), where flat index i is row i // num_envs, env i % num_envs: one index
        array instead of two, in a gather that runs at every gradient step."""
        num_envs, capacity = self.num_envs, self.capacity
        flat = {k: _flat(v, capacity) for k, v in self.data.items()}
        batch = {k: v.take(idxs, axis=0) for k, v in flat.items()}
        slots = _flat(self.final_idx, capacity).take(idxs)
        ended = slots >= 0
        next_idxs = idxs + num_envs  # the next row's transition of the same env
        next_idxs[next_idxs >= capacity] -= capacity
        if self.stacks is None:
            next_obs = flat["obs"].take(next_idxs, axis=0)
            if ended.any():
                next_obs[ended] = self.finals.values[slots[ended]]
        else:  # obs and next_obs (the next row's obs) rebuilt in one go
            obs, next_obs = np.split(self.stacks.stacks(np.concatenate([idxs, next_idxs])), 2)
            batch["obs"] = obs
            if ended.any():
                next_obs[ended] = self.stacks.final_stacks(
                    idxs[ended], obs[ended], self.finals.values[slots[ended]]
                )
        newest_first = (self.head - 1) % self.capacity_steps * num_envs  # the newest row's env 0
        newest = (idxs >= newest_first) & (idxs < newest_first + num_envs) & ~ended
        if newest.any():
            next_obs[newest] = self.latest_next_obs[idxs[newest] - newest_first]
        batch["next_obs"] = next_obs
        if device.type == "cpu":
            return {k: torch.from_numpy(v) for k, v in batch.items()}
        return {k: torch.as_tensor(v, device=device) for k, v in batch.items()}

    def sample(self, device: torch.device) -> Batch:
        """A [batch_size, ...] batch of obs, actions, rewards, next_obs, terminateds, dones."""
        return Batch(**self._gather(self._batch_idxs(), device))

    def mark_truncated(self) -> None:
        """Nothing to end: each stored transition already has its successor."""

    def update_priorities(self, idxs: torch.Tensor | np.ndarray, td_errors: torch.Tensor) -> None:
        """Uniform replay has no priorities."""

    def anneal(self, frame: int) -> None:
        """Uniform replay has no schedule."""

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        n = self.num_rows
        state = {
            "capacity_steps": self.capacity_steps,
            "num_envs": self.num_envs,
            "head": self.head,
            "num_rows": n,
            "data": {k: torch.from_numpy(v[:n]) for k, v in self.data.items()},
            "final_idx": torch.from_numpy(self.final_idx[:n]),
            "final_obs": torch.from_numpy(self.finals.values),
            "final_head": self.finals.head,
            "final_count": self.finals.count,
            "latest_next_obs": torch.from_numpy(self.latest_next_obs),
            "rng": self.rng.bit_generator.state,
        }
        if self.stacks is not None:
            state["frame_stacks"] = self.stacks.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a checkpoint's state. A full replay takes the state's arrays over (see
        `take_or_copy`): the state is consumed, not to be loaded again, and one taken straight
        from another replay's `state_dict()` (views of its arrays) would share them."""
        saved = (state["capacity_steps"], state["num_envs"])
        if saved != (self.capacity_steps, self.num_envs):
            raise ValueError(
                f"max_size: the checkpoint's memory has {counted(saved[0], 'row')} x {counted(saved[1], 'env')}, "
                f"this one {self.capacity_steps} x {self.num_envs}; resume with the same max_size and num_envs"
            )
        n = self.num_rows = state["num_rows"]
        self.head = state["head"]
        for k, v in state["data"].items():
            self.data[k] = take_or_copy(v, self.data[k])
        self.final_idx[:] = -1
        self.final_idx[:n] = state["final_idx"].numpy()
        self.finals.load_state_dict(
            {
                "values": state["final_obs"],
                "head": state["final_head"],
                "count": state["final_count"],
            }
        )
        self.latest_next_obs[...] = state["latest_next_obs"].numpy()
        self.rng.bit_generator.state = state["rng"]
        if self.stacks is not None:
            self.stacks.load_state_dict(state["frame_stacks"])
        if n:  # the newest row's successors no longer depend on what the next add passes
            newest_row = (self.head - 1) % self.capacity_steps
            open_envs = self.final_idx[newest_row] < 0
            if open_envs.any():  # none when every env's episode ended at the newest row
                self.final_idx[newest_row, open_envs] = self._push_finals(
                    open_envs, self.latest_next_obs[open_envs]
                )


class PrioritizedReplay(Replay):
    """Proportional prioritized replay (Schaul et al. 2016) with importance-sampling weights.

    priority p_i = (|td_error_i| + epsilon) ** alpha, kept in a sum tree over the capacity; a
    new transition gets the largest priority set so far (1 at first). A batch is stratified: the
    total is split into batch_size equal segments and one leaf drawn uniformly within each.
    Weights w_i = (N * P(i)) ** -beta / max_j w_j with N = size, P(i) = p_i / total, normalized
    by the max over the batch (so they are <= 1 and only scale the loss down).
    beta rises linearly from the config's beta (0.4 by default) to exactly 1 at frame
    beta_end_step (the run's max_frame by default): the algorithm calls `anneal(frame)` every
    step.
    """

    def __init__(
        self, config: PrioritizedReplayConfig, layout: Layout, batch_steps: int, max_frame: int
    ) -> None:
        super().__init__(config, layout, batch_steps, max_frame)
        self.alpha = config.alpha
        self.epsilon = config.epsilon
        self.beta_start = config.beta
        self.beta_end_step = float(config.beta_end_step or max_frame)
        self.beta = self.beta_start
        self.max_priority = 1.0
        self.tree = SumTree(self.capacity)

    def add(self, t: Transition) -> None:
        row = self.head
        super().add(t)
        leaves = row * self.num_envs + np.arange(self.num_envs)
        self.tree.update(leaves, np.full(self.num_envs, self.max_priority))

    @property
    def nbytes(self) -> int:
        return super().nbytes + self.tree.tree.nbytes

    def anneal(self, frame: int) -> None:
        frac = min(frame / self.beta_end_step, 1.0)
        self.beta = 1.0 - (1.0 - self.beta_start) * (1.0 - frac)  # exactly 1 once frac is 1

    def _sample_idxs(self) -> np.ndarray:
        segment = self.tree.total / self.batch_size
        prefix_sums = (np.arange(self.batch_size) + self.rng.random(self.batch_size)) * segment
        return self.tree.find(prefix_sums)

    def is_weights(self, idxs: np.ndarray) -> np.ndarray:
        """Importance-sampling weights of leaves `idxs`, normalized by their max."""
        probs = self.tree.get(idxs) / self.tree.total
        weights = (self.size * probs) ** -self.beta
        return (weights / weights.max()).astype(np.float32)

    def sample(self, device: torch.device) -> Batch:
        """The Replay batch plus `weights` [B] (float32) and `idxs` [B] for update_priorities."""
        idxs = self._batch_idxs()
        return Batch(
            **self._gather(idxs, device),
            weights=torch.as_tensor(self.is_weights(idxs), device=device),
            idxs=torch.as_tensor(idxs, device=device),
        )

    def update_priorities(self, idxs: torch.Tensor | np.ndarray, td_errors: torch.Tensor) -> None:
        abs_errors = np.abs(_to_numpy(td_errors).astype(np.float64).ravel())
        priorities = (abs_errors + self.epsilon) ** self.alpha
        self.tree.update(_to_numpy(idxs).ravel(), priorities)
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "tree": self.tree.state_dict(),
            "max_priority": self.max_priority,
            "beta": self.beta,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.tree.load_state_dict(state["tree"])
        self.max_priority, self.beta = state["max_priority"], state["beta"]
