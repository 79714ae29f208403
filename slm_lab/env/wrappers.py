"""Wrappers Gymnasium does not provide."""

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers.utils import RunningMeanStd


class ActionRepeat(gym.Wrapper):
    """Repeat each action `repeat` times, summing rewards; stops early at an episode end."""

    def __init__(self, env: gym.Env, repeat: int) -> None:
        super().__init__(env)
        self.repeat = repeat

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


class ObsNormalizer:
    """Running mean/std observation normalizer shared by all envs of a vector.

    Gymnasium's vector NormalizeObservation only supports NEXT_STEP autoreset and would leave the
    final observations in `info` unnormalized; this applies one transform to both.
    """

    def __init__(
        self, shape: tuple[int, ...], normalize: bool, clip: float | None, eps: float = 1e-8
    ) -> None:
        self.rms = RunningMeanStd(shape=shape) if normalize else None
        self.clip = clip
        self.eps = eps
        self.update_running_mean = True

    def __call__(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        if self.rms is not None:
            if update and self.update_running_mean:
                self.rms.update(obs)
            obs = ((obs - self.rms.mean) / np.sqrt(self.rms.var + self.eps)).astype(np.float32)
        if self.clip is not None:
            obs = np.clip(obs, -self.clip, self.clip)
        return obs

    def stats(self) -> dict[str, Any] | None:
        """A copy of the running statistics (None: observations are not normalized)."""
        if self.rms is None:
            return None
        rms = self.rms
        return {"mean": rms.mean.copy(), "var": rms.var.copy(), "count": float(rms.count)}

    def set_stats(self, stats: dict[str, Any] | None, frozen: bool) -> None:
        """Take `stats` (None: keep its own) and, if `frozen`, stop updating them."""
        if stats is not None:
            rms = self.rms
            rms.mean, rms.var, rms.count = stats["mean"].copy(), stats["var"].copy(), stats["count"]
        self.update_running_mean = not frozen
