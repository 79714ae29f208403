"""What every memory takes and gives: a `Transition` in, a `Batch` out, the `Memory` protocol.

A `Transition` (slm_lab.env.transition) is one vector step of every env, as the session loop
hands it to the agent. A `Batch` is what a memory hands an algorithm, as tensors
named after the math: on-policy memories give [T, N, ...] (time, env), replays [B, ...].
"""

from typing import Any, NamedTuple, Protocol

import torch

from slm_lab.agent.memory.layout import Layout
from slm_lab.env.transition import Transition

__all__ = ["Batch", "Layout", "Memory", "Transition", "UnprioritizedMemory"]


class Batch(NamedTuple):
    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor  # the reward of the transition from obs; SIL: the discounted return
    next_obs: torch.Tensor | None = None
    terminateds: torch.Tensor | None = None  # next_obs is terminal: nothing to bootstrap from
    dones: torch.Tensor | None = None  # the episode ended here (terminated or truncated)
    weights: torch.Tensor | None = None  # prioritized replay: importance-sampling weights
    idxs: torch.Tensor | None = None  # prioritized replay: the transitions' leaves


class Memory(Protocol):
    """Every memory: built from its config, its layout and the algorithm's batch size in steps
    (on-policy) and the run's length in frames (schedules that end with the run)."""

    def add(self, t: Transition) -> None:
        """Store one vector step."""

    def ready(self) -> bool:
        """Whether a batch can be sampled."""

    def sample(self, device: torch.device) -> Batch: ...

    def mark_truncated(self) -> None:
        """End the episodes in progress here (a resume restarted the env's episodes)."""

    def update_priorities(self, idxs: torch.Tensor, td_errors: torch.Tensor) -> None:
        """New priorities of sampled transitions (a prioritized replay; others ignore it)."""

    def anneal(self, frame: int) -> None:
        """Advance the memory's own schedules to `frame` (a prioritized replay's beta)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class UnprioritizedMemory:
    """The Memory methods a memory without priorities or schedules has nothing to do in."""

    def update_priorities(self, idxs: torch.Tensor, td_errors: torch.Tensor) -> None:
        """No priorities."""

    def anneal(self, frame: int) -> None:
        """No schedule."""
