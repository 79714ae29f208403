"""A second env backend, for the tests: a corridor written in numpy, not built on Gymnasium's
VectorEnv. It proves the backend seam: registered with one registry entry, it trains through the
CLI like any Gymnasium env.

`numpy/Corridor-v0`: each env is a corridor of LENGTH cells; the agent starts in the middle and
steps left (0) or right (1). Reaching the right end pays 1 and ends the episode, every other
step pays STEP_REWARD; an episode is cut after MAX_STEPS steps. The observation is the position
one-hot. All envs step as one array.
"""

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from slm_lab.env.backend import EnvInfo, FinishedEpisodes
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.registry import Family
from slm_lab.env.transition import Transition
from slm_lab.lib.config import SpecError

FAMILY = Family("numpy corridor (tests)", r"numpy/.+", "numpy_backend")
ENV_ID = "numpy/Corridor-v0"
LENGTH = 6
MAX_STEPS = 20
STEP_REWARD = -0.05
WINDOW = 100


def spaces(config: EnvConfig) -> tuple[gym.Space, gym.Space]:
    if config.name != ENV_ID:
        raise SpecError(f"env.name: {config.name!r}: the numpy backend has only {ENV_ID}")
    if config.kwargs:
        raise SpecError(f"env.{next(iter(config.kwargs))}: unknown key (the corridor takes none)")
    return gym.spaces.Box(0.0, 1.0, (LENGTH,), np.float32), gym.spaces.Discrete(2)


def fetch_assets(config: EnvConfig) -> None:
    """Nothing to download."""


def frame_stack(observation_space: gym.Space) -> int:
    return 1


def make(
    config: EnvConfig,
    seed: int,
    clock: Clock,
    gamma: float,
    render_mode: str | None = None,
    seq_len: int | None = None,
    cpus: int | None = None,
    device: str = "cpu",
) -> "Corridor":
    if render_mode is not None:
        raise SpecError(f"{ENV_ID} cannot render (render_mode {render_mode!r})")
    return Corridor(config, seed, clock)


class Corridor:
    def __init__(self, config: EnvConfig, seed: int, clock: Clock) -> None:
        obs_space, action_space = spaces(config)
        self.n, self.seed, self.clock = config.num_envs, seed, clock
        self.vectorization = "one numpy array"
        self.max_steps = config.max_t or MAX_STEPS
        self.rng = np.random.default_rng(seed)
        self.info = EnvInfo(obs_space, action_space, self.n, np.dtype(np.float32), self._sample)
        self.pos = np.full(self.n, LENGTH // 2)
        self.steps = np.zeros(self.n, dtype=int)
        self.returns = np.zeros(self.n)
        self.finished_returns: deque[float] = deque(maxlen=WINDOW)
        self._finished: list[FinishedEpisodes] | None = None

    def _sample(self) -> np.ndarray:
        return self.rng.integers(0, 2, size=self.n)

    def _obs(self, pos: np.ndarray) -> np.ndarray:
        return np.eye(LENGTH, dtype=np.float32)[pos]

    @property
    def obs(self) -> np.ndarray:
        return self._obs(self.pos)

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.pos[:], self.steps[:], self.returns[:] = LENGTH // 2, 0, 0.0
        return self.obs

    def step(self, actions: np.ndarray) -> Transition:
        obs = self.obs
        self.pos = np.clip(self.pos + np.where(actions == 1, 1, -1), 0, LENGTH - 1)
        self.steps += 1
        terminated = self.pos == LENGTH - 1
        truncated = ~terminated & (self.steps >= self.max_steps)
        rewards = np.where(terminated, 1.0, STEP_REWARD).astype(np.float32)
        self.returns += rewards
        next_obs = self.obs
        done = terminated | truncated
        self.clock.tick(int(done.sum()))
        if done.any():
            ended = self.returns[done]
            self.finished_returns.extend(ended.tolist())
            if self._finished is not None:
                first = self.clock.epi - int(done.sum())
                self._finished.append(
                    FinishedEpisodes(
                        self.clock.frame,
                        first,
                        ended.copy(),
                        self.steps[done],
                        np.flatnonzero(done),
                    )
                )
            self.pos[done], self.steps[done], self.returns[done] = LENGTH // 2, 0, 0.0
        return Transition(obs, actions, rewards, next_obs, terminated, truncated)

    @property
    def total_reward(self) -> float:
        q = self.finished_returns
        return float(np.mean(q)) if q else float("nan")

    def record_episodes(self) -> None:
        self._finished = []

    def pop_episodes(self) -> list[FinishedEpisodes]:
        finished, self._finished = self._finished, []
        return finished

    def obs_stats(self) -> None:
        return None

    def set_obs_stats(self, stats: dict[str, Any] | None, frozen: bool) -> None:
        assert stats is None, "the corridor does not normalize observations"

    def state_dict(self) -> dict[str, Any]:
        return {
            "pos": self.pos.tolist(),
            "steps": self.steps.tolist(),
            "returns": self.returns.tolist(),
            "finished_returns": list(self.finished_returns),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        self.pos = np.array(state["pos"])
        self.steps = np.array(state["steps"])
        self.returns = np.array(state["returns"])
        self.finished_returns = deque(state["finished_returns"], maxlen=WINDOW)
        self.rng.bit_generator.state = state["rng"]
        return True

    def uncapturable(self) -> None:
        return None

    def close(self) -> None:
        pass
