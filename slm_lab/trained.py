"""A trained agent in Python, as `load_agent` gives it (`from slm_lab import load_agent`):

    agent = load_agent("data/ppo_cartpole_2026_11_27_101500", checkpoint="best")
    action = agent.act(obs, deterministic=True)

It is the agent of a run folder's session, built from the spec the folder records, with a
checkpoint's weights and observation normalizer statistics, acting as the agent of an `enjoy@`
replay does: the spec's action policy with its schedules at their end values, or greedily
(argmax; a continuous policy's mean) when `deterministic`. Observations are normalized with the
checkpoint's statistics before the net; actions come back in the env's action space (a bounded
Box rescaled from the agent's [-1, 1], a Discrete shifted to its `start`).

`slm_lab` imports this module when `load_agent` is first used: torch loads then. The light
install (`uv sync --no-default-groups`) has no torch nor Gymnasium: the import raises one
ModuleNotFoundError saying to run `uv sync`.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slm_lab.lib.util import FULL_INSTALL_FIX, FULL_INSTALL_MODULES

try:
    import gymnasium as gym
    import numpy as np

    from slm_lab.agent.agent import Agent, rng_state, set_rng_state
    from slm_lab.env.backend import EnvInfo
    from slm_lab.env.clock import Clock
    from slm_lab.env.registry import backend_module
    from slm_lab.env.spaces import is_bounded
    from slm_lab.env.wrappers import ObsNormalizer
    from slm_lab.experiment import record
    from slm_lab.experiment.build import build
    from slm_lab.experiment.checkpointer import Checkpointer
    from slm_lab.experiment.layout import RunLayout, is_run_dir
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import io
    from slm_lab.spec import schema
    from slm_lab.spec.schema import Spec
except ModuleNotFoundError as err:  # the light core (`uv sync --no-default-groups`)
    if err.name not in FULL_INSTALL_MODULES:
        raise
    raise ModuleNotFoundError(
        f"load_agent needs the full install (torch, Gymnasium...): {FULL_INSTALL_FIX}",
        name=err.name,
    ) from None

CHECKPOINTS = ("best", "latest")
BUILD_SEED = 0  # the env built to read its spaces is never stepped


@dataclass
class TrainedAgent:
    """A session's agent at a checkpoint, acting on numpy observations (see the module)."""

    spec: Spec
    checkpoint: Path  # the model file loaded
    observation_space: gym.Space  # one observation, as `act` takes it
    action_space: gym.Space  # the env's: what `act` returns
    agent: Agent
    obs_norm: ObsNormalizer

    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """The action for one observation, or the actions for a batch of them (along a first
        axis); sampled from the policy as the spec's action policy does (torch's global RNG),
        or greedy when `deterministic`."""
        obs = np.asarray(obs)
        shape = self.observation_space.shape
        single = obs.shape == shape
        if not single and obs.shape[1:] != shape:
            raise ValueError(
                f"obs of shape {obs.shape}: expected one observation {shape} or a batch (n, {', '.join(map(str, shape))})"
            )
        batch = self.normalized(obs[None] if single else obs)
        algorithm = self.agent.algorithm
        policy = algorithm.action_policy
        algorithm.action_policy = "greedy" if deterministic else policy
        try:
            actions = self.env_actions(self.agent.act(batch))
        finally:
            algorithm.action_policy = policy
        return actions[0] if single else actions

    def normalized(self, obs: np.ndarray) -> np.ndarray:
        """Observations as the net takes them: normalized with the checkpoint's statistics
        (and clipped) as the env did in training, when the spec has it do so."""
        return self.obs_norm(obs, update=False)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """The agent's actions in the env's action space, as the env's wrappers map them."""
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return actions + int(space.start)
        if isinstance(space, gym.spaces.Box) and is_bounded(space):
            unit = np.clip(actions, -1.0, 1.0)
            return (space.low + (unit + 1.0) * (space.high - space.low) / 2).astype(space.dtype)
        return actions


def load_agent(
    run_dir: str | Path,
    checkpoint: Literal["best", "latest"] = "best",
    session: int = 0,
) -> TrainedAgent:
    """The agent of `session` in the run folder `run_dir` (a `train` or `dev` run, a search's
    trial folder, or one pulled from the Hub) at its `best` checkpoint (the best total_reward;
    the latest where no best was written yet, as an enjoy@ replay takes it) or its `latest`."""
    root = Path(run_dir)
    if not is_run_dir(root):
        raise FileNotFoundError(
            f"{root}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
        )
    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint={checkpoint!r}: one of {', '.join(CHECKPOINTS)}")
    with schema.quiet():  # its warnings were given when the run started
        spec, info = record.read(root)
    if spec.agent.algorithm.name == "Random":
        raise ValueError(f"{root}: a Random agent has no trained policy to load")
    checkpointer = Checkpointer(RunLayout(root, spec.name), info.trial, session)
    # best: the model an enjoy@ replay plays, the latest one until a best is written
    model_path = checkpointer.model_path() if checkpoint == "best" else checkpointer.latest[0]
    if not model_path.exists():
        which = "" if checkpoint == "best" else "latest "
        raise FileNotFoundError(
            f"{model_path}: session {session} of {root} has no {which}checkpoint"
        )
    model = io.load_torch(model_path)
    agent, env_info, action_space = build_agent(spec)
    agent.load_model(model["nets"])
    agent.set_eval()
    obs_norm = ObsNormalizer(
        env_info.observation_space.shape, spec.env.normalize_obs, spec.env.obs_clip
    )
    if model["obs_rms"] is not None:
        rms, stats = obs_norm.rms, model["obs_rms"]
        rms.mean, rms.var = stats["mean"].numpy(), stats["var"].numpy()
        rms.count = float(stats["count"])
    return TrainedAgent(spec, model_path, env_info.observation_space, action_space, agent, obs_norm)


def build_agent(spec: Spec) -> tuple[Agent, EnvInfo, gym.Space]:
    """The spec's agent for one env, its EnvInfo, and the env's own action space; the global
    RNGs (which building draws from) as they were."""
    config = dataclasses.replace(spec.env, num_envs=1, vectorization_mode="sync")
    saved = rng_state()
    try:
        clock = Clock(config.max_frame, 1)
        task = SessionTask.detached(dataclasses.replace(spec, env=config), BUILD_SEED)
        env, agent = build(task, clock)
        env.close()
    finally:
        set_rng_state(saved)
    return agent, env.info, backend_module(config.name).spaces(spec.env)[1]
