"""Algorithms by spec name."""

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.ppo import PPO
from slm_lab.agent.algorithm.random import Random
from slm_lab.agent.algorithm.reinforce import Reinforce

ALGORITHMS: dict[str, type[Algorithm]] = {
    "Random": Random,
    "Reinforce": Reinforce,
    "ActorCritic": ActorCritic,
    "PPO": PPO,
}
