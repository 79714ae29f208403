"""SLM Lab's rollout as a session runs it, random actions and no net: the env backend built for a
spec (its normalization, episode statistics and final observations, ticking a `Clock`, recording
finished episodes as session 0 does) and the spec's memory. Shared by the rollout benches
(`atari_rollout.py`, `mujoco_rollout.py`, `playground_rollout.py`); not a script itself.
"""

from collections.abc import Callable
from typing import Any


def slm_lab_rollout(
    spec: Any, seed: int, max_frame: int, batch_steps: int, drain: bool
) -> tuple[Callable[[], None], Any]:
    """(one vector step, the env backend): the step adds its transition to the spec's memory,
    sized for a batch of `batch_steps` vector steps; with `drain` a full batch is taken
    (`sample`), as an on-policy training call empties it. The caller closes the backend."""
    import torch

    from slm_lab.agent.memory.base import Layout
    from slm_lab.agent.memory.registry import MEMORIES
    from slm_lab.env.clock import Clock
    from slm_lab.env.registry import backend_module

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

    return step, env
