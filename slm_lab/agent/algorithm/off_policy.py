"""The replay-based training schedule shared by the DQN family, SAC and CrossQ.

Every env step the transitions go to the replay memory. From `training_start_step` frames on,
once the memory holds a batch, a training call runs every `training_frequency` frames:
`training_iter` batches are sampled, each used for `training_batch_iter` gradient steps
(`train_batch`). A prioritized memory gets its new priorities after each step (`td_errors`).
"""

import math
from typing import Any

import torch

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.config import OffPolicyConfig


class OffPolicy(Algorithm):
    config_cls = OffPolicyConfig

    def init_nets(self) -> None:
        spec = self.algorithm_spec
        self.training_start_step = int(spec.get("training_start_step") or 0)
        self.training_frequency = int(spec.get("training_frequency") or 1)
        self.training_iter = int(spec.get("training_iter") or 1)
        self.training_batch_iter = int(spec.get("training_batch_iter") or 1)
        self.last_train_frame = -(10**18)
        self.last_target_update = 0

    def memory_arg(self) -> Any:
        """Replay memories take their spec; PER's beta reaches 1 at the run's end unless set."""
        if (
            self.memory_spec.get("name") == "PrioritizedReplay"
            and self.memory_spec.get("beta_end_step") is None
        ):
            return {**self.memory_spec, "beta_end_step": self.env.max_frame}
        return self.memory_spec

    def to_train(self) -> bool:
        frame = self.clock.frame
        if frame < self.training_start_step or not self.memory.ready():
            return False
        return frame - self.last_train_frame >= self.training_frequency

    def train(self) -> float:
        self.last_train_frame = self.clock.frame
        losses = []
        for _ in range(self.training_iter):
            batch = self.memory.sample(self.device)
            for _ in range(self.training_batch_iter):
                losses.append(self.train_batch(batch))
        finite = [x for x in losses if math.isfinite(x)]  # a skipped (non-finite) step reports NaN
        return sum(finite) / len(finite) if finite else math.nan

    def train_batch(self, batch: dict[str, torch.Tensor]) -> float:
        """One gradient step on a sampled batch; returns the loss."""
        raise NotImplementedError

    def is_weighted(self, batch: dict[str, torch.Tensor]) -> bool:
        return "weights" in batch

    def weighted_mean(self, losses: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean of per-sample losses, importance-weighted when the memory is prioritized."""
        return (losses * batch["weights"]).mean() if "weights" in batch else losses.mean()

    def update_priorities(self, batch: dict[str, torch.Tensor], td_errors: torch.Tensor) -> None:
        if "idxs" in batch:
            self.memory.update_priorities(batch["idxs"], td_errors.detach().abs().cpu().numpy())

    def update_schedules(self) -> None:
        super().update_schedules()
        if hasattr(self.memory, "anneal"):
            self.memory.anneal(self.clock.frame)

    @staticmethod
    @torch.no_grad()
    def polyak_update(net: torch.nn.Module, target: torch.nn.Module, coef: float) -> None:
        """target <- (1 - coef) * target + coef * net; buffers (e.g. batch-norm stats) copied."""
        torch._foreach_lerp_(list(target.parameters()), list(net.parameters()), coef)
        for tb, b in zip(target.buffers(), net.buffers(), strict=True):
            tb.copy_(b)

    def extra_state(self) -> dict[str, Any]:
        return {
            "last_train_frame": self.last_train_frame,
            "last_target_update": self.last_target_update,
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.last_train_frame = state["last_train_frame"]
        self.last_target_update = state["last_target_update"]
