"""The env backend interface: what a session steps, and what an agent may know of it.

A backend steps `num_envs` envs together and returns one `Transition` per vector step. The
session owns it; an agent gets only its `EnvInfo` (spaces, `num_envs`, the observation dtype, a
random-action sampler) and the clock, never the backend. Which backend runs an env id is
decided in one place, slm_lab.env.registry. `play_episodes` plays whole episodes on a backend
(evaluations and `enjoy`).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np

from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.transition import Transition


@dataclass(frozen=True)
class EnvInfo:
    """What an agent knows of the envs it acts on."""

    observation_space: gym.Space  # one env's observation, as the agent receives it
    action_space: gym.Space  # one env's action; a bounded Box is the agent's [-1, 1]
    num_envs: int
    obs_dtype: np.dtype  # how observations reach the agent (float32 once normalized)
    sample_actions: Callable[[], np.ndarray]  # uniform random actions for every env
    # observations are stacks of this many frames along their first axis, each step's newest
    # last (Atari); 1: not frame stacks
    frame_stack: int = 1

    @property
    def is_discrete(self) -> bool:
        return isinstance(self.action_space, gym.spaces.Discrete)


def agent_obs_dtype(space: gym.Space, float_obs: bool) -> np.dtype:
    """The dtype observations reach the agent in: float32 when the backend normalizes or clips
    them, or the env gives float64; else the env's own (uint8 images stay uint8)."""
    return np.dtype(np.float32 if float_obs or space.dtype == np.float64 else space.dtype)


def episode_quota(episodes: int, num_envs: int) -> np.ndarray:
    """How many episodes each sub-env plays when `episodes` are played on `num_envs`: sub-env i
    its first (episodes + i) // num_envs. Counting whichever episodes end first instead would
    favour short ones (on MuJoCo, the early falls)."""
    return (episodes + np.arange(num_envs)) // num_envs


class FinishedEpisodes(NamedTuple):
    """The episodes that ended on one step, in env order: the frame after the step, the index
    of the first (0 for a session's first finished episode), their returns (unnormalized),
    lengths and sub-envs."""

    frame: int
    first_index: int
    returns: np.ndarray
    lengths: np.ndarray
    envs: np.ndarray


class EnvBackend(Protocol):
    """`num_envs` envs stepped together, ticking the clock it was given."""

    info: EnvInfo
    clock: Clock
    vectorization: str  # how the envs step (sync, async, native...) and why, for the log

    @property
    def obs(self) -> np.ndarray:
        """What the agent acts on next: each env's current observation."""

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start every env's episode; `seed` reseeds them (default: the backend's own seed)."""

    def step(self, actions: np.ndarray) -> Transition:
        """Step every env; a transition's next_obs is its true successor (the final observation
        where an episode ended), while `obs` becomes the reset observation there."""

    @property
    def total_reward(self) -> float:
        """Mean unnormalized return of up to the last 100 finished episodes; NaN before any."""

    def record_episodes(self) -> None:
        """Keep every finished episode from now on, for `pop_episodes`."""

    def pop_episodes(self) -> list[FinishedEpisodes]:
        """The episodes finished since the last call, oldest first."""

    def obs_stats(self) -> dict[str, Any] | None:
        """A copy of the observation normalizer's statistics (what acting needs), or None."""

    def set_obs_stats(self, stats: dict[str, Any] | None, frozen: bool) -> None:
        """Take these normalizer statistics; `frozen`: never update them."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (the clock is the session's)."""

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore; False when episodes in progress could not be restored and restart."""

    def uncapturable(self) -> str | None:
        """What a saved state cannot hold, so that a resume restarts the episodes in progress
        (e.g. a physics engine's native object); None when a resume continues them exactly."""

    def frames(self) -> list[np.ndarray]:
        """The frames the first env rendered since the last call, oldest first: one after each
        reset and each step (a backend made with render_mode "rgb_array")."""

    @property
    def frame_rate(self) -> float:
        """The frames per second of real time that `frames` show."""

    def close(self) -> None: ...


class FrameSink(Protocol):
    """Where a replay's frames go (slm_lab.experiment.video.Video)."""

    def add(self, frames: Sequence[np.ndarray]) -> None: ...


def play_episodes(
    env: EnvBackend,
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    recording: FrameSink | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Step `env` (`record_episodes` on, its episodes started) with `act` until every sub-env has
    ended its share of `episodes` (`episode_quota`; a sub-env whose episodes never end, with no
    time limit, is waited for); returns those episodes' returns (the env's own, unnormalized) and
    lengths, in the order they ended. Each step's frames go to `recording` (one env): the last
    episode's end resets the env, and that first frame of an episode not replayed is left out."""
    targets = episode_quota(episodes, env.info.num_envs)
    counts = np.zeros_like(targets)
    returns, lengths = [], []
    while (counts < targets).any():
        env.step(act(env.obs))
        for finished in env.pop_episodes():
            kept = counts[finished.envs] < targets[finished.envs]
            counts[finished.envs[kept]] += 1
            returns.append(finished.returns[kept])
            lengths.append(finished.lengths[kept])
        if recording is not None:
            frames = env.frames()
            recording.add(frames if (counts < targets).any() else frames[:-1])
    return np.concatenate(returns), np.concatenate(lengths)


class BackendModule(Protocol):
    """What a backend module (one per env family) provides: the spaces of an env for validation
    (torch-free, nothing stepped) and the backend itself."""

    def spaces(self, config: EnvConfig) -> tuple[gym.Space, gym.Space] | None:
        """(observation space as the agent sees it, action space as the env declares it);
        SpecError with one line when the env cannot be made; None when they are known only
        once the env has loaded assets it downloads at its first load (validation then checks
        the spec's own keys, not its fit to the env)."""

    def fetch_assets(self, config: EnvConfig) -> None:
        """Before a run's sessions start (in the torch-free run process): download what the env
        loads at its first use where it can; SpecError in one line where it cannot."""

    def frame_stack(self, observation_space: gym.Space) -> int:
        """EnvInfo.frame_stack of its env with this observation space, known before the env is
        made (validation sizes a replay with it)."""

    def make(
        self,
        config: EnvConfig,
        seed: int,
        clock: Clock,
        gamma: float,
        render_mode: str | None = None,
        seq_len: int | None = None,
        cpus: int | None = None,
        device: str = "cpu",
    ) -> EnvBackend:
        """The backend: `gamma` is the agent's discount (reward normalization's return);
        `render_mode` Gymnasium's: None, "human" (a window) or "rgb_array" (one sync env whose
        frames a video takes; SpecError when the env cannot render them); `seq_len` stacks each
        env's last observations (a RecurrentNet's input); `cpus` the cores the session's envs
        may use (None: the machine's); `device` the torch device of the session's agent
        (its placement's: a backend that computes on an accelerator keeps its arrays there)."""
