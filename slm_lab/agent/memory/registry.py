"""Memories by spec name."""

from slm_lab.agent.memory.onpolicy import OnPolicyBatchReplay, OnPolicyReplay
from slm_lab.agent.memory.replay import PrioritizedReplay, Replay

MEMORIES: dict[str, type] = {
    "OnPolicyBatchReplay": OnPolicyBatchReplay,
    "OnPolicyReplay": OnPolicyReplay,
    "Replay": Replay,
    "PrioritizedReplay": PrioritizedReplay,
}
