"""Algorithms by spec name. A name's config (agent/algorithm/config.py) tells its class what to
compute where one class serves several names: DQN (VanillaDQN, DQN, DoubleDQN), ActorCritic (with
self-imitation: SIL) and PPO (PPOSIL)."""

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.crossq import CrossQ
from slm_lab.agent.algorithm.dqn import DQN
from slm_lab.agent.algorithm.ppo import PPO
from slm_lab.agent.algorithm.random import Random
from slm_lab.agent.algorithm.reinforce import Reinforce
from slm_lab.agent.algorithm.sac import SoftActorCritic
from slm_lab.agent.algorithm.sarsa import SARSA

ALGORITHMS: dict[str, type[Algorithm]] = {
    "Random": Random,
    "Reinforce": Reinforce,
    "ActorCritic": ActorCritic,
    "PPO": PPO,
    "SARSA": SARSA,
    "VanillaDQN": DQN,
    "DQN": DQN,
    "DoubleDQN": DQN,
    "SoftActorCritic": SoftActorCritic,
    "CrossQ": CrossQ,
    "SIL": ActorCritic,
    "PPOSIL": PPO,
}
