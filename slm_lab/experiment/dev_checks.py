"""dev mode's checks: every step's observations, actions and rewards are finite and the actions
fit the action space; at every metrics row, every parameter is finite."""

import numpy as np

from slm_lab.agent.agent import Agent
from slm_lab.env.backend import EnvInfo
from slm_lab.env.clock import Clock


class DevChecks:
    def __init__(self, clock: Clock, env: EnvInfo, agent: Agent) -> None:
        self.clock, self.env, self.agent = clock, env, agent

    def step(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> None:
        for name, x in (("observation", obs), ("action", actions), ("reward", rewards)):
            if not np.all(np.isfinite(x)):
                raise FloatingPointError(
                    f"dev check: non-finite {name} at frame {self.clock.frame}"
                )
        if not self.env.is_discrete and actions.shape[1:] != self.env.action_space.shape:
            raise ValueError(
                f"dev check: action shape {actions.shape} does not match the action space"
            )

    def params(self) -> None:
        if bad := self.agent.nonfinite_param():
            raise FloatingPointError(
                f"dev check: non-finite parameter {bad} at frame {self.clock.frame}"
            )
