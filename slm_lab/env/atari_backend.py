"""Atari (ALE v5) as a backend: ale-py's native vector env, `ALE/<Game>-v5` ids.

ale-py's `AtariVectorEnv` steps every env in its own threads and preprocesses as DQN did: frameskip
4 with the last two frames max-pooled, grey 84x84 frames stacked 4 (uint8, newest last; zeros
before the first frame of a game), up to 30 no-op actions after a reset, FIRE after a reset in
the games that need it, sticky actions 0.25 (ALE v5's default).

Episodes are games. The env's rewards reach the episode statistics unclipped, so `total_reward`
and the episodes CSV hold the full-game score (every life's points); training sees them clipped
to [-1, 1] unless the spec sets `clip_reward` (false: unclipped). With `life_loss_info: true` a
lost life is also a terminal for training only: the transition that lost it is `terminated`
(memory, returns and advantages stop there) while the game, its stack of frames and its score
go on. Lives are compared step to step here rather than taken from ALE's own `life_loss_info`,
whose final observations at a life loss were stale; at a game over ALE already reports the new
game's lives, so a game over is never counted as a life loss too.

The spec's `env` keys that are not SLM Lab's go to ale-py: `repeat_action_probability`,
`frameskip`, `noop_max`, `use_fire_reset`, `full_action_space`, `continuous` (a Box of radius,
angle and fire), `continuous_action_threshold`, `num_threads` (ALE's threads per session; by
default one per core free to the session, at most num_envs; 0: ALE's own, one per core), `img_height`/`img_width`, `stack_num`, `maxpool`, `max_num_frames_per_episode` (`max_t` sets it
in agent steps x frameskip; ALE's count includes a reset's no-ops and FIRE, so a native game may
be cut a few steps before max_t), and
`obs_type`: `grayscale` (the default) or `rgb` (84x84x3 frames). `obs_type: ram` (the 128 bytes
of the console's memory, no frame stack) and rendering (a window, or the frames of a recorded
video: both need the single env's renderer) take a Gymnasium vector env of single `AtariEnv`s
instead: the single env runs at frameskip 1 under Gymnasium's `AtariPreprocessing` and
`FrameStackObservation`, which give the native env's observation layout.

The emulators' state lives in native objects that cannot be saved: a resume restores everything
else and restarts the games in progress (the session says so).
"""

import dataclasses
import functools
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import vector as vw

from slm_lab.env import render
from slm_lab.env.config import EnvConfig
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.lib.config import UNSET, SpecError, did_you_mean
from slm_lab.lib.util import counted

REWARD_CLIP = (-1.0, 1.0)  # the training rewards' default range, as DQN's and ALE v5's
# ale-py's native vector env options a spec may set (ALE's own reward clipping, episodic life
# and life_loss_info are SLM Lab's clip_reward and life_loss_info instead)
NATIVE_KEYS = {
    "repeat_action_probability",
    "frameskip",
    "noop_max",
    "use_fire_reset",
    "full_action_space",
    "continuous",
    "continuous_action_threshold",
    "num_threads",
    "thread_affinity_offset",
    "img_height",
    "img_width",
    "stack_num",
    "maxpool",
    "max_num_frames_per_episode",
    "obs_type",
}
# what the single-env path (ram, render) takes: AtariEnv's arguments and AtariPreprocessing's
SINGLE_ENV_KEYS = {
    "repeat_action_probability",
    "full_action_space",
    "continuous",
    "continuous_action_threshold",
    "max_num_frames_per_episode",
    "mode",
    "difficulty",
}
OWN_KEYS = {  # ALE options SLM Lab sets itself, with what to use instead
    "reward_clipping": "clip_reward (false: unclipped)",
    "episodic_life": "life_loss_info",
    "life_loss_info": "life_loss_info (SLM Lab's key, not ale-py's)",
    "autoreset_mode": None,
    "batch_size": None,
    "render_mode": None,
}
# the console's frames per second (NTSC), the real-time rate of a video (ALE's metadata has 30)
ATARI_FPS = 60
ALE_SEEDS = 2**31  # ALE's seeds are int32: an env's seed + i stays below this
OBS_TYPES = ("grayscale", "rgb", "ram")
FRAME_KEYS = {"img_height", "img_width", "stack_num", "maxpool"}  # options of frames, not of RAM


@functools.cache
def _registered() -> None:
    """Register ale-py's ids with Gymnasium (once; importing ale-py loads the emulator)."""
    import ale_py

    gym.register_envs(ale_py)


