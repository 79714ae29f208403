"""What a memory stores (`Layout`) and what a replay's arrays take (`replay_bytes`), torch-free:
validation sizes a replay before any session starts."""

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from slm_lab.agent.memory.config import PrioritizedReplayConfig, ReplayConfig
from slm_lab.env.backend import EnvInfo

INITIAL_FINAL_SLOTS = 1024  # final-obs ring size to start with; it doubles as needed
INITIAL_OLDER_SLOTS = 64  # frame stacks' ring of older frames: size to start with; it doubles


@dataclass(frozen=True)
class Layout:
    """Shapes and dtypes of what a memory stores, from the env's spaces."""

    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    action_shape: tuple[int, ...]
    action_dtype: np.dtype
    # observations are stacks of this many frames along their first axis, newest last (a
    # replay then stores one frame per step); 1: not frame stacks
    frame_stack: int = 1

    @classmethod
    def of(cls, env: EnvInfo) -> "Layout":
        """The layout of an env's steps as the agent receives them."""
        return cls.of_spaces(
            env.num_envs, env.observation_space, env.obs_dtype, env.action_space, env.frame_stack
        )

    @classmethod
    def of_spaces(
        cls,
        num_envs: int,
        obs_space: gym.Space,
        obs_dtype: np.dtype,
        action_space: gym.Space,
        frame_stack: int = 1,
    ) -> "Layout":
        """The layout from an env's spaces (validation has them before any env is stepped)."""
        discrete = isinstance(action_space, gym.spaces.Discrete)
        return cls(
            num_envs,
            obs_space.shape,
            np.dtype(obs_dtype),
            () if discrete else action_space.shape,
            np.dtype(np.int64 if discrete else np.float32),
            frame_stack,
        )


def replay_bytes(config: ReplayConfig, layout: Layout) -> int:
    """The bytes a new `Replay` (or `PrioritizedReplay`) of `config` allocates for `layout`.

    Every array is preallocated, so this is what the memory holds for the whole run, except
    its rings (final obs, older frames of frame stacks), counted at their starting size: they
    double only when more episode ends (or stacks that restart without zero padding) are live
    than they hold, which takes episodes a few steps long.
    """
    num_envs, k = layout.num_envs, layout.frame_stack
    rows = math.ceil(config.max_size / num_envs)
    capacity = rows * num_envs
    obs = math.prod(layout.obs_shape) * layout.obs_dtype.itemsize
    action = math.prod(layout.action_shape) * layout.action_dtype.itemsize
    # action, reward (float32), terminated and done flags, final-obs slot (int32)
    per_transition = action + 4 + 1 + 1 + 4
    latest_next_obs = num_envs * obs
    if k == 1:
        stored = capacity * (obs + per_transition) + min(INITIAL_FINAL_SLOTS, capacity) * obs
    else:
        frame = obs // k
        frame_rows = rows + k - 1
        # per frame row and env: the frame, its depth (int8), two older-frame slots (int32)
        # + each transition's cell (int32)
        frames = frame_rows * num_envs * (frame + 1 + 4 + 4) + capacity * 4
        rings = min(INITIAL_FINAL_SLOTS, capacity) * frame
        rings += min(INITIAL_OLDER_SLOTS, 2 * frame_rows * num_envs) * (k - 1) * frame
        stored = capacity * per_transition + frames + rings + num_envs * obs  # + previous obs
    tree = 0
    if isinstance(config, PrioritizedReplayConfig):  # a float64 sum tree over 2 ** depth leaves
        tree = 2 * (1 << max(capacity - 1, 0).bit_length()) * 8
    return stored + latest_next_obs + tree
