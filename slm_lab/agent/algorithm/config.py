"""The `agent.algorithm` section of a spec, per algorithm, torch-free.

Each algorithm's config declares the keys it reads (type, default, meaning, limits) and, as
class attributes, what it can work with (action spaces, memories). `ALGORITHM_CONFIGS` maps
each spec name to its config; the algorithm classes (slm_lab.agent.algorithm.registry) read it.
"""

from dataclasses import dataclass
from typing import ClassVar, Literal

from slm_lab.lib.config import Config, SpecError, key
from slm_lab.lib.schedule import ScheduleConfig

NOT_YET = "is not available yet in this release"
# Argmax: v5's name for the discrete distribution value-based specs declare (actions then follow
# action_policy); it is accepted for discrete action spaces like Categorical. GumbelSoftmax: a
# Categorical whose samples are made differentiable (SoftActorCritic's, see `gumbel_softmax`)
DISCRETE_PDTYPES = ("Categorical", "Argmax", "GumbelSoftmax")
# SLM Lab v5's default bounds of log(alpha): alpha in [e^-5, e^2] ~ [0.0067, 7.39]
LOG_ALPHA_MIN = -5.0
LOG_ALPHA_MAX = 2.0


@dataclass(frozen=True)
class AlgorithmConfig(Config):
    DEPRECATED = {"clip_val_loss": "clip_vloss", "policy_loss_coef": None}

    discrete_only: ClassVar[bool] = False  # needs a Discrete action space
    off_policy: ClassVar[bool] = False  # trains from a replay memory on its own schedule
    memory_kinds: ClassVar[tuple[str, ...]] = ("OnPolicyBatchReplay",)  # memories it trains from
    needs_net: ClassVar[bool] = True
    self_imitation: ClassVar[bool] = False  # keeps a replay of past episodes' returns (SIL)
    gumbel_softmax: ClassVar[bool] = False  # can train a discrete actor through GumbelSoftmax
    # SAC's nets: a tanh-squashed actor (a Box's bounds needed) and Q(s, a) critics, whose net
    # agent.critic_net may hold apart; what the spec checks read, not the config's class
    squashed_actor_q_critics: ClassVar[bool] = False

    name: str = key(doc="the algorithm", required=True)
    action_pdtype: Literal[
        "default", "Categorical", "Argmax", "GumbelSoftmax", "Normal", "NormalTanh"
    ] = key(
        "default",
        "the action distribution (default: Categorical or Normal by action space); NormalTanh "
        "(policy-gradient algorithms): a Gaussian squashed by tanh into the action bounds, with "
        "the log-det correction in its log-prob (taken at the pre-tanh sample, which the "
        "memory keeps; the env gets its tanh) and the entropy bonus a one-draw "
        "reparameterized estimate (the Gaussian's entropy plus the log-det at a fresh draw); "
        "GumbelSoftmax (SoftActorCritic, discrete actions): the actor is trained through "
        "one-hot samples with a straight-through Gumbel-softmax gradient, and the soft values "
        "are one-sample estimates, instead of exact expectations over the actions",
    )
    action_policy: Literal["default", "epsilon_greedy", "boltzmann", "greedy"] = key(
        "default", "how actions are drawn: from the policy, epsilon-greedy, Boltzmann, greedy"
    )
    explore_var_spec: ScheduleConfig | None = key(
        None, "epsilon (epsilon_greedy) or temperature (boltzmann) over frames"
    )
    gamma: float = key(0.99, "discount factor", gt=0, le=1)
    spectral_norm: bool = key(False, "v5: spectral normalization of the critic (not available yet)")
    symlog: bool = key(False, "v5: symlog value compression (not available yet)")

    def check(self, path: str) -> None:
        for flag, feature in (
            ("spectral_norm", "spectral normalization of the critic"),
            ("symlog", "symlog value compression"),
        ):
            if getattr(self, flag):
                raise SpecError(f"{path}.{flag}: {feature} {NOT_YET}; use false")
        if self.action_policy in ("epsilon_greedy", "boltzmann") and self.explore_var_spec is None:
            raise SpecError(
                f"{path}.explore_var_spec: required by action_policy {self.action_policy}"
            )