def _check(config: EnvConfig) -> None:
    """SpecError for what ALE or SLM Lab would refuse later, or silently ignore."""
    _registered()
    try:
        gym.spec(config.name)
    except gym.error.Error:
        games = [k for k in gym.registry if k.startswith("ALE/") and k.endswith("-v5")]
        raise SpecError(
            f"env.name: {config.name!r} is not an ALE v5 game{did_you_mean(config.name, games)}"
        ) from None
    for key in config.kwargs:
        if key in OWN_KEYS:
            use = OWN_KEYS[key]
            raise SpecError(
                f"env.{key}: SLM Lab sets this ALE option itself"
                + (f"; use env.{use}" if use else "")
            )
        if key not in NATIVE_KEYS | SINGLE_ENV_KEYS:
            known = sorted(NATIVE_KEYS | SINGLE_ENV_KEYS | set(EnvConfig.keys()))
            raise SpecError(
                f"env.{key}: unknown key (not an SLM Lab env key, nor an option of ALE v5){did_you_mean(key, known)}"
            )
    obs_type = config.kwargs.get("obs_type", "grayscale")
    if obs_type not in OBS_TYPES:
        raise SpecError(f"env.obs_type: expected one of {', '.join(OBS_TYPES)}, got {obs_type!r}")
    if obs_type == "ram" and (frame_keys := sorted(FRAME_KEYS & set(config.kwargs))):
        raise SpecError(
            f"env.{frame_keys[0]}: an option of the frames; obs_type ram gives the console's "
            "128 bytes of RAM instead"
        )
    if config.action_repeat > 1:
        raise SpecError(
            "env.action_repeat: ALE repeats actions itself; set env.frameskip instead (4 by default)"
        )
    if config.normalize_obs or config.obs_clip is not None:
        key = "normalize_obs" if config.normalize_obs else "clip_obs"
        raise SpecError(
            f"env.{key}: Atari frames are uint8 pixels, scaled by the net (agent.net.normalize: "
            "true), not normalized by the env"
        )


def _native_kwargs(config: EnvConfig) -> dict[str, Any]:
    kwargs = {k: v for k, v in config.kwargs.items() if k != "obs_type"}
    if config.kwargs.get("obs_type") == "rgb":
        kwargs["grayscale"] = False
    if config.max_t is not None:
        kwargs["max_num_frames_per_episode"] = config.max_t * kwargs.get("frameskip", 4)
    return {**kwargs, "reward_clipping": False, "episodic_life": False, "life_loss_info": False}


def _single_env(config: EnvConfig, render_mode: str | None) -> gym.Env:
    """One ALE env as the native vector env gives it (frames) or its RAM, for render and ram;
    render_mode "rgb_array" records the screen after each reset and step (FrameRecorder)."""
    env = _single_game(config, render_mode)
    # max_t counts the agent's steps, as the native env's does (ALE's own frame limit would also
    # count the no-ops and FIRE of a reset)
    if config.max_t is not None:
        env = gym.wrappers.TimeLimit(env, config.max_t)
    if render_mode == render.RENDER_MODE:
        env = render.FrameRecorder(env, config.kwargs.get("frameskip", 4), ATARI_FPS)
    return env


def _single_game(config: EnvConfig, render_mode: str | None) -> gym.Env:
    """The game of `_single_env`, before its time limit and FrameRecorder."""
    import ale_py

    # errors only: a single AtariEnv prints ALE's banner unless a native env has silenced it
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    kw = config.kwargs
    base = {k: v for k, v in kw.items() if k in SINGLE_ENV_KEYS}
    frameskip = kw.get("frameskip", 4)
    obs_type = kw.get("obs_type", "grayscale")
    if obs_type == "ram":
        env = gym.make(
            config.name, obs_type="ram", frameskip=frameskip, render_mode=render_mode, **base
        )
        env = NoopReset(env, kw.get("noop_max", 30))
        return FireReset(env) if kw.get("use_fire_reset", True) else env
    env = gym.make(config.name, obs_type="rgb", frameskip=1, render_mode=render_mode, **base)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=kw.get("noop_max", 30),
        frame_skip=frameskip,
        screen_size=(kw.get("img_width", 84), kw.get("img_height", 84)),
        grayscale_obs=obs_type == "grayscale",
        grayscale_newaxis=False,
        scale_obs=False,
    )
    if kw.get("use_fire_reset", True):
        env = FireReset(env)
    return gym.wrappers.FrameStackObservation(env, kw.get("stack_num", 4), padding_type="zero")


