"""Atari (ALE v5) as a backend: ale-py's native vector env, `ALE/<Game>-v5` ids.

ale-py's `AtariVectorEnv` steps every env in its own threads and preprocesses as DQN did: frameskip
4 with the last two frames max-pooled, grey 84x84 frames stacked 4 (uint8, newest last; zeros
before the first frame of a game), after a reset FIRE for a frame in the games that need it
then no-ops, fewer than 30 frames in all, sticky actions 0.25 (ALE v5's default).

Episodes are games. The env's rewards reach the episode statistics unclipped, so `total_reward`
and the episodes CSV hold the full-game score (every life's points); training sees them clipped
to [-1, 1] unless the spec sets `clip_reward` (false: unclipped). With `life_loss_info: true` a
lost life is also a terminal for training only: the transition that lost it is `terminated`
(memory, returns and advantages stop there) while the game, its stack of frames and its score
go on. Lives are compared step to step here rather than taken from ALE's own `life_loss_info`,
whose final observations at a life loss were stale. A game's end reports the next game's lives,
so its own last lives come from the step's `final_info` where they matter: a game over is a
terminal anyway, and a game cut by the time limit on the step it lost a life is a terminal for
training too (and still a truncated game). ALE's vector env resets a game in the step that
ends it and keeps no final lives, so SLM Lab counts the native env's steps itself (`TimeLimit`):
it ends a game at `max_t` steps, reads its lives, then resets that env alone.

The spec's `env` keys that are not SLM Lab's go to ale-py: `repeat_action_probability`,
`frameskip`, `noop_max`, `use_fire_reset`, `full_action_space`, `continuous` (a Box of radius,
angle and fire), `continuous_action_threshold`, `num_threads` (ALE's threads per session; by
default one per core free to the session, at most num_envs; 0: ALE's own, one per core),
`img_height`/`img_width`, `stack_num`, `maxpool`, `max_num_frames_per_episode` (a game's limit
in frames, ALE v5's 108000 by default: a game ends after that many frames / frameskip agent
steps, rounded up, or after `max_t` steps where the spec sets it; a reset's no-ops and FIRE do
not count), and
`obs_type`: `grayscale` (the default) or `rgb` (84x84x3 frames). `obs_type: ram` (the 128 bytes
of the console's memory, no frame stack) and rendering (a window, or the frames of a recorded
video: both need the single env's renderer) take a Gymnasium vector env of single `AtariEnv`s
instead, which play the native env's game: one emulator frame a step, reset as the native env
resets (FIRE for one frame, then no-ops counted in frames), frameskip frames an agent step
(under Gymnasium's `AtariPreprocessing` and `FrameStackObservation` for frames, which give the
native env's observation layout), the same time limit in agent steps.

The emulators' state lives in native objects that cannot be saved: a resume restores everything
else and restarts the games in progress (the session says so).
"""

import dataclasses
import functools
import math
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import vector as vw

from slm_lab.env import render
from slm_lab.env.config import EnvConfig
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.env.wrappers import ActionRepeat
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
ALE_MAX_FRAMES = 108_000  # ALE v5's limit of a game (30 minutes at 60 frames a second)
DEFAULT_FRAMESKIP = 4
DEFAULT_NOOP_MAX = 30  # ale-py's: a reset's frames of FIRE and no-ops are drawn below this
NOOP = 0  # ALE's no-op action, first in every action set
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


def _max_steps(config: EnvConfig) -> int:
    """A game's limit in agent steps: max_t, else max_num_frames_per_episode (ALE v5's 108000
    by default) in steps of frameskip frames."""
    if config.max_t is not None:
        return config.max_t
    frames = config.kwargs.get("max_num_frames_per_episode", ALE_MAX_FRAMES)
    return math.ceil(frames / config.kwargs.get("frameskip", DEFAULT_FRAMESKIP))


def _native_kwargs(config: EnvConfig) -> dict[str, Any]:
    kwargs = {k: v for k, v in config.kwargs.items() if k != "obs_type"}
    if config.kwargs.get("obs_type") == "rgb":
        kwargs["grayscale"] = False
    # ALE's own limit would end a game a step after TimeLimit does: never
    frameskip = kwargs.get("frameskip", DEFAULT_FRAMESKIP)
    kwargs["max_num_frames_per_episode"] = (_max_steps(config) + 1) * frameskip
    return {**kwargs, "reward_clipping": False, "episodic_life": False, "life_loss_info": False}


def _single_env(config: EnvConfig, render_mode: str | None) -> gym.Env:
    """One ALE env playing the native vector env's game, with its frames or its RAM, for render
    and ram; render_mode "rgb_array" records the screen after each reset and step
    (FrameRecorder)."""
    # the native env's limit in agent steps (ALE's own would count a reset's no-ops and FIRE)
    env = gym.wrappers.TimeLimit(_single_game(config, render_mode), _max_steps(config))
    if render_mode == render.RENDER_MODE:
        env = render.FrameRecorder(
            env, config.kwargs.get("frameskip", DEFAULT_FRAMESKIP), ATARI_FPS
        )
    return env


