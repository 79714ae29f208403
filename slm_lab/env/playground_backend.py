"""MuJoCo Playground (JAX) as a backend: `playground/<Name>` ids.

An env loads through Playground's registry with its default config and steps under the
package's own training wrappers (Brax's `VmapWrapper` and `EpisodeWrapper`, Playground's
`BraxAutoResetWrapper`), jitted once per env and shape: `num_envs` envs in one call, episodes
cut at `max_t` steps (default: the env's `episode_length`, 1000 for DM Control), each agent
action held for the env's official `action_repeat` (the package's DM Control PPO parameters;
a spec's `action_repeat` above 1 wins). The auto-reset wrapper replaces a finished episode's
last observation with the reset one; a small wrapper keeps it in the state's preserved info,
so `next_obs` is the true successor at time limits too. `terminated = done & ~truncation`;
episode returns are the env's own rewards (before `reward_scale` and clipping).

The simulation runs with Playground's `impl: jax` on the CPU and `impl: warp` on a CUDA
device (the session's placement), when JAX itself has a CUDA backend. Observations come back
as numpy views of JAX's CPU buffers (no copy). Dict observations give the agent their `state`
entry (the privileged state is the critic's business in Playground, not the policy's input).

Compiled steps are cached on disk (JAX's persistent compilation cache, in the user's cache
folder), so a second run of an env and shape skips the compile. The env state is a pytree of
arrays with its PRNG keys: `state_dict` saves it as numpy arrays, so a resume continues the
episodes in progress exactly.

A video (`render_mode="rgb_array"`, `enjoy --record`) shows env 0: its state after each reset
and step, drawn with MuJoCo's renderer on the host (`_Frames`); a step that ends its episode
gives the final state's frame, then the reset one's, as Gymnasium's same-step auto-reset does.
That compiles a program of its own, which hands env 0's pose to the host; training's is
unchanged. A window (`render_mode="human"`) is not available.

Locomotion and manipulation envs need MuJoCo Menagerie's robot assets, which Playground clones
from GitHub at their first load; where that cannot happen, the env fails in one line.
"""

import contextlib
import functools
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
import warnings
from collections import deque
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from slm_lab.env import render
from slm_lab.env import state as env_state
from slm_lab.env.backend import EnvInfo, FinishedEpisodes, agent_obs_dtype
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.transition import Transition
from slm_lab.env.wrappers import ObsNormalizer
from slm_lab.lib.config import SpecError, did_you_mean
from slm_lab.lib.logger import logger

if TYPE_CHECKING:  # JAX loads only with a Playground env
    import jax

PREFIX = "playground/"
TABLE_PATH = Path(__file__).with_name("_playground_envs.json")
INSTALL = "uv sync --group playground"
EPISODE_STATS_WINDOW = 100  # total_reward is the mean return of up to this many recent episodes
STATE_KEY = "state"  # the policy's entry of a dict observation
# Playground's auto-reset wrapper carries this info entry over a reset (its documented hook)
PRESERVED = "AutoResetWrapper_preserve_info"
# what a frame is drawn from: the arrays of the state's data that Playground's render_array sets
POSE = ("qpos", "qvel", "mocap_pos", "mocap_quat", "xfrc_applied")
FRAME_SIZE = (240, 320)  # (height, width) of a video's frames: Playground's own render default
# the env keys a Playground env takes besides SLM Lab's own
OWN_KEYS = {
    "full_reset": "reset a finished env to a fresh random state (Playground's full_reset) "
    "instead of the first state it started from (Brax's default, false)"
}
# Playground's own download of MuJoCo Menagerie, into the folder given (its default one)
FETCH_MENAGERIE = (
    "import sys; from etils import epath; from mujoco_playground._src import mjx_env; "
    "mjx_env.MENAGERIE_PATH = epath.Path(sys.argv[1]); mjx_env.ensure_menagerie_exists()"
)
# what a compile writes to the persistent cache: any compile longer than this (seconds)
MIN_CACHED_COMPILE_S = 0.5


