"""Variable schedules (explore_var, clip_eps, entropy_coef), stepped in frames.

spec: {name: no_decay|linear_decay|rate_decay|periodic_decay, start_val, end_val, start_step, end_step}
"""

import math
from collections.abc import Callable

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


class VarScheduler:
    """A scalar that follows its schedule as the frame count grows.

    In eval/enjoy (`eval_mode=True`) it returns end_val, the value training converged to.
    """

    def __init__(self, spec: dict | None, default: float = math.nan) -> None:
        spec = spec or {"name": "no_decay", "start_val": default, "end_val": default}
        self.fn = SCHEDULES[spec["name"]]
        self.start_val = float(spec["start_val"])
        self.end_val = float(spec.get("end_val", self.start_val))
        if spec["name"] == "no_decay":
            self.end_val = self.start_val
        self.start_step = int(spec.get("start_step", 0) or 0)
        self.end_step = int(spec.get("end_step", 0) or 0)
        self.val = self.start_val

    def update(self, frame: int, eval_mode: bool = False) -> float:
        if eval_mode:
            self.val = self.end_val
        else:
            self.val = self.fn(self.start_val, self.end_val, self.start_step, self.end_step, frame)
        return self.val
