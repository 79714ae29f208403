"""The memory spec keys and the memories by name, without importing torch.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
"""

MEMORY: dict[str, str] = {
    "name": "str?",
    "max_size": "int?",
    "batch_size": "int?",
    "use_cer": "bool?",
    "alpha": "float?",
    "epsilon": "float?",
    "beta": "float?",
    "beta_end_step": "float?",
    "sil_replay_name": "str?",
}

MEMORY_NAMES = ("OnPolicyBatchReplay", "OnPolicyReplay", "Replay", "PrioritizedReplay")
