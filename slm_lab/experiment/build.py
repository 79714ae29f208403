"""The one construction of a session's env backend and agent from its task and placement:
training, evaluation, `enjoy` and `load_agent` all build through here."""

import random

import numpy as np
import torch

from slm_lab.agent.agent import Agent
from slm_lab.agent.net import net_util
from slm_lab.agent.net.config import env_seq_len
from slm_lab.env.backend import EnvBackend
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.registry import backend_module
from slm_lab.env.vectorization import session_cpus
from slm_lab.experiment.task import Placement, SessionTask
from slm_lab.spec.schema import Spec


def device_of(placement: Placement) -> torch.device:
    """The placement's torch device (`auto`: CUDA when there is one)."""
    return net_util.get_device(False if placement.device == "cpu" else placement.device)


def make_env(
    spec: Spec,
    config: EnvConfig,
    seed: int,
    clock: Clock,
    placement: Placement,
    render_mode: str | None = None,
) -> EnvBackend:
    """The backend of `config` (the spec's env section, or one derived from it) for a session of
    `spec` placed at `placement`."""
    cpus = placement.cpus if placement.cpus is not None else session_cpus(spec.meta.max_session)
    return backend_module(config.name).make(
        config,
        seed,
        clock,
        spec.agent.algorithm.gamma,
        render_mode,
        env_seq_len(spec.agent.net),
        cpus=cpus,
        device=str(device_of(placement)),
    )


def build(
    task: SessionTask, clock: Clock, render_mode: str | None = None
) -> tuple[EnvBackend, Agent]:
    """A session's env backend and agent on `clock`, with Python, numpy and torch seeded from
    the task's seed first. `render_mode`: None, "human" (a window) or "rgb_array" (frames for a
    video). A Hogwild worker's agent is its own until the session attaches it to the trial's
    global nets (experiment/hogwild.py), after its own state is loaded on a resume."""
    spec, seed, placement = task.spec, task.seed, task.placement
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    env = make_env(spec, spec.env, seed, clock, placement, render_mode)
    return env, Agent(spec.agent, env.info, clock, device_of(placement))
