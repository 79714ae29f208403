"""What validation needs to know about each algorithm, without importing torch.

`ALGORITHM` is every key of `agent.algorithm` and its type (int, float, bool, str, list, dict,
any; a trailing '?' allows null). `ALGORITHM_CONFIGS` maps each algorithm's spec name to a
config class whose class attributes say what the algorithm can work with; the classes mirror
the algorithms' own hierarchy, and each algorithm class names its config (`config_cls`).
"""

from typing import ClassVar

ALGORITHM: dict[str, str] = {
    "name": "str",
    "action_pdtype": "str?",
    "action_policy": "str?",
    "explore_var_spec": "dict?",
    "gamma": "float?",
    "lam": "float?",
    "num_step_returns": "int?",
    "entropy_coef_spec": "dict?",
    "val_loss_coef": "float?",
    "training_frequency": "int?",
    "normalize_v_targets": "bool?",
    "clip_eps_spec": "dict?",
    "time_horizon": "int?",
    "minibatch_size": "int?",
    "training_epoch": "int?",
    "clip_vloss": "bool?",
    "target_kl": "float?",
    "num_unrolls": "int?",
    "center_return": "bool?",
    "normalize_advs": "bool?",
    # off-policy training schedule (DQN family, SAC, CrossQ) and SIL
    "training_start_step": "float?",
    "training_iter": "int?",
    "training_batch_iter": "int?",
    "policy_delay": "int?",
    "target_entropy": "any",
    "fixed_alpha": "float?",
    "alpha_lr": "float?",
    "sil_policy_loss_coef": "float?",
    "sil_val_loss_coef": "float?",
    "policy_loss_coef": "float?",
    # SAC/CrossQ: bounds of log(alpha) after each temperature step
    "log_alpha_min": "float?",
    "log_alpha_max": "float?",
    # PPO: how advantages are scaled per minibatch (see ADVANTAGE_NORMALIZERS)
    "normalize_advantages": "str?",
    # v5 keys of features this release does not have; accepted while false
    "spectral_norm": "bool?",
    "symlog": "bool?",
}
ADVANTAGE_NORMALIZERS = ("standardize", "percentile")
# SLM Lab v5's default bounds of log(alpha): alpha in [e^-5, e^2] ~ [0.0067, 7.39]
LOG_ALPHA_MIN = -5.0
LOG_ALPHA_MAX = 2.0
NOT_YET_FLAGS = {  # key: the feature it would turn on
    "spectral_norm": "spectral normalization of the critic",
    "symlog": "symlog value compression",
}

ACTION_POLICIES = ("default", "epsilon_greedy", "boltzmann", "greedy")
# Argmax: v5's name for the discrete distribution value-based specs declare (actions then follow
# action_policy); it is accepted for discrete action spaces like Categorical
ACTION_PDTYPES = ("default", "Categorical", "Argmax", "Normal")
DISCRETE_PDTYPES = ("Categorical", "Argmax")


class AlgorithmConfig:
    discrete_only: ClassVar[bool] = False  # needs a Discrete action space
    off_policy: ClassVar[bool] = False  # trains from a replay memory on its own schedule
    memory_kinds: ClassVar[tuple[str, ...]] = ("OnPolicyBatchReplay",)  # memories it trains from
    needs_net: ClassVar[bool] = True
    self_imitation: ClassVar[bool] = False  # keeps a replay of past episodes' returns (SIL)


class RandomConfig(AlgorithmConfig):
    memory_kinds = ()
    needs_net = False


class PolicyGradientConfig(AlgorithmConfig):
    with_critic: ClassVar[bool] = True  # learns V(s) beside the policy


class ReinforceConfig(PolicyGradientConfig):
    with_critic = False
    memory_kinds = ("OnPolicyBatchReplay", "OnPolicyReplay")


class ActorCriticConfig(PolicyGradientConfig):
    pass


class PPOConfig(ActorCriticConfig):
    pass


class SILConfig(ActorCriticConfig):
    self_imitation = True


class PPOSILConfig(PPOConfig):
    self_imitation = True


class SARSAConfig(AlgorithmConfig):
    discrete_only = True


class OffPolicyConfig(AlgorithmConfig):
    off_policy = True
    memory_kinds = ("Replay", "PrioritizedReplay")


class VanillaDQNConfig(OffPolicyConfig):
    discrete_only = True


class DQNConfig(VanillaDQNConfig):
    pass


class DoubleDQNConfig(DQNConfig):
    pass


class SoftActorCriticConfig(OffPolicyConfig):
    pass


class CrossQConfig(SoftActorCriticConfig):
    pass


ALGORITHM_CONFIGS: dict[str, type[AlgorithmConfig]] = {
    "Random": RandomConfig,
    "Reinforce": ReinforceConfig,
    "ActorCritic": ActorCriticConfig,
    "PPO": PPOConfig,
    "SARSA": SARSAConfig,
    "VanillaDQN": VanillaDQNConfig,
    "DQN": DQNConfig,
    "DoubleDQN": DoubleDQNConfig,
    "SoftActorCritic": SoftActorCriticConfig,
    "CrossQ": CrossQConfig,
    "SIL": SILConfig,
    "PPOSIL": PPOSILConfig,
}

# keys of agent.algorithm that only one family reads: {key: the family's config class}
FAMILY_KEYS: dict[str, type[AlgorithmConfig]] = {
    "log_alpha_min": SoftActorCriticConfig,
    "log_alpha_max": SoftActorCriticConfig,
    "normalize_advantages": PPOConfig,
}
