"""Algorithms by spec name."""

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.crossq import CrossQ
from slm_lab.agent.algorithm.dqn import DQN, DoubleDQN, VanillaDQN
from slm_lab.agent.algorithm.ppo import PPO
from slm_lab.agent.algorithm.random import Random
from slm_lab.agent.algorithm.reinforce import Reinforce
from slm_lab.agent.algorithm.sac import SoftActorCritic
from slm_lab.agent.algorithm.sarsa import SARSA
from slm_lab.agent.algorithm.sil import PPOSIL, SIL

ALGORITHMS: dict[str, type[Algorithm]] = {
    "Random": Random,
    "Reinforce": Reinforce,
    "ActorCritic": ActorCritic,
    "PPO": PPO,
    "SARSA": SARSA,
    "VanillaDQN": VanillaDQN,
    "DQN": DQN,
    "DoubleDQN": DoubleDQN,
    "SoftActorCritic": SoftActorCritic,
    "CrossQ": CrossQ,
    "SIL": SIL,
    "PPOSIL": PPOSIL,
}
