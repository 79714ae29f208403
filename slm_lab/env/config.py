"""The `env` section of a spec, torch-free: the keys SLM Lab reads; every other key is the env's
own argument, passed to `gymnasium.make`."""

from dataclasses import dataclass
from typing import Any, Literal

from slm_lab.lib.config import UNSET, Config, SpecError, Unset, key

V5_CLIP = 10.0  # SLM Lab v5 clips what it normalizes (observations, rewards) to [-10, 10]


@dataclass(frozen=True)
class EnvConfig(Config):
    EXTRA = "kwargs"
    DEPRECATED = {"frame_op": None, "frame_op_len": None}

    name: str = key(
        doc="a Gymnasium env id, ALE/<Game>-v5 or playground/<Name> (MuJoCo Playground, `uv sync --group playground`); `module:EnvId` imports `module` (your package) first",
        required=True,
    )
    max_frame: int = key(
        doc="frames to train, over all envs together (e.g. 2e5)", required=True, gt=0
    )
    num_envs: int = key(1, "copies of the env stepped together as one vector env", gt=0)
    max_t: int | None = key(None, "episode step limit (null: the env's own)", gt=0)
    normalize_obs: bool = key(False, "normalize observations by running mean and std")
    normalize_reward: bool = key(
        False, "scale rewards by the running std of the discounted return (gamma of the agent)"
    )
    clip_obs: float | None | Unset = key(
        UNSET,
        "clip the (normalized) observations to [-c, c]; not set: 10 with normalize_obs (as SLM "
        "Lab v5), else off; null: off",
        gt=0,
    )
    clip_reward: float | list[float] | bool | None | Unset = key(
        UNSET,
        "clip the rewards the agent learns from, after normalize_reward: c for [-c, c], or "
        "[lo, hi]; not set: 10 with normalize_reward (as SLM Lab v5), else off; null or false: "
        "off; Atari: [-1, 1] unless false",
    )
    reward_scale: float | None = key(None, "multiply the rewards the agent learns from", gt=0)
    action_repeat: int = key(1, "repeat each action this many env steps, summing rewards", gt=0)
    life_loss_info: bool = key(
        False, "Atari: a lost life is a terminal for training (the game and its score go on)"
    )
    vectorization_mode: Literal["auto", "sync", "async"] = key(
        "auto",
        "sync: the envs step in the session's process; async: one process each; auto: async "
        "only where its estimate beats sync 1.5x (a pipe round trip per env and step, against "
        "steps in parallel on the session's free cores; one env's step is timed as the env is "
        "built, the median of 64 steps); the session's log says which",
    )
    kwargs: dict[str, Any] = key({}, "every other key of `env`: the env's own arguments")

    def check(self, path: str) -> None:
        clip = self.clip_reward
        if clip is True or (isinstance(clip, list) and len(clip) != 2):
            raise SpecError(f"{path}.clip_reward: expected c, [lo, hi] or false, got {clip!r}")

    @property
    def obs_clip(self) -> float | None:
        """The bound the observations are clipped to, or None when they are not."""
        if self.clip_obs is UNSET:
            return V5_CLIP if self.normalize_obs else None
        return self.clip_obs

    @property
    def reward_clip(self) -> tuple[float, float] | None:
        """(lo, hi) the rewards are clipped to, or None when they are not."""
        clip = self.clip_reward
        if clip is UNSET:
            return (-V5_CLIP, V5_CLIP) if self.normalize_reward else None
        if clip is None or clip is False:
            return None
        return (clip[0], clip[1]) if isinstance(clip, list) else (-clip, clip)
