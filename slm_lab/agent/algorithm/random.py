"""Random policy: uniform actions from the action space; the baseline B of the metrics."""

import numpy as np
import torch

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.config import RandomConfig
from slm_lab.agent.memory.base import Transition


class Random(Algorithm):
    config: RandomConfig

    def init_memory(self) -> None:
        return None

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.sample_actions()

    def update(self, t: Transition) -> None:
        self.update_schedules()

    def episodes_restarted(self) -> None:
        """No memory."""

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("Random acts on the action space directly")
