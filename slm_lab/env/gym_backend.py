"""Gymnasium's vector envs as a backend: sync or async vector env of `gym.make` envs + wrappers.

Autoreset runs in SAME_STEP mode: when a sub-env ends an episode, its reset observation comes back
in the same step and the true final observation in `info["final_obs"]`. So every transition the
env returns is real (none of NEXT_STEP's fake reset transitions), and `step` hands the agent the
real next observation of each env, which a truncated episode bootstraps from.
"""

import importlib
import re
import sys
import warnings
from collections import deque
from functools import cache, partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import vector as vw

from slm_lab.env import render, vectorization
from slm_lab.env import state as env_state
from slm_lab.env.backend import EnvInfo, FinishedEpisodes, agent_obs_dtype
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.spaces import agent_observation_space, is_bounded, wrap_spaces
from slm_lab.env.transition import Transition
from slm_lab.env.wrappers import ActionRepeat, ObsNormalizer
from slm_lab.lib.config import SpecError, did_you_mean
from slm_lab.lib.logger import logger

EPISODE_STATS_WINDOW = 100  # total_reward is the mean return of up to this many recent episodes


def _import_env_module(name: str) -> str:
    """For a `module:EnvId` name, import the module (it registers the env); returns the id."""
    if ":" not in name:
        return name
    module, env_id = name.split(":", 1)
    try:
        importlib.import_module(module)
    except Exception as e:  # the user's own module: any error it raises on import
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise SpecError(
            f"env.name: {name!r}: importing {module!r} failed ({type(e).__name__}: {reason}); is it on PYTHONPATH?"
        ) from None
    return env_id


def _uses_mujoco(name: str) -> bool:
    """Gymnasium's MuJoCo envs, and any env once something has imported mujoco (a user's
    `module:EnvId` included: its module is imported first)."""
    entry_point = gym.spec(_import_env_module(name)).entry_point
    return "mujoco" in sys.modules or str(entry_point).startswith("gymnasium.envs.mujoco")


_mujoco_warned: set[str] = set()  # the MuJoCo warning texts this process has logged


def _mujoco_warning(text: str) -> None:
    if text not in _mujoco_warned:
        _mujoco_warned.add(text)
        logger.warning(f"MuJoCo: {text}")


@cache
def route_mujoco_warnings() -> None:
    """MuJoCo's warnings (a deprecated model attribute, an unstable simulation) go to this
    process's log, each text once, instead of MuJoCo's default: a line on stdout and a
    MUJOCO_LOG.TXT in the working directory at every occurrence."""
    import mujoco

    mujoco.set_mju_user_warning(_mujoco_warning)


def _make(name: str, **kwargs: Any) -> gym.Env:
    """gym.make, with MuJoCo's warnings routed to the log first where the env may load MuJoCo."""
    if _uses_mujoco(name):
        route_mujoco_warnings()
    return gym.make(name, **kwargs)