def cache_dir() -> Path:
    """JAX's persistent compilation cache, in the user's cache folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "slm_lab" / "jax"


def env_name(config: EnvConfig) -> str:
    """Playground's name of the env: `playground/CartpoleBalance` -> `CartpoleBalance`."""
    return config.name[len(PREFIX) :]


@functools.cache
def _jax() -> Any:
    """Import JAX and Playground once, configured: Warp quiet, the compile cache on. SpecError
    naming the install command when the `playground` group is not installed."""
    try:
        import warp

        warp.config.quiet = True  # its banner and kernel-load lines would go to stdout
        import jax
        import mujoco_playground  # noqa: F401
    except ImportError as e:
        raise SpecError(
            f"env.name: playground/ envs need MuJoCo Playground ({e.name} is not installed); "
            f"install it with: {INSTALL}"
        ) from None
    jax.config.update("jax_compilation_cache_dir", str(cache_dir()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_CACHED_COMPILE_S)
    from slm_lab.env.gym_backend import route_mujoco_warnings

    route_mujoco_warnings()
    return jax


def installed() -> bool:
    """Whether the `playground` group is installed (nothing imported)."""
    return importlib.util.find_spec("mujoco_playground") is not None


@functools.cache
def table() -> dict[str, Any]:
    """The committed table of Playground's envs (`python -m slm_lab.env.playground_backend`
    writes it from the installed package): each env's spaces, or None for an env whose robot
    assets (MuJoCo Menagerie) only its load fetches. Validation reads it, so that a spec's check
    needs neither JAX nor the assets."""
    return json.loads(TABLE_PATH.read_text())


def _check_name(config: EnvConfig) -> str:
    """Playground's name of the env; SpecError for a name or key it does not take, or when the
    `playground` group is not installed."""
    if not installed():
        raise SpecError(
            f"env.name: {config.name} needs MuJoCo Playground, which is not installed; "
            f"install it with: {INSTALL}"
        )
    name = env_name(config)
    envs = table()["envs"]
    if name not in envs:
        raise SpecError(
            f"env.name: {config.name!r} is not a MuJoCo Playground env"
            f"{did_you_mean(name, list(envs))}"
        )
    for key in config.kwargs:
        if key not in OWN_KEYS:
            known = sorted(set(OWN_KEYS) | set(EnvConfig.keys()))
            raise SpecError(
                f"env.{key}: unknown key (not an SLM Lab env key, nor an option of a Playground env){did_you_mean(key, known)}"
            )
    if config.normalize_reward:
        raise SpecError(
            "env.normalize_reward: not available for Playground envs yet; scale them with "
            "env.reward_scale (Brax's reward_scaling)"
        )
    return name


def menagerie_path() -> Path:
    """Where Playground keeps MuJoCo Menagerie (its package folder; nothing imported)."""
    package = importlib.util.find_spec("mujoco_playground").submodule_search_locations[0]
    return Path(package) / "external_deps" / "mujoco_menagerie"


def menagerie_missing(name: str) -> bool:
    """Whether the env needs MuJoCo Menagerie's assets (locomotion and manipulation) and they
    are not here yet."""
    return table()["envs"][name] is None and not menagerie_path().exists()


def _offline(name: str) -> SpecError:
    return SpecError(
        f"env.name: playground/{name} needs MuJoCo Menagerie's robot assets, which are not "
        "here and could not be downloaded (git clone from github.com failed); Playground "
        "downloads them on first use where the network is reachable"
    )


def fetch_assets(config: EnvConfig) -> None:
    """Before a run's sessions start: download MuJoCo Menagerie where the env needs it and it
    is not here, with Playground's own code in a process of its own (this one stays JAX-free);
    SpecError in one line when that fails."""
    name = _check_name(config)
    if not menagerie_missing(name):
        return
    logger.info(f"{config.name}: downloading MuJoCo Menagerie (Playground's robot assets)")
    done = subprocess.run(
        [sys.executable, "-c", FETCH_MENAGERIE, str(menagerie_path())],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise _offline(name)


def _impl(device: str) -> str:
    """Playground's simulation implementation for the session's device: warp on CUDA (when
    JAX has a CUDA backend), jax on the CPU."""
    if not device.startswith("cuda"):
        return "jax"
    if _jax().default_backend() == "gpu":
        return "warp"
    logger.warning(
        "Playground: the session's device is CUDA but JAX has no CUDA backend (install "
        "jax[cuda12]); the envs step on the CPU with impl jax"
    )
    return "jax"


def _load(name: str, impl: str) -> Any:
    """The env from Playground's registry with its default config, on `impl`. Menagerie's
    download failing (offline) is one line; its progress output goes nowhere."""
    from mujoco_playground import registry

    config = registry.get_default_config(name)
    overrides = {"impl": impl} if "impl" in config else {}
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            return registry.load(name, config_overrides=overrides)
    except subprocess.CalledProcessError:
        raise _offline(name) from None


def official_action_repeat(name: str) -> int:
    """The env's action_repeat in the package's own DM Control PPO parameters (1 elsewhere)."""
    from mujoco_playground._src import dm_control_suite
    from mujoco_playground.config import dm_control_suite_params

    if name not in dm_control_suite.ALL_ENVS:
        return 1
    return int(dm_control_suite_params.brax_ppo_config(name).action_repeat)


def _obs_size(env: Any) -> int:
    size = env.observation_size
    if isinstance(size, dict):
        if STATE_KEY not in size:
            raise SpecError(
                f"env.name: its dict observation has no {STATE_KEY!r} entry ({', '.join(size)})"
            )
        size = size[STATE_KEY]
    return int(np.prod(size))


def _spaces_of(env: Any) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    return _box_spaces(_obs_size(env), int(env.action_size))


def _box_spaces(obs_size: int, action_size: int) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    obs = gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
    return obs, gym.spaces.Box(-1.0, 1.0, (action_size,), np.float32)


def spaces(config: EnvConfig) -> tuple[gym.Space, gym.Space] | None:
    """(observation space, action space) of a Playground env, from the table; an env that needs
    MuJoCo Menagerie's assets: None while they are not here (a check does not fetch them), else
    from the loaded env."""
    name = _check_name(config)
    entry = table()["envs"][name]
    if entry is not None:
        return _box_spaces(entry["obs"], entry["action"])
    if menagerie_missing(name):
        return None
    _jax()
    return _spaces_of(_load(name, "jax"))


def write_table() -> dict[str, Any]:
    """The table of the installed package's envs: DM Control's spaces (each env loaded),
    None for the envs that need MuJoCo Menagerie."""
    _jax()
    from mujoco_playground import registry
    from mujoco_playground._src import dm_control_suite

    envs: dict[str, Any] = {}
    for name in sorted(registry.ALL_ENVS):
        if name in dm_control_suite.ALL_ENVS:
            obs, action = _spaces_of(_load(name, "jax"))
            envs[name] = {"obs": int(obs.shape[0]), "action": int(action.shape[0])}
        else:
            envs[name] = None
    return {"playground": version("playground"), "envs": envs}


def frame_stack(observation_space: gym.Space) -> int:
    return 1


def _agent_obs(obs: Any) -> Any:
    return obs[STATE_KEY] if isinstance(obs, dict) else obs


def _pose(data: Any) -> dict[str, Any]:
    return {key: getattr(data, key) for key in POSE}


class _KeepFinalObs:
    """Between the episode wrapper and the auto-reset one: what a step ends with, before a
    finished episode is reset (its observation, truncation flag, return and length; with
    `pose`, what its frame is drawn from), goes into the state's preserved info, which a reset
    (full_reset's too) leaves as it is."""

    def __init__(self, env: Any, pose: bool) -> None:
        self.env = env
        self.pose = pose

    def reset(self, rng: "jax.Array") -> Any:
        return self._kept(self.env.reset(rng))

    def step(self, state: Any, action: "jax.Array") -> Any:
        return self._kept(self.env.step(state, action))

    def _kept(self, state: Any) -> Any:
        metrics = state.info["episode_metrics"]
        kept = {
            "final_obs": _agent_obs(state.obs),
            "truncation": state.info["truncation"],
            "sum_reward": metrics["sum_reward"],
            "length": metrics["length"],
        }
        if self.pose:
            kept["final_pose"] = _pose(state.data)
        state.info[PRESERVED] = kept
        return state

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


@functools.cache
def _program(
    name: str,
    impl: str,
    episode_length: int,
    action_repeat: int,
    full_reset: bool,
    pose: bool = False,
):
    """(env, jitted reset, jitted step) of an env, once per process; JAX compiles each for the
    shapes it is called with, and the persistent cache keeps them across processes. `pose`
    (a video's program): their outputs end with env 0's pose after the call and, at an episode's
    end, before its reset (`_pose`'s arrays)."""
    jax = _jax()
    from brax.envs.wrappers import training as brax_training
    from mujoco_playground import wrapper

    env = _load(name, impl)
    wrapped = brax_training.VmapWrapper(env)
    wrapped = brax_training.EpisodeWrapper(wrapped, episode_length, action_repeat)
    wrapped = wrapper.BraxAutoResetWrapper(_KeepFinalObs(wrapped, pose), full_reset=full_reset)

    def outputs(state: Any) -> tuple:
        """What a step hands the host, per env: the agent's next observation, the true
        successor, reward, done, truncation, and the episode's return and length so far."""
        kept = state.info[PRESERVED]
        out = (
            _agent_obs(state.obs),
            kept["final_obs"],
            state.reward,
            state.done,
            kept["truncation"],
            kept["sum_reward"],
            kept["length"],
        )
        if not pose:
            return out
        first = functools.partial(jax.tree.map, lambda x: x[0])
        return (*out, (first(_pose(state.data)), first(kept["final_pose"])))

    # The state crosses the jit boundary as a flat list of its arrays: flattening and
    # rebuilding MJX's nested dataclasses on every call cost the host more than a tenth of
    # CartpoleBalance's step at 512 envs. Its structure is captured while reset is traced
    # (a process always resets before it steps).
    structure: dict[str, Any] = {}

    def reset(keys: "jax.Array") -> tuple:
        state = _strong(jax, wrapped.reset(keys))
        leaves, structure["treedef"] = jax.tree.flatten(state)
        return leaves, outputs(state)

    def step(leaves: list, actions: "jax.Array") -> tuple:
        state = jax.tree.unflatten(structure["treedef"], leaves)
        state = _strong(jax, wrapped.step(state, actions))
        return jax.tree.leaves(state), outputs(state)

    return env, jax.jit(reset), jax.jit(step)


def _strong(jax: Any, tree: Any) -> Any:
    """`tree` without weak types: a reset's zeros (weakly typed Python scalars) would otherwise
    differ from the step's outputs, and a step compiled for one would not take the other."""
    return jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), tree)


