"""The `agent.memory` section of a spec, per memory, torch-free."""

from dataclasses import dataclass
from typing import Literal

from slm_lab.lib.config import Config, SpecError, key

MemoryName = Literal["OnPolicyBatchReplay", "OnPolicyReplay", "Replay", "PrioritizedReplay"]


@dataclass(frozen=True)
class MemoryConfig(Config):
    """An on-policy memory: the algorithm's batch settings say how much it holds."""

    name: MemoryName = key(doc="the memory", required=True)


@dataclass(frozen=True)
class ReplayConfig(MemoryConfig):
    """A replay of the last `max_size` transitions, sampled uniformly."""

    max_size: int = key(doc="transitions kept (over all envs)", required=True, gt=0)
    batch_size: int = key(doc="transitions per sampled batch", required=True, gt=0)
    use_cer: bool = key(False, "combined experience replay: each batch ends with the newest steps")

    def check(self, path: str) -> None:
        if self.batch_size > self.max_size:
            raise SpecError(
                f"{path}.batch_size: must be <= max_size ({self.max_size}), got {self.batch_size}"
            )


@dataclass(frozen=True)
class PrioritizedReplayConfig(ReplayConfig):
    """Proportional prioritized replay with importance-sampling weights."""

    alpha: float = key(
        doc="priority exponent: p = (|td| + epsilon)^alpha", required=True, ge=0, le=1
    )
    epsilon: float = key(doc="added to |td| so every transition can be drawn", required=True, gt=0)
    beta: float = key(0.4, "importance-sampling exponent at frame 0 (annealed to 1)", ge=0, le=1)
    beta_end_step: int | None = key(None, "frame where beta reaches 1 (null: env.max_frame)", gt=0)


@dataclass(frozen=True)
class SILMemoryConfig(MemoryConfig):
    """SIL/PPOSIL: the on-policy memory, plus the self-imitation replay's settings (v5 format)."""

    sil_replay_name: Literal["Replay"] = key("Replay", "the self-imitation replay (only Replay)")
    max_size: int = key(doc="self-imitation replay: transitions kept", required=True, gt=0)
    batch_size: int = key(doc="self-imitation replay: transitions per batch", required=True, gt=0)
    use_cer: bool = key(False, "self-imitation replay: combined experience replay")

    def check(self, path: str) -> None:
        ReplayConfig.check(self, path)  # type: ignore[arg-type]  # the same limit


MEMORY_CONFIGS: dict[str, type[MemoryConfig]] = {
    "OnPolicyBatchReplay": MemoryConfig,
    "OnPolicyReplay": MemoryConfig,
    "Replay": ReplayConfig,
    "PrioritizedReplay": PrioritizedReplayConfig,
}
MEMORY_NAMES = tuple(MEMORY_CONFIGS)