def spaces(config: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """(observation space as the agent sees it, action space) of the env a spec names."""
    env_id = _import_env_module(config.name)
    try:
        gym.spec(env_id)
    except gym.error.Error:
        module = config.name[: -len(env_id)]  # `module:` of a user's own env, or ""
        # ale-py registers its legacy ids (Pooyan-v0, ...) too, which SLM Lab refuses: not suggested
        known = [module + k for k, v in gym.registry.items() if "ale_py" not in str(v.entry_point)]
        raise SpecError(
            f"env.name: {config.name!r} is not a Gymnasium env id{did_you_mean(config.name, known)}"
        ) from None
    if config.life_loss_info:  # after the id: a mistyped id is the mistake to name first
        raise SpecError(
            f"env.life_loss_info: {config.name} is not an Atari game (ALE/<Game>-v5); only "
            "Atari envs have lives"
        )
    try:
        e = _make(config.name, **config.kwargs)
    except TypeError as err:
        bad = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        key = bad.group(1) if bad else next(iter(config.kwargs), "?")
        raise SpecError(
            f"env.{key}: unknown key (not an SLM Lab env key, nor an argument of {config.name}){did_you_mean(key, EnvConfig.keys())}"
        ) from None
    except gym.error.Error as err:
        raise SpecError(f"env.name: {config.name!r} cannot be made: {err}") from None
    except ImportError as err:  # an optional package the env needs (jax, shimmy, ...)
        raise SpecError(
            f"env.name: {config.name!r} needs a package that is not installed: {err}"
        ) from None
    try:
        obs_space = agent_observation_space(e.observation_space)
    except ValueError as err:
        raise SpecError(f"env.name: {config.name}: {err}") from None
    finally:
        e.close()
    return obs_space, e.action_space


def _make_one(
    name: str,
    max_t: int | None,
    kwargs: dict[str, Any],
    action_repeat: int,
    render_mode: str | None,
    seq_len: int | None = None,
) -> gym.Env:
    """One env with SLM Lab's wrappers; render_mode "rgb_array" adds a FrameRecorder around
    them all (its frames: `GymVecEnv.frames`)."""
    if render_mode is not None:  # only when asked: not every env takes a render_mode argument
        kwargs = {**kwargs, "render_mode": render_mode}
    env = _make(name, max_episode_steps=max_t, **kwargs)
    if render_mode == render.RENDER_MODE:
        render.headless()
    if action_repeat > 1:
        env = ActionRepeat(env, action_repeat)
    env = wrap_spaces(env)
    if isinstance(env.action_space, gym.spaces.Box) and is_bounded(env.action_space):
        # the agent acts in [-1, 1]; out-of-range samples are clipped, then rescaled to the env's bounds
        with warnings.catch_warnings():  # float64 bounds cast to float32: harmless
            warnings.simplefilter("ignore", UserWarning)
            rescaled = gym.wrappers.RescaleAction(env, -1.0, 1.0)
            env = gym.wrappers.ClipAction(rescaled)
        # ClipAction advertises (-inf, inf), which Random would sample from; the agent's space is [-1, 1]
        env.action_space = rescaled.action_space
    if seq_len:
        # a RecurrentNet reads the last seq_len observations, oldest first, zero-padded after a
        # reset; stacking per sub-env makes the final obs of an autoreset stacked too
        env = gym.wrappers.FrameStackObservation(env, stack_size=seq_len, padding_type="zero")
    if render_mode == render.RENDER_MODE:
        env = render.FrameRecorder(env, action_repeat)
    return env


class GymVecEnv:
    """`num_envs` copies of a Gymnasium env stepped together (an EnvBackend).

    `seq_len` stacks each env's last seq_len observations into one of shape (seq_len, *obs_shape)
    (for a RecurrentNet). The obs normalizer then keeps statistics per position and feature of
    the stacked shape, zero padding included.

    `render_mode`: None, "human" (a window) or "rgb_array" (one sync env whose frames `frames`
    returns, for a video).
    """

    def __init__(
        self,
        config: EnvConfig,
        seed: int,
        clock: Clock,
        gamma: float,
        render_mode: str | None = None,
        seq_len: int | None = None,
        cpus: int | None = None,
        device: str = "cpu",
    ) -> None:
        """`gamma`: the agent's discount, which reward normalization's return uses; `cpus`: the
        cores this session's envs may use (what `vectorization_mode: auto` weighs; None: the
        machine's free cores); `device`: the agent's (Gymnasium's envs step on the CPU, whatever
        it is)."""
        self.name = config.name
        self.seed = seed
        self.clock = clock
        vec, self.vectorization = self._vector_env(
            config, render_mode, seq_len, vectorization.session_cpus(1) if cpus is None else cpus
        )
        mode = vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode != AutoresetMode.SAME_STEP:
            vec.close()
            raise SpecError(
                f"env: {self.name} is a vector env in {AutoresetMode(mode).value} autoreset mode; "
                "SLM Lab steps vector envs in SameStep mode only (a reset's first observation in "
                "the step that ended the episode; NextStep would pair the last observation of an "
                "episode with the first of the next): build it with autoreset_mode=SAME_STEP"
            )
        # episode statistics first: returns are measured before any reward transform
        self.reward_norm: vw.NormalizeReward | None = None
        vec = self.stats = vw.RecordEpisodeStatistics(vec, buffer_length=EPISODE_STATS_WINDOW)
        if config.reward_scale not in (None, 1.0):
            scale = config.reward_scale
            vec = vw.TransformReward(vec, lambda r: r * scale)
        if config.normalize_reward:
            vec = self.reward_norm = vw.NormalizeReward(vec, gamma=gamma)
        if (clip := self._reward_clip(config)) is not None:
            lo, hi = clip
            # one np.clip per step: Gymnasium's vector ClipReward clips env by env in Python
            vec = vw.TransformReward(vec, lambda r: np.clip(r, lo, hi))
        self.vec = vec
        observation_space = vec.single_observation_space
        self.obs_norm = ObsNormalizer(
            observation_space.shape, config.normalize_obs, config.obs_clip
        )
        float_obs = self.obs_norm.rms is not None or self.obs_norm.clip is not None
        self.vec.action_space.seed(seed)
        self.info = EnvInfo(
            observation_space,
            vec.single_action_space,
            config.num_envs,
            agent_obs_dtype(observation_space, float_obs),
            self.vec.action_space.sample,
            self.frame_stack(observation_space),
        )
        self._obs: np.ndarray | None = None
        self._finished: list[FinishedEpisodes] | None = None  # kept after `record_episodes`

    # -- what a family changes (slm_lab.env.atari_backend) --------------------------------------
    def _vector_env(
        self, config: EnvConfig, render_mode: str | None, seq_len: int | None, cpus: int
    ) -> tuple[gym.vector.VectorEnv, str]:
        """The vector env, before the statistics and reward wrappers, and how it steps (a line
        for the session's log)."""
        if render_mode == render.RENDER_MODE:
            render.check_renders(_import_env_module(self.name))
        make_env = partial(
            _make_one,
            self.name,
            config.max_t,
            config.kwargs,
            config.action_repeat,
            render_mode,
            seq_len,
        )
        mode, why = vectorization.choose(
            config.vectorization_mode, make_env, config.num_envs, cpus, render_mode is not None
        )
        vec_cls = AsyncVectorEnv if mode == "async" else SyncVectorEnv
        vec = vec_cls([make_env] * config.num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        return vec, f"{mode} ({why})"

    def _reward_clip(self, config: EnvConfig) -> tuple[float, float] | None:
        return config.reward_clip

    @staticmethod
    def frame_stack(observation_space: gym.Space) -> int:
        """EnvInfo.frame_stack of an env with this observation space: 1, one frame."""
        return 1

    def _env_seed(self, seed: int) -> int:
        """The seed the vector env takes (its sub-envs get seed + i)."""
        return seed

    def _started(self, info: dict[str, Any]) -> None:
        """After a reset of every env, with the reset's info."""

    def _terminals(
        self, terminateds: np.ndarray, dones: np.ndarray, info: dict[str, Any]
    ) -> np.ndarray:
        """The terminals training sees (the env's own episode ends; Atari adds life losses)."""
        return terminateds

    # -- the EnvBackend interface ------------------------------------------------------------
    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start every sub-env's episode. `seed` reseeds the sub-envs (seed + i) and the action
        space; by default the sub-envs take the env's own seed and the action space goes on."""
        if seed is not None:
            self.vec.action_space.seed(seed)
        obs, info = self.vec.reset(seed=self._env_seed(self.seed if seed is None else seed))
        self._started(info)
        self._obs = self.obs_norm(obs)
        return self._obs

    def step(self, actions: np.ndarray) -> Transition:
        acted_on = self._obs
        obs, rewards, terminateds, truncateds, info = self.vec.step(actions)
        dones = terminateds | truncateds
        num_done = int(dones.sum())
        next_obs = self.obs_norm(obs)
        real_next_obs = next_obs
        if num_done:
            # Gymnasium's vector envs mark the final obs; ALE's native one gives them for all envs
            mask = info.get("_final_obs", dones)
            final = np.array(obs, copy=True)
            final[mask] = np.stack(info["final_obs"][mask])
            real_next_obs = next_obs.copy()
            real_next_obs[mask] = self.obs_norm(final[mask], update=False)
        self.clock.tick(num_done)
        if num_done and self._finished is not None:
            stats = info["episode"]  # RecordEpisodeStatistics': this step's finished episodes
            self._finished.append(
                FinishedEpisodes(
                    self.clock.frame,
                    self.clock.epi - num_done,
                    stats["r"][dones],
                    stats["l"][dones],
                    np.flatnonzero(dones),
                )
            )
        self._obs = next_obs
        return Transition(
            acted_on,
            actions,
            rewards.astype(np.float32),
            real_next_obs,
            self._terminals(terminateds, dones, info),
            truncateds,
        )

    def record_episodes(self) -> None:
        self._finished = []

    def pop_episodes(self) -> list[FinishedEpisodes]:
        finished, self._finished = self._finished, []
        return finished

    @property
    def obs(self) -> np.ndarray:
        return self._obs

    def frames(self) -> list[np.ndarray]:
        """The frames the first env rendered since the last call (render_mode "rgb_array")."""
        return self._frame_recorder().pop()

    @property
    def frame_rate(self) -> float:
        """The frames per second of real time that `frames` show."""
        return self._frame_recorder().fps

    def _frame_recorder(self) -> render.FrameRecorder:
        return self.vec.unwrapped.envs[0]  # a sync vector env of FrameRecorder-wrapped envs

    @property
    def total_reward(self) -> float:
        queue = self.stats.return_queue
        return float(np.mean(queue)) if queue else float("nan")

    def obs_stats(self) -> dict[str, Any] | None:
        return self.obs_norm.stats()

    def set_obs_stats(self, stats: dict[str, Any] | None, frozen: bool) -> None:
        self.obs_norm.set_stats(stats, frozen)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: normalizers, episode stats, sim state."""
        captured, complete = env_state.capture(self.vec)
        rms = self.obs_norm.rms
        return {
            "obs_rms": None if rms is None else env_state.capture(rms)[0],
            "vec": captured if complete else None,
            # when the simulation cannot be captured, only what outlives an episode is kept
            "episode_stats": None if complete else self._episode_stats(),
            "reward_rms": None
            if complete or self.reward_norm is None
            else env_state.capture(self.reward_norm.return_rms)[0],
            "obs": env_state.encode(self._obs),
            "action_space_rng": self.vec.action_space.np_random.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        if state["obs_rms"] is not None:
            env_state.restore(self.obs_norm.rms, state["obs_rms"])
        self.vec.action_space.np_random.bit_generator.state = state["action_space_rng"]
        if state["vec"] is not None:
            # reset builds the internal buffers, which the saved state then overwrites
            self.vec.reset(seed=self.seed)
            env_state.restore(self.vec, state["vec"])
            self._obs = env_state.decode(state["obs"])
            return True
        obs, info = self.vec.reset(seed=self._env_seed(self.seed + self.clock.frame))
        self._started(info)
        for name, (items, maxlen) in state["episode_stats"]["queues"].items():
            setattr(self.stats, name, deque(items, maxlen=maxlen))
        self.stats.episode_count = state["episode_stats"]["episode_count"]
        if state["reward_rms"] is not None:
            env_state.restore(self.reward_norm.return_rms, state["reward_rms"])
        self._obs = self.obs_norm(obs, update=False)
        return False

    def uncapturable(self) -> str | None:
        return env_state.uncapturable(self.vec)

    def _episode_stats(self) -> dict[str, Any]:
        """Finished-episode statistics (not the episodes in progress, which restart on resume)."""
        queues = {
            name: ([float(x) for x in getattr(self.stats, name)], getattr(self.stats, name).maxlen)
            for name in ("return_queue", "length_queue", "time_queue")
        }
        return {"queues": queues, "episode_count": int(self.stats.episode_count)}

    def close(self) -> None:
        self.vec.close()


def fetch_assets(config: EnvConfig) -> None:
    """Nothing to download: Gymnasium's and ALE's envs ship with their packages."""


make = GymVecEnv  # the backend module's constructor (see slm_lab.env.backend.BackendModule)
frame_stack = GymVecEnv.frame_stack
