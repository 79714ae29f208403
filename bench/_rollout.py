"""SLM Lab's rollout as a session runs it, random actions and no net: the env backend built for a
spec (its normalization, episode statistics and final observations, ticking a `Clock`, recording
finished episodes as session 0 does) and the spec's memory. Shared by the rollout benches
(`atari_rollout.py`, `mujoco_rollout.py`, `playground_rollout.py`); not a script itself.
"""

from collections.abc import Callable
from typing import NamedTuple

import torch

from slm_lab.agent.memory.base import Layout, Memory
from slm_lab.agent.memory.registry import MEMORIES
from slm_lab.env.backend import EnvBackend
from slm_lab.env.clock import Clock
from slm_lab.env.registry import backend_module
from slm_lab.spec.schema import Spec


class Rollout(NamedTuple):
    step: Callable[[], None]  # one vector step of random actions, added to the memory
    backend: EnvBackend  # close it when done
    memory: Memory


def slm_lab_rollout(
    spec: Spec, seed: int, max_frame: int, batch_steps: int, drain: bool
) -> Rollout:
    """The spec's env backend and memory (sized for a batch of `batch_steps` vector steps) and a
    step that adds each vector step's transitions to the memory; with `drain` a full batch is
    taken (`sample`), as an on-policy training call empties it."""
    clock = Clock(max_frame, spec.env.num_envs)
    env = backend_module(spec.env.name).make(spec.env, seed, clock, spec.agent.algorithm.gamma)
    env.record_episodes()  # as session 0 does
    memory = MEMORIES[spec.agent.memory.name](
        spec.agent.memory, Layout.of(env.info), batch_steps, max_frame
    )
    cpu = torch.device("cpu")
    env.reset()
    sample, env_step, add, ready = env.info.sample_actions, env.step, memory.add, memory.ready

    def step() -> None:
        add(env_step(sample()))
        if drain and ready():
            memory.sample(cpu)  # a training call empties the batch

    return Rollout(step, env, memory)
