"""The `meta` section of a spec (how a run is organized), torch-free."""

from dataclasses import dataclass

from slm_lab.lib.config import Config, SpecError, key

DEFAULT_LOG_FREQUENCY = 10000
NOT_YET = "is not available yet in this release"
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
        False, "false; shared/synced (Hogwild workers sharing global nets) are not available yet"
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
    def eval_every(self) -> int | None:
        """Frames between evaluations, or None when the run has none."""
        if not self.rigorous_eval:
            return None
        return self.eval_frequency or self.log_frequency

    def check(self, path: str) -> None:
        if self.distributed in ("shared", "synced"):
            raise SpecError(
                f"{path}.distributed: {self.distributed!r} (Hogwild training) {NOT_YET}; use false"
            )
        if self.distributed not in (False, None, "false"):
            raise SpecError(
                f"{path}.distributed: must be false, shared or synced, got {self.distributed!r}"
            )
