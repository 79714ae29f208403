"""The replay-based training schedule shared by the DQN family, SAC and CrossQ.

Every env step the transitions go to the replay memory. From `training_start_step` frames on,
once the memory holds a batch, a training call runs every `training_frequency` frames:
`training_iter` batches are sampled, each used for `training_batch_iter` gradient steps
(`train_batch`). A prioritized memory gets its new priorities after each step (`td_errors`).
The loss and `STATS` of a training call are their means over its steps, read from the device
once per call.
"""

from typing import Any

import torch

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.config import OffPolicyConfig
from slm_lab.agent.memory.base import Batch
from slm_lab.agent.net import net_util
from slm_lab.lib.math_util import finite_mean


class OffPolicy(Algorithm):
    config: OffPolicyConfig

    def init_nets(self) -> None:
        self.last_train_frame = -(10**18)
        self.target: net_util.TargetNets | None = None  # the target nets, where there are some

    def to_train(self) -> bool:
        frame = self.clock.frame
        if frame < self.config.training_start_step or not self.memory.ready():
            return False
        return frame - self.last_train_frame >= self.config.training_frequency

    def train(self) -> float:
        self.last_train_frame = self.clock.frame
        steps = []
        for _ in range(self.config.training_iter):
            batch = self.memory.sample(self.device)
            for _ in range(self.config.training_batch_iter):
                steps.append(self.train_batch(batch))
        names = list(steps[0])  # "loss", then STATS
        with torch.no_grad():  # one read from the device for the whole call
            values = torch.stack([v for step in steps for v in step.values()])
            rows = values.view(len(steps), len(names)).tolist()
        # a skipped (non-finite) step, or a value a step did not measure, is left out
        loss, *means = (finite_mean(column) for column in zip(*rows, strict=True))
        return self.keep_stats(loss, dict(zip(names[1:], means, strict=True)))

    def train_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step on a sampled batch; returns its loss and `STATS` (NaN: not
        measured at this step)."""
        raise NotImplementedError

    @staticmethod
    def weighted_mean(losses: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean of per-sample losses, importance-weighted when the memory is prioritized."""
        return (losses * batch.weights).mean() if batch.weights is not None else losses.mean()

    def update_priorities(self, batch: Batch, td_errors: torch.Tensor) -> None:
        if batch.idxs is not None:
            self.memory.update_priorities(batch.idxs, td_errors.detach().abs().cpu().numpy())

    def update_schedules(self) -> None:
        super().update_schedules()
        self.memory.anneal(self.clock.frame)

    def extra_state(self) -> dict[str, Any]:
        target = {"target": self.target.state_dict()} if self.target is not None else {}
        return {"last_train_frame": self.last_train_frame, **target}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.last_train_frame = state["last_train_frame"]
        if self.target is not None:
            self.target.load_state_dict(state["target"])