def _single_game(config: EnvConfig, render_mode: str | None) -> gym.Env:
    """The game of `_single_env`, before its time limit and FrameRecorder: an AtariEnv of one
    emulator frame a step, reset as the native env resets (`NativeReset`), and frameskip
    frames an agent step."""
    import ale_py

    # errors only: a single AtariEnv prints ALE's banner unless a native env has silenced it
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    kw = config.kwargs
    base = {k: v for k, v in kw.items() if k in SINGLE_ENV_KEYS}
    base["max_num_frames_per_episode"] = None  # the time limit is _single_env's
    frameskip = kw.get("frameskip", DEFAULT_FRAMESKIP)
    obs_type = kw.get("obs_type", "grayscale")
    env = gym.make(
        config.name,
        obs_type="ram" if obs_type == "ram" else "rgb",
        frameskip=1,
        render_mode=render_mode,
        **base,
    )
    env = NativeReset(env, kw.get("noop_max", DEFAULT_NOOP_MAX), kw.get("use_fire_reset", True))
    if obs_type == "ram":
        return ActionRepeat(env, frameskip)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=0,  # NativeReset's
        frame_skip=frameskip,
        screen_size=(kw.get("img_width", 84), kw.get("img_height", 84)),
        grayscale_obs=obs_type == "grayscale",
        grayscale_newaxis=False,
        scale_obs=False,
    )
    return gym.wrappers.FrameStackObservation(env, kw.get("stack_num", 4), padding_type="zero")


class NativeReset(gym.Wrapper):
    """A reset of an AtariEnv of one frame a step as ale-py's native vector env makes it: FIRE
    for one frame in the games that have it (`fire`), then no-ops, one frame each, for as many
    frames in all as drawn uniformly from [0, noop_max) (FIRE counts as one); a game over
    among them restarts the game (without FIRE)."""

    def __init__(self, env: gym.Env, noop_max: int, fire: bool) -> None:
        super().__init__(env)
        self.noop_max = noop_max
        meanings = env.unwrapped.get_action_meanings()
        self.fire = meanings.index("FIRE") if fire and "FIRE" in meanings else None

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        frames = int(self.np_random.integers(0, max(self.noop_max, 1)))
        if self.fire is not None:
            obs, _, _, _, info = self.env.step(self.fire)
            frames -= 1
        for _ in range(frames):
            obs, _, terminated, _, info = self.env.step(NOOP)
            if terminated:
                obs, info = self.env.reset()
        return obs, info


class TimeLimit(gym.vector.VectorWrapper):
    """Ends the native env's games at `max_steps` agent steps (truncated), then resets them
    on their own. ALE's own limit resets a game within the step that ends it, so its lives
    would be the next game's and a life lost on that step would go unseen; here the step's
    info keeps them, as Gymnasium's vector envs do: the final obs in `final_obs`, the lives
    in `final_info` (`lives`, and `_lives` where it holds a game's end)."""

    def __init__(self, env: gym.vector.VectorEnv, max_steps: int) -> None:
        super().__init__(env)
        self.max_steps = max_steps
        self.steps = np.zeros(env.num_envs, dtype=np.int64)  # each game's steps so far

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self.steps[:] = 0
        return self.env.reset(**kwargs)

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminateds, truncateds, info = self.env.step(actions)
        self.steps += 1
        ended = terminateds | truncateds  # ALE's game overs: already reset
        cut = (self.steps >= self.max_steps) & ~ended
        self.steps[ended | cut] = 0
        if cut.any():
            final_obs = info["final_obs"] if ended.any() else np.empty_like(obs)
            final_obs[cut] = obs[cut]
            info["final_obs"] = final_obs
            info["final_info"] = {"lives": info["lives"].copy(), "_lives": cut}
            reset_obs, reset_info = self.env.reset(options={"reset_mask": cut})
            obs[cut] = reset_obs[cut]
            for key, value in reset_info.items():
                info[key][cut] = value[cut]
            truncateds = truncateds | cut
        return obs, rewards, terminateds, truncateds, info


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
        vec = TimeLimit(vec, _max_steps(config))
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
        lives = np.asarray(info["lives"])  # at a game's end, the next game's
        final_lives = lives
        if "final_info" in info:  # a game cut by the time limit: its own last lives
            ended = info["final_info"]
            final_lives = np.where(ended["_lives"], ended["lives"], lives)
        lost = (final_lives < self._lives) & ~terminateds
        self._lives = lives.copy()
        return terminateds | lost if self.life_loss_info else terminateds


def fetch_assets(config: EnvConfig) -> None:
    """Nothing to download: Gymnasium's and ALE's envs ship with their packages."""


make = AtariVecEnv  # the backend module's constructor (see slm_lab.env.backend.BackendModule)
frame_stack = AtariVecEnv.frame_stack
