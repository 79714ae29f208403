"""The `agent` section of a spec, typed (torch-free): what an Agent is built from."""

from dataclasses import dataclass

from slm_lab.agent.algorithm.config import AlgorithmConfig
from slm_lab.agent.memory.config import MemoryConfig
from slm_lab.agent.net.config import NetSpec


@dataclass(frozen=True)
class AgentConfig:
    name: str | None  # a free label
    algorithm: AlgorithmConfig
    memory: MemoryConfig | None
    net: NetSpec | None
    critic_net: NetSpec | None  # CrossQ/SAC: the critics' own net section