@dataclass(frozen=True)
class RandomConfig(AlgorithmConfig):
    memory_kinds = ()
    needs_net = False


@dataclass(frozen=True)
class PolicyGradientConfig(AlgorithmConfig):
    with_critic: ClassVar[bool] = True  # learns V(s) beside the policy

    entropy_coef_spec: ScheduleConfig | None = key(
        None, "entropy bonus coefficient over frames (default 0)"
    )
    training_frequency: int = key(
        doc="train every this many vector steps (OnPolicyReplay: episodes)", required=True, gt=0
    )


@dataclass(frozen=True)
class ReinforceConfig(PolicyGradientConfig):
    with_critic = False
    memory_kinds = ("OnPolicyBatchReplay", "OnPolicyReplay")

    center_return: bool = key(False, "subtract the batch's mean return (a constant baseline)")


@dataclass(frozen=True)
class ActorCriticConfig(PolicyGradientConfig):
    lam: float | None = key(None, "GAE lambda (advantages by GAE when set)", ge=0, le=1)
    num_step_returns: int | None = key(
        None, "n of n-step returns (used when lam is null; neither: Monte-Carlo returns)", gt=0
    )
    val_loss_coef: float = key(0.5, "weight of the value loss", ge=0)
    normalize_v_targets: bool = key(False, "learn V in units of a running return normalizer")
    normalize_advs: bool | None = key(
        None, "standardize advantages (A2C: per batch, default off; PPO: per minibatch, default on)"
    )


@dataclass(frozen=True)
class PPOConfig(ActorCriticConfig):
    UNREAD = ("training_frequency",)  # a batch is time_horizon x num_unrolls steps

    time_horizon: int = key(doc="steps per env in a batch", required=True, gt=0)
    minibatch_size: int = key(
        doc="samples per minibatch (2 or more while advantages are standardized)",
        required=True,
        gt=0,
    )
    training_epoch: int = key(doc="passes over the batch per training call", required=True, gt=0)
    num_unrolls: int = key(1, "time horizons per batch", gt=0)
    clip_eps_spec: ScheduleConfig | None = key(
        None, "the ratio's clip range over frames (default 0.2)"
    )
    clip_vloss: bool = key(
        False,
        "clip the value loss around the old values, as the ratio; this loss is 1/2 the squared "
        "error (SLM Lab v5's and CleanRL's), the unclipped one loss_spec's (MSE: no 1/2)",
    )
    target_kl: float | None = key(
        None, "stop an update's epochs once the approximate KL passes it", gt=0
    )
    recompute_advs: bool = key(
        False,
        "before each epoch after the first, compute the advantages and value targets again from the critic as it is then (Tianshou's recompute_advantage)",
    )
    normalize_advantages: Literal["standardize", "percentile"] | None = key(
        None,
        "per minibatch: standardize (the default), or percentile: A / max(1, P95 - P5), P5 and P95 moving averages of the advantages' 5th and 95th percentiles, updated every minibatch, as SLM Lab v5 (not DreamerV3's percentiles of returns, per batch)",
    )

    def check(self, path: str) -> None:
        super().check(path)
        if self.normalize_advantages is not None and self.normalize_advs is False:
            raise SpecError(
                f"{path}.normalize_advantages: {self.normalize_advantages!r} contradicts normalize_advs false (advantages used as computed); remove one"
            )
        standardized = (
            self.normalize_advs is not False and self.normalize_advantages != "percentile"
        )
        if standardized and self.minibatch_size == 1:
            raise SpecError(
                f"{path}.minibatch_size: 1 gives one advantage per minibatch, which standardizing makes NaN (one sample has no std), skipping every update; use 2 or more, normalize_advantages percentile, or normalize_advs false"
            )


@dataclass(frozen=True)
class SelfImitationKeys(Config):
    """The keys of self-imitation learning (SIL, PPOSIL)."""

    sil_policy_loss_coef: float = key(1.0, "weight of the self-imitation policy loss", ge=0)
    sil_val_loss_coef: float = key(0.01, "weight of the self-imitation value loss", ge=0)
    training_iter: int = key(1, "self-imitation batches after each training call", gt=0)
    training_batch_iter: int = key(1, "gradient steps per self-imitation batch", gt=0)


