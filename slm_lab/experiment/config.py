"""The `meta` section of a spec (how a run is organized), torch-free."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from slm_lab.lib.config import Config, SpecError, key

if TYPE_CHECKING:
    from slm_lab.spec.schema import Spec

DEFAULT_LOG_FREQUENCY = 10000
HOGWILD_MODES = ("shared", "synced")
# the algorithms whose workers can share global nets: one set of nets trained by optimizers
# from on-policy batches or a worker's own replay (target nets, where any, stay each worker's)
HOGWILD_ALGORITHMS = ("Reinforce", "ActorCritic", "PPO", "SoftActorCritic")
# the LR schedules a Hogwild trial can follow: they read the trial's global frame count;
# torch's own count their optimizer's steps, which are each worker's
HOGWILD_LR_SCHEDULERS = ("LinearToZero", "LinearToMin")
# ASHA keeps the best 1/reduction_factor of the trials at each rung; SLM Lab v5 specs use 3
DEFAULT_REDUCTION_FACTOR = 3.0


@dataclass(frozen=True)
class SearchResourcesConfig(Config):
    """What one search trial reserves; fractions let several trials share a CPU or a GPU."""

    cpu: float | None = key(None, "CPUs per trial (null: max_session, one per session)", gt=0)
    gpu: float = key(0.0, "GPUs per trial", ge=0)


@dataclass(frozen=True)
class SearchSchedulerConfig(Config):
    """ASHA (asynchronous successive halving) early stopping, in frames."""

    grace_period: int = key(
        doc="frames every trial runs before it can be stopped", required=True, gt=0
    )
    reduction_factor: float = key(
        DEFAULT_REDUCTION_FACTOR,
        "at each rung (grace_period x reduction_factor^k frames) the best 1/reduction_factor go on",
        gt=1,
    )


@dataclass(frozen=True)
class MetaConfig(Config):
    DEPRECATED = {
        "num_gpus": "agent.net.gpu",
        "resume": "the train@<run folder> mode",
        "training_eval": "meta.eval_frequency",
    }

    distributed: bool | str | None = key(
        False,
        "false, or Hogwild training: max_session workers on global nets in shared memory (CPU),"
        " each with its own env for max_frame / max_session frames; shared: the workers' nets and"
        " optimizers are the global ones (lock-free); synced: each worker steps the global nets"
        " with its gradient and copies them back",
    )
    log_frequency: int = key(
        DEFAULT_LOG_FREQUENCY, "frames between checkpoints (a metrics row, graphs, files)", gt=0
    )
    eval_frequency: int | None = key(
        None,
        "frames between evaluations (null: log_frequency); without rigorous_eval > 0 there are none",
        gt=0,
    )
    rigorous_eval: int | None = key(
        None,
        "episodes per evaluation, run on a separate env without training (null or 0: no evaluation)",
        ge=0,
    )
    eval_greedy: bool = key(
        False,
        "evaluation acts greedily (discrete: argmax; continuous: the mean) instead of sampling",
    )
    max_session: int = key(1, "sessions (seeds) of a trial, run in parallel", gt=0)
    max_trial: int = key(1, "trials of a search", gt=0)
    search_resources: SearchResourcesConfig | None = key(
        None, "{cpu, gpu} per search trial (null: cpu max_session, gpu 0)"
    )
    search_scheduler: SearchSchedulerConfig | None = key(
        None, "{grace_period, reduction_factor}: ASHA early stopping in a search (null: none)"
    )
    random_seed: int | None = key(None, "the run's seed (null: drawn and recorded)", ge=0)
    num_threads: int = key(1, "torch threads per session process", gt=0)

    @property
    def trial_cpus(self) -> float:
        """CPUs a search trial reserves."""
        resources = self.search_resources
        return self.max_session if resources is None or resources.cpu is None else resources.cpu

    @property
    def trial_gpus(self) -> float:
        return 0.0 if self.search_resources is None else self.search_resources.gpu

    @property
    def hogwild(self) -> bool:
        """Whether the trial's sessions are Hogwild workers sharing global nets."""
        return self.distributed in HOGWILD_MODES

    @property
    def eval_every(self) -> int | None:
        """Frames between evaluations, or None when the run has none."""
        if not self.rigorous_eval:
            return None
        return self.eval_frequency or self.log_frequency

    def check(self, path: str) -> None:
        if self.distributed not in (False, None, "false", *HOGWILD_MODES):
            raise SpecError(
                f"{path}.distributed: must be false, shared or synced, got {self.distributed!r}"
            )
        if self.hogwild and self.max_session == 1:
            logger.warning(
                f"{path}.distributed: {self.distributed} with max_session 1 is Hogwild of one"
                " worker (plain training with extra steps); set max_session to the workers"
            )


def check_hogwild(spec: "Spec") -> None:
    """What a Hogwild trial (meta.distributed shared or synced) needs from the agent."""
    meta, agent = spec.meta, spec.agent
    if not meta.hogwild:
        return
    mode = f"meta.distributed {meta.distributed}"
    if agent.algorithm.name not in HOGWILD_ALGORITHMS:
        raise SpecError(
            f"meta.distributed: {agent.algorithm.name} has no Hogwild form (Hogwild runs"
            f" {', '.join(HOGWILD_ALGORITHMS)}); set meta.distributed to false"
        )
    for section, net in (("net", agent.net), ("critic_net", agent.critic_net)):
        if net is None:
            continue
        if net.base.gpu in (True, "true", 1):
            raise SpecError(
                f"agent.{section}.gpu: true with {mode}: Hogwild's global nets are in shared"
                " memory, on the CPU; set gpu to false (or auto)"
            )
        for role in (net.base, net.actor, net.critic):
            scheduler = role.lr_scheduler_spec
            if scheduler is not None and scheduler.name not in HOGWILD_LR_SCHEDULERS:
                raise SpecError(
                    f"agent.{section}.lr_scheduler_spec.name: {scheduler.name} with {mode} would"
                    " step once per worker's update; use LinearToZero or LinearToMin, which follow"
                    " the trial's global frames"
                )