class NoopReset(gym.Wrapper):
    """Up to `noop_max` no-op actions after a reset, their number drawn uniformly (as
    AtariPreprocessing does for frames; this is for the RAM observations it does not take)."""

    def __init__(self, env: gym.Env, noop_max: int) -> None:
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.np_random.integers(0, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE after a reset in the games that wait for it (as ale-py's native env does)."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        meanings = self.env.unwrapped.get_action_meanings()
        if "FIRE" in meanings:
            obs, _, terminated, truncated, info = self.env.step(meanings.index("FIRE"))
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def _single_envs(config: EnvConfig, render_mode: str | None) -> bool:
    """Whether the games run as single AtariEnvs in a Gymnasium vector env (RAM, rendering)."""
    return render_mode is not None or config.kwargs.get("obs_type") == "ram"


def _vector(config: EnvConfig, num_envs: int, render_mode: str | None) -> gym.vector.VectorEnv:
    _check(config)
    if _single_envs(config, render_mode):
        make = functools.partial(_single_env, config, render_mode)
        vec = SyncVectorEnv([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        vec = gym.make_vec(
            config.name,
            num_envs,
            vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP,
            **_native_kwargs(config),
        )
    if isinstance(vec.single_action_space, gym.spaces.Box):  # continuous: the agent's [-1, 1]
        with warnings.catch_warnings():  # ALE's float64 bounds cast to float32: harmless
            warnings.simplefilter("ignore", UserWarning)
            vec = vw.RescaleAction(vec, -1.0, 1.0)
        # out-of-range samples clipped to the agent's [-1, 1] first, as the Gymnasium backend
        # does (a radius below 0 would turn the stick around), in ALE's float32
        vec = vw.TransformAction(vec, _agent_action, vec.action_space)
    return vec


def _agent_action(actions: np.ndarray) -> np.ndarray:
    return np.clip(actions, -1.0, 1.0).astype(np.float32)


def spaces(config: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """(observation space, action space) of an ALE v5 env as a spec configures it."""
    try:
        vec = _vector(config, 1, render_mode=None)
    except TypeError as err:  # an option of the single env only (mode, difficulty)
        raise SpecError(f"env: {config.name}: {err}") from None
    try:
        return vec.single_observation_space, vec.unwrapped.single_action_space
    finally:
        vec.close()


class AtariVecEnv(GymVecEnv):
    """`num_envs` ALE games stepped together (an EnvBackend); see the module docstring."""

    def __init__(self, config: EnvConfig, *args: Any, **kwargs: Any) -> None:
        self.life_loss_info = config.life_loss_info
        self._lives: np.ndarray | None = None
        super().__init__(config, *args, **kwargs)

    def _vector_env(
        self, config: EnvConfig, render_mode: str | None, seq_len: int | None, cpus: int
    ) -> tuple[gym.vector.VectorEnv, str]:
        if seq_len:
            raise SpecError(
                "agent.net: a RecurrentNet on Atari frames is not supported; the frames come "
                "stacked (env.stack_num): use a ConvNet"
            )
        single = _single_envs(config, render_mode)
        if not single and "num_threads" not in config.kwargs:
            # ALE's own default (0) is a thread per core in every session: one per free core
            threads = max(1, min(config.num_envs, cpus))
            config = dataclasses.replace(config, kwargs={**config.kwargs, "num_threads": threads})
        how = (
            "sync (single ALE envs)"
            if single
            else f"ale-py's native vector env ({counted(config.kwargs['num_threads'], 'thread')})"
        )
        return _vector(config, config.num_envs, render_mode), how

    def _reward_clip(self, config: EnvConfig) -> tuple[float, float] | None:
        # not set or null: ALE's [-1, 1], whatever normalize_reward (false turns it off)
        clip = config.clip_reward
        return REWARD_CLIP if clip is UNSET or clip is None else config.reward_clip

    @staticmethod
    def frame_stack(observation_space: gym.Space) -> int:
        """The native env's stack_num frames (newest last); 1 for the RAM."""
        return 1 if len(observation_space.shape) == 1 else observation_space.shape[0]

    def _env_seed(self, seed: int) -> int:
        return seed % (ALE_SEEDS - self.info.num_envs)  # ALE takes int32 seeds

    def _started(self, info: dict[str, Any]) -> None:
        self._lives = np.array(info["lives"])

    def _terminals(
        self, terminateds: np.ndarray, dones: np.ndarray, info: dict[str, Any]
    ) -> np.ndarray:
        lives = np.asarray(info["lives"])
        lost = (lives < self._lives) & ~dones  # a game over shows the next game's lives
        self._lives = lives.copy()
        return terminateds | lost if self.life_loss_info else terminateds


make = AtariVecEnv  # the backend module's constructor (see slm_lab.env.backend.BackendModule)
frame_stack = AtariVecEnv.frame_stack