@dataclass(frozen=True)
class SILConfig(ActorCriticConfig, SelfImitationKeys):
    self_imitation = True


@dataclass(frozen=True)
class PPOSILConfig(PPOConfig, SelfImitationKeys):
    self_imitation = True


@dataclass(frozen=True)
class SARSAConfig(AlgorithmConfig):
    discrete_only = True

    training_frequency: int = key(doc="train every this many vector steps", required=True, gt=0)


@dataclass(frozen=True)
class OffPolicyConfig(AlgorithmConfig):
    off_policy = True
    memory_kinds = ("Replay", "PrioritizedReplay")

    training_start_step: int = key(0, "frames before the first training call", ge=0)
    training_frequency: int = key(1, "frames between training calls", gt=0)
    training_iter: int = key(1, "batches sampled per training call", gt=0)
    training_batch_iter: int = key(1, "gradient steps per sampled batch", gt=0)


@dataclass(frozen=True)
class VanillaDQNConfig(OffPolicyConfig):
    discrete_only = True


@dataclass(frozen=True)
class DQNConfig(VanillaDQNConfig):
    pass


@dataclass(frozen=True)
class DoubleDQNConfig(DQNConfig):
    pass


@dataclass(frozen=True)
class SoftActorCriticConfig(OffPolicyConfig):
    gumbel_softmax = True
    squashed_actor_q_critics = True

    policy_delay: int = key(1, "critic steps per actor (and temperature) step", gt=0)
    target_entropy: Literal["auto"] | float = key(
        "auto", "the entropy alpha is tuned toward (auto: -action_dim, or 0.98 log(n) discrete)"
    )
    fixed_alpha: float | None = key(None, "a fixed temperature instead of tuning it", gt=0)
    alpha_lr: float | None = key(None, "the temperature's learning rate (null: the actor's)", gt=0)
    log_alpha_min: float | None = key(
        None, f"lower bound of log(alpha) after each temperature step (null: {LOG_ALPHA_MIN})"
    )
    log_alpha_max: float | None = key(
        None, f"upper bound of log(alpha) after each temperature step (null: {LOG_ALPHA_MAX})"
    )
    gumbel_temperature: float = key(
        1.0,
        "action_pdtype GumbelSoftmax: the relaxation's temperature, which shapes the actor's "
        "gradient (acting and the sampled actions do not depend on it)",
        gt=0,
    )

    @property
    def log_alpha_bounds(self) -> tuple[float, float]:
        """[log_alpha_min, log_alpha_max] with SLM Lab v5's defaults for the unset ones."""
        lo, hi = self.log_alpha_min, self.log_alpha_max
        return (LOG_ALPHA_MIN if lo is None else lo, LOG_ALPHA_MAX if hi is None else hi)

    def check(self, path: str) -> None:
        super().check(path)
        set_bounds = [k for k in ("log_alpha_min", "log_alpha_max") if getattr(self, k) is not None]
        if set_bounds and self.fixed_alpha is not None:
            raise SpecError(
                f"{path}.{set_bounds[0]}: bounds the tuned alpha, and fixed_alpha {self.fixed_alpha!r} turns the tuning off; remove one"
            )
        low, high = self.log_alpha_bounds
        if low > high:  # named after the key the spec sets, against the other's value
            raise SpecError(
                f"{path}.log_alpha_max: must be >= log_alpha_min ({low!r}, the default), got {high!r}"
                if self.log_alpha_min is None
                else f"{path}.log_alpha_min: must be <= log_alpha_max ({high!r}{'' if self.log_alpha_max is not None else ', the default'}), got {low!r}"
            )


@dataclass(frozen=True)
class CrossQConfig(SoftActorCriticConfig):
    gumbel_softmax = False


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


def readers(key_name: str) -> list[str]:
    """The algorithms that read `key_name`."""
    return [n for n, c in ALGORITHM_CONFIGS.items() if key_name in c.keys()]
