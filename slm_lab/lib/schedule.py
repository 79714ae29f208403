"""Variable schedules (explore_var, clip_eps, entropy_coef), stepped in frames.

spec: {name: no_decay|linear_decay|rate_decay|periodic_decay, start_val, end_val, start_step,
       end_step | end_frac}

A schedule ends at `end_step` (an absolute frame, as SLM Lab v5 writes it) or at `end_frac` of the
run's env.max_frame, which moves with the run: `--max-frame`, `-s env.max_frame` and a train@
extension all stretch it.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from slm_lab.lib.config import Config, SpecError, key

SCHEDULE_NAMES = ("no_decay", "linear_decay", "rate_decay", "periodic_decay")
RATE_DECAY_FACTOR = 0.9  # rate_decay: multiply by this every decay period
RATE_DECAY_PERIODS = 20  # rate_decay: number of decay periods between start_step and end_step
PERIODIC_DECAY_PERIODS = 10  # periodic_decay: oscillation periods between start and end


def no_decay(start_val: float, end_val: float, start_step: int, end_step: int, step: int) -> float:
    return start_val


def linear_decay(
    start_val: float, end_val: float, start_step: int, end_step: int, step: int
) -> float:
    if step <= start_step:
        return start_val
    if step >= end_step:
        return end_val
    frac = (step - start_step) / (end_step - start_step)
    return start_val + frac * (end_val - start_val)


def rate_decay(
    start_val: float, end_val: float, start_step: int, end_step: int, step: int
) -> float:
    """Geometric decay by RATE_DECAY_FACTOR per period; end_val exactly from end_step on."""
    if step <= start_step:
        return start_val
    if step >= end_step:
        return end_val
    period = (end_step - start_step) / RATE_DECAY_PERIODS
    n = (step - start_step) // period
    return (
        max(start_val * RATE_DECAY_FACTOR**n, end_val)
        if start_val >= end_val
        else min(start_val * RATE_DECAY_FACTOR**n, end_val)
    )


def periodic_decay(
    start_val: float, end_val: float, start_step: int, end_step: int, step: int
) -> float:
    """Linear decay modulated by a cosine; end_val exactly from end_step on."""
    if step <= start_step:
        return start_val
    if step >= end_step:
        return end_val
    frac = (step - start_step) / (end_step - start_step)
    unit = (1 - frac) * 0.5 * (1 + math.cos(2 * math.pi * PERIODIC_DECAY_PERIODS * frac))
    return end_val + unit * (start_val - end_val)


SCHEDULES: dict[str, Callable[..., float]] = {
    "no_decay": no_decay,
    "linear_decay": linear_decay,
    "rate_decay": rate_decay,
    "periodic_decay": periodic_decay,
}


@dataclass(frozen=True)
class ScheduleConfig(Config):
    """A value that follows a schedule over frames (explore_var_spec, clip_eps_spec, ...)."""

    name: Literal["no_decay", "linear_decay", "rate_decay", "periodic_decay"] = key(
        doc="the schedule's shape", required=True
    )
    start_val: float = key(doc="value up to start_step", required=True)
    end_val: float | None = key(None, "value from end_step on (default: start_val)")
    start_step: int = key(0, "frame where the schedule starts", ge=0)
    end_step: int = key(0, "frame where it reaches end_val (absolute; see end_frac)", ge=0)
    end_frac: float | None = key(
        None,
        "where it reaches end_val, as a fraction of env.max_frame: follows the run's length (instead of end_step)",
        gt=0,
        le=1,
    )

    def check(self, path: str) -> None:
        if self.end_frac is not None and self.end_step:
            raise SpecError(
                f"{path}.end_frac: set end_step (an absolute frame) or end_frac (a fraction of env.max_frame), not both; to give end_step, also set {path}.end_frac=null"
            )

    def end_frame(self, max_frame: int) -> int:
        """The frame where the schedule reaches end_val in a run of `max_frame` frames."""
        return self.end_step if self.end_frac is None else round(self.end_frac * max_frame)


class VarScheduler:
    """A scalar that follows its schedule as the frame count grows.

    In eval/enjoy (`eval_mode=True`) it returns end_val, the value training converged to.
    """

    def __init__(
        self, config: ScheduleConfig | None, max_frame: int, default: float = math.nan
    ) -> None:
        config = config or ScheduleConfig(name="no_decay", start_val=default)
        self.fn = SCHEDULES[config.name]
        self.start_val = config.start_val
        self.end_val = self.start_val if config.end_val is None else config.end_val
        if config.name == "no_decay":
            self.end_val = self.start_val
        self.start_step = config.start_step
        self.end_step = config.end_frame(max_frame)
        self.val = self.start_val

    def update(self, frame: int, eval_mode: bool = False) -> float:
        if eval_mode:
            self.val = self.end_val
        else:
            self.val = self.fn(self.start_val, self.end_val, self.start_step, self.end_step, frame)
        return self.val
