"""What one vector step of the env gives the agent."""

from typing import NamedTuple

import numpy as np


class Transition(NamedTuple):
    """One vector step of every env (numpy arrays, env axis first). `next_obs` is each
    transition's true successor: the final observation where an episode ended (a time limit's
    truncation bootstraps from it), never the reset observation that follows."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminateds: np.ndarray
    truncateds: np.ndarray