class _Frames:
    """Env 0's frames since the last `pop`, each drawn from a pose (`_pose`'s arrays) as
    Playground's `render_array` draws a state, with one `mujoco.Renderer` kept for them all:
    FRAME_SIZE pixels, from the model's first camera (its free camera where it has none)."""

    def __init__(self, mj_model: Any) -> None:
        import mujoco

        self.mujoco = mujoco
        self.model = mj_model
        self.data = mujoco.MjData(mj_model)
        self.renderer = mujoco.Renderer(mj_model, *FRAME_SIZE)
        self.camera = 0 if mj_model.ncam else -1
        self.frames: list[np.ndarray] = []

    def add(self, pose: dict[str, Any]) -> None:
        for key, value in pose.items():
            setattr(self.data, key, np.asarray(value))
        self.mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera)
        self.frames.append(self.renderer.render())

    def pop(self) -> list[np.ndarray]:
        frames, self.frames = self.frames, []
        return frames

    def close(self) -> None:
        self.renderer.close()


class PlaygroundVecEnv:
    """`num_envs` MuJoCo Playground envs stepped together in one jitted call (an EnvBackend).
    `render_mode` "rgb_array": `frames` gives env 0's (`_Frames`), `frame_rate` their real-time
    rate, 1 / (the env's control step `dt` x action_repeat)."""

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
        name = _check_name(config)
        if render_mode not in (None, render.RENDER_MODE):
            raise SpecError(
                f"--render: a Playground env ({config.name}) cannot be shown in a window; "
                "record a video of it with --record"
            )
        if seq_len:
            raise SpecError(
                f"agent.net: a RecurrentNet on {config.name} is not supported; use an MLP or "
                "TorchArcNet"
            )
        if render_mode == render.RENDER_MODE:
            render.mujoco_renderer_headless()
        jax = _jax()
        self.name, self.seed, self.clock = config.name, seed, clock
        self.num_envs = config.num_envs
        self.impl = _impl(device)
        self.action_repeat = (
            config.action_repeat if config.action_repeat > 1 else official_action_repeat(name)
        )
        env, self._reset, self._step = _program(
            name,
            self.impl,
            config.max_t or int(_load_default(name).episode_length),
            self.action_repeat,
            bool(config.kwargs.get("full_reset", False)),
            render_mode is not None,
        )
        self._frames = _Frames(env.mj_model) if render_mode is not None else None
        self._frame_rate = 1.0 / (float(env.dt) * self.action_repeat)
        self.vectorization = (
            f"one jitted JAX call for all {self.num_envs} envs (Playground, impl {self.impl}, "
            f"action_repeat {self.action_repeat})"
        )
        observation_space, action_space = _spaces_of(env)
        self.obs_norm = ObsNormalizer(
            observation_space.shape, config.normalize_obs, config.obs_clip
        )
        self.reward_scale = config.reward_scale or 1.0
        self.reward_clip = config.reward_clip
        batch = batch_space(action_space, self.num_envs)
        batch.seed(seed)
        self.action_sampler = batch
        float_obs = self.obs_norm.rms is not None or self.obs_norm.clip is not None
        self.info = EnvInfo(
            observation_space,
            action_space,
            self.num_envs,
            agent_obs_dtype(observation_space, float_obs),
            batch.sample,
        )
        self.returns: deque[float] = deque(maxlen=EPISODE_STATS_WINDOW)
        self._key = np.asarray(jax.random.PRNGKey(seed))
        self._state: list | None = None  # the env state's arrays (see _program)
        self._obs: np.ndarray | None = None
        self._finished: list[FinishedEpisodes] | None = None
        # the agent reads observations, never writes them: torch's warning about numpy views
        # of JAX's read-only buffers says nothing here
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        self._compile(name)

    def _compile(self, name: str) -> None:
        """Compile reset and step for this many envs now (from the persistent cache when a
        run has compiled them before), saying so: the first takes tens of seconds."""
        jax = _jax()
        start = time.perf_counter()
        logger.info(
            f"compiling {self.name}'s reset and step for {self.num_envs} envs (JAX, cached in "
            f"{cache_dir()})"
        )
        keys = jax.random.split(jax.random.PRNGKey(0), self.num_envs)
        state, _ = self._reset(keys)
        actions = np.zeros((self.num_envs, self.info.action_space.shape[0]), np.float32)
        jax.block_until_ready(self._step(state, actions))
        logger.info(f"{self.name} compiled in {time.perf_counter() - start:.1f} s")

    # -- the EnvBackend interface ------------------------------------------------------------
    def reset(self, seed: int | None = None) -> np.ndarray:
        jax = _jax()
        if seed is not None:
            self.action_sampler.seed(seed)
            self._key = np.asarray(jax.random.PRNGKey(seed))
        key, keys = self._split(self._key)
        self._key = key
        self._state, out = self._reset(keys)
        self._obs = self.obs_norm(np.asarray(out[0]))
        if self._frames is not None:
            self._frames.add(out[-1][0])
        return self._obs

    def _split(self, key: np.ndarray) -> tuple[np.ndarray, "jax.Array"]:
        jax = _jax()
        keys = jax.random.split(key, self.num_envs + 1)
        return np.asarray(keys[0]), keys[1:]

    def step(self, actions: np.ndarray) -> Transition:
        acted_on = self._obs
        clipped = np.clip(actions, -1.0, 1.0, dtype=np.float32)
        self._state, out = self._step(self._state, clipped)
        obs, final_obs, rewards, dones, truncations, returns, lengths = map(np.asarray, out[:7])
        dones = dones.astype(bool)
        if self._frames is not None:
            pose, final_pose = out[7]
            if dones[0]:  # the episode's last frame, then the next one's first
                self._frames.add(final_pose)
            self._frames.add(pose)
        truncateds = truncations.astype(bool) & dones
        terminateds = dones & ~truncateds
        next_obs = self.obs_norm(obs)
        real_next_obs = self.obs_norm(final_obs, update=False) if dones.any() else next_obs
        num_done = int(dones.sum())
        self.clock.tick(num_done)
        if num_done:
            ended = returns[dones]
            self.returns.extend(ended.tolist())
            if self._finished is not None:
                self._finished.append(
                    FinishedEpisodes(
                        self.clock.frame,
                        self.clock.epi - num_done,
                        ended,
                        (lengths[dones] // self.action_repeat).astype(np.int64),  # whole steps
                        np.flatnonzero(dones),
                    )
                )
        self._obs = next_obs
        return Transition(
            acted_on,
            actions,
            self._train_rewards(rewards),
            real_next_obs,
            terminateds,
            truncateds,
        )

    def _train_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """The rewards the agent learns from: scaled, then clipped."""
        rewards = rewards.astype(np.float32) * np.float32(self.reward_scale)
        if self.reward_clip is not None:
            rewards = np.clip(rewards, *self.reward_clip)
        return rewards

    @property
    def obs(self) -> np.ndarray:
        return self._obs

    @property
    def total_reward(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def record_episodes(self) -> None:
        self._finished = []

    def pop_episodes(self) -> list[FinishedEpisodes]:
        finished, self._finished = self._finished, []
        return finished

    def obs_stats(self) -> dict[str, Any] | None:
        return self.obs_norm.stats()

    def set_obs_stats(self, stats: dict[str, Any] | None, frozen: bool) -> None:
        self.obs_norm.set_stats(stats, frozen)

    def state_dict(self) -> dict[str, Any]:
        """The simulation (every leaf of the env state, its PRNG keys included), the reset key,
        the normalizer, the finished episodes' returns and the action sampler's RNG."""
        rms = self.obs_norm.rms
        return {
            "sim": env_state.encode([np.asarray(x) for x in self._state]),
            "key": env_state.encode(self._key),
            "obs": env_state.encode(self._obs),
            "obs_rms": None if rms is None else env_state.capture(rms)[0],
            "returns": list(self.returns),
            "action_sampler_rng": self.action_sampler.np_random.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        jax = _jax()
        if state["obs_rms"] is not None:
            env_state.restore(self.obs_norm.rms, state["obs_rms"])
        self.action_sampler.np_random.bit_generator.state = state["action_sampler_rng"]
        self.returns.extend(state["returns"])
        # the live state's leaves give the dtypes the saved ones are restored in
        live = self._reset(self._split(self._key)[1])[0]
        saved = env_state.decode(state["sim"])
        self._state = [
            jax.numpy.asarray(x, dtype=y.dtype) for x, y in zip(saved, live, strict=True)
        ]
        self._key = env_state.decode(state["key"])
        self._obs = env_state.decode(state["obs"])
        return True

    def uncapturable(self) -> str | None:
        return None

    def frames(self) -> list[np.ndarray]:
        """Env 0's frames since the last call (render_mode "rgb_array")."""
        if self._frames is None:
            raise RuntimeError(f"{self.name} was not made with render_mode {render.RENDER_MODE!r}")
        return self._frames.pop()

    @property
    def frame_rate(self) -> float:
        """The frames per second of real time that `frames` show."""
        return self._frame_rate

    def close(self) -> None:
        self._state = None
        if self._frames is not None:
            self._frames.close()
            self._frames = None


def _load_default(name: str) -> Any:
    from mujoco_playground import registry

    return registry.get_default_config(name)


make = PlaygroundVecEnv  # the backend module's constructor (see slm_lab.env.backend.BackendModule)


if __name__ == "__main__":
    TABLE_PATH.write_text(json.dumps(write_table(), indent=2) + "\n")
    print(f"wrote {TABLE_PATH}")
