"""Observation and reward normalization clip at 10 by default, as SLM Lab v5: `clip_obs` and
`clip_reward` left out take 10 when their normalizer is on, an explicit null keeps the clip off,
a value is kept; rewards are normalized, then clipped. Atari keeps its own [-1, 1]."""

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_env

from slm_lab.env import atari_backend
from slm_lab.env.clock import Clock
from slm_lab.env.config import V5_CLIP, EnvConfig
from slm_lab.lib.config import UNSET, SpecError, parse

SPIKE_ENV_ID = "SlmLabTestSpike-v0"
SPIKE_STEPS = 200  # an episode: zeros, then one spike
SPIKE = 1000.0


class SpikeEnv(gym.Env):
    """Observation and reward 0 for SPIKE_STEPS - 1 steps, then SPIKE, then one more step to
    end the episode: normalized by running statistics, the spike is about sqrt(SPIKE_STEPS) =
    14 std out."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        value = SPIKE if self.t == SPIKE_STEPS else 0.0
        return np.full(1, value, dtype=np.float32), value, self.t > SPIKE_STEPS, False, {}


if SPIKE_ENV_ID not in gym.registry:
    gym.register(SPIKE_ENV_ID, entry_point=SpikeEnv)


def config(**keys: Any) -> EnvConfig:
    return parse(EnvConfig, {"name": "CartPole-v1", "max_frame": 100, **keys}, "env")


@pytest.mark.parametrize(
    ("keys", "obs_clip", "reward_clip"),
    [
        ({}, None, None),
        ({"normalize_obs": True}, V5_CLIP, None),
        ({"normalize_reward": True}, None, (-V5_CLIP, V5_CLIP)),
        ({"normalize_obs": True, "normalize_reward": True, "clip_obs": None}, None, (-10.0, 10.0)),
        ({"normalize_reward": True, "clip_reward": None}, None, None),
        ({"normalize_reward": True, "clip_reward": False}, None, None),
        ({"normalize_obs": True, "clip_obs": 5, "clip_reward": [-1, 2]}, 5.0, (-1.0, 2.0)),
        ({"clip_obs": 3, "clip_reward": 0.5}, 3.0, (-0.5, 0.5)),  # without normalizing too
    ],
)
def test_clip_defaults_follow_the_normalizers(
    keys: dict[str, Any], obs_clip: float | None, reward_clip: tuple[float, float] | None
) -> None:
    c = config(**keys)
    assert c.obs_clip == obs_clip and c.reward_clip == reward_clip


def test_left_out_and_null_clips_are_told_apart() -> None:
    assert config().clip_obs is UNSET and config().clip_reward is UNSET
    assert config(clip_obs=None, clip_reward=None).clip_obs is None
    with pytest.raises(SpecError, match=r"^env.clip_obs: expected float, got 'unset'$"):
        config(clip_obs="unset")  # the marker is not a value a spec can write


def spike_step(**keys: Any) -> tuple[float, float]:
    """(observation, reward) the agent gets on the spike of a one-env SpikeEnv."""
    env = make_env({"name": SPIKE_ENV_ID, "max_frame": 10**6, **keys})
    env.reset()
    for _ in range(SPIKE_STEPS - 1):
        env.step(np.zeros(1, dtype=np.int64))
    t = env.step(np.zeros(1, dtype=np.int64))
    env.close()
    return float(t.next_obs[0, 0]), float(t.rewards[0])


NORMALIZED = {"normalize_obs": True, "normalize_reward": True}


def test_normalized_spike_is_clipped_at_10_by_default() -> None:
    assert spike_step(**NORMALIZED) == (V5_CLIP, V5_CLIP)


def test_explicit_null_keeps_the_normalized_spike_unclipped() -> None:
    obs, reward = spike_step(**NORMALIZED, clip_obs=None, clip_reward=None)
    assert obs > 12 and reward > 12  # about sqrt(SPIKE_STEPS) std out


def test_rewards_are_normalized_then_clipped() -> None:
    """Clipped first, the spike would shrink to 5 and then be normalized to about 14."""
    assert spike_step(**NORMALIZED, clip_obs=5, clip_reward=5) == (5.0, 5.0)


def test_unnormalized_spike_is_not_clipped() -> None:
    assert spike_step() == (SPIKE, SPIKE)


# -- Atari: [-1, 1] unless clip_reward says otherwise; never observation normalization -------
def atari_config(**keys: Any) -> EnvConfig:
    return parse(EnvConfig, {"name": "ALE/Pong-v5", "max_frame": 100, **keys}, "env")


@pytest.fixture(scope="module")
def pong() -> Iterator[atari_backend.AtariVecEnv]:
    env = atari_backend.make(atari_config(), 0, Clock(100, 1), 0.99)
    yield env
    env.close()


@pytest.mark.atari
@pytest.mark.parametrize(
    ("keys", "clip"),
    [
        ({}, (-1.0, 1.0)),
        ({"normalize_reward": True}, (-1.0, 1.0)),  # not v5's 10: ALE's own clip
        ({"normalize_reward": True, "clip_reward": None}, (-1.0, 1.0)),
        ({"clip_reward": False}, None),
        ({"clip_reward": 2}, (-2.0, 2.0)),
    ],
)
def test_atari_keeps_its_reward_clip(
    pong: atari_backend.AtariVecEnv, keys: dict[str, Any], clip: tuple[float, float] | None
) -> None:
    assert pong._reward_clip(atari_config(**keys)) == clip


@pytest.mark.atari
@pytest.mark.parametrize(
    ("keys", "refused"),
    [({"normalize_obs": True}, "normalize_obs"), ({"clip_obs": 10}, "clip_obs")],
)
def test_atari_refuses_observation_normalization(keys: dict[str, Any], refused: str) -> None:
    with pytest.raises(SpecError, match=rf"^env.{refused}: Atari frames are uint8 pixels"):
        atari_backend.spaces(atari_config(**keys))


@pytest.mark.atari
def test_atari_takes_an_explicit_null_obs_clip() -> None:
    obs_space, _ = atari_backend.spaces(atari_config(clip_obs=None))
    assert obs_space.dtype == np.uint8
