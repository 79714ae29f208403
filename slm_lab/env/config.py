"""The env spec keys SLM Lab reads (torch-free); every other key of `env` goes to gymnasium.make.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
"""

from typing import Any

ENV: dict[str, str] = {
    "name": "str",
    "num_envs": "int?",
    "max_t": "int?",
    "max_frame": "float",
    "normalize_obs": "bool?",
    "normalize_reward": "bool?",
    "clip_obs": "float?",
    "clip_reward": "any",
    "reward_scale": "float?",
    "action_repeat": "int?",
    "life_loss_info": "bool?",
    "vectorization_mode": "str?",
}


def env_kwargs(env_spec: dict[str, Any]) -> dict[str, Any]:
    """The keys of an env spec that are the env's own arguments (passed to gymnasium.make)."""
    return {k: v for k, v in env_spec.items() if k not in ENV}
