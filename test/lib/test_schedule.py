"""Schedules at start, middle and end steps, with exact expected values."""

import pytest
from conftest import schedule

from slm_lab.lib.config import SpecError
from slm_lab.lib.schedule import VarScheduler, linear_decay, no_decay, periodic_decay, rate_decay

MAX_FRAME = 10**6  # a run's env.max_frame; absolute end_steps ignore it


@pytest.mark.parametrize("step", [0, 50, 100, 10_000])
def test_no_decay_is_constant(step: int) -> None:
    assert no_decay(0.3, 0.0, 0, 100, step) == 0.3


@pytest.mark.parametrize(
    ("step", "expected"),
    [(0, 1.0), (100, 1.0), (125, 0.85), (150, 0.7), (200, 0.4), (1000, 0.4)],
)
def test_linear_decay(step: int, expected: float) -> None:
    assert linear_decay(1.0, 0.4, 100, 200, step) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("step", "expected"),
    # period = (200 - 0) / 20 = 10 frames; value = 1.0 * 0.9 ** (periods elapsed), floored at end_val
    [(0, 1.0), (9, 1.0), (25, 0.81), (100, 0.9**10), (199, 0.9**19), (200, 0.1), (500, 0.1)],
)
def test_rate_decay(step: int, expected: float) -> None:
    assert rate_decay(1.0, 0.1, 0, 200, step) == pytest.approx(expected)


def test_rate_decay_floors_at_end_val_before_end_step() -> None:
    assert rate_decay(1.0, 0.5, 0, 200, 100) == 0.5  # 0.9**10 = 0.35 < 0.5


@pytest.mark.parametrize(
    ("step", "expected"),
    # frac = step / 100; value = (1 - frac) * (1 + cos(2 pi * 10 * frac)) / 2 between 1.0 and 0.0
    [(0, 1.0), (5, 0.0), (10, 0.9), (50, 0.5), (75, 0.0), (100, 0.0)],
)
def test_periodic_decay(step: int, expected: float) -> None:
    assert periodic_decay(1.0, 0.0, 0, 100, step) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", ["linear_decay", "rate_decay", "periodic_decay"])
def test_end_val_zero_is_exactly_zero_at_and_after_end_step(name: str) -> None:
    sched = VarScheduler(
        schedule(
            {"name": name, "start_val": 0.5, "end_val": 0.0, "start_step": 100, "end_step": 1000}
        ),
        MAX_FRAME,
    )
    assert sched.update(0) == 0.5
    assert 0.0 < sched.update(999) < 0.5
    for step in (1000, 1001, 10**9):
        assert sched.update(step) == 0.0


def test_var_scheduler_reads_float_steps_from_spec() -> None:
    sched = VarScheduler(
        schedule(
            {
                "name": "linear_decay",
                "start_val": 1.0,
                "end_val": 0.0,
                "start_step": 0,
                "end_step": 1e3,
            }
        ),
        MAX_FRAME,
    )
    assert sched.update(500) == pytest.approx(0.5)


def test_var_scheduler_eval_mode_returns_end_val() -> None:
    sched = VarScheduler(
        schedule(
            {
                "name": "linear_decay",
                "start_val": 1.0,
                "end_val": 0.05,
                "start_step": 0,
                "end_step": 1000,
            }
        ),
        MAX_FRAME,
    )
    assert sched.update(0) == 1.0
    assert sched.update(0, eval_mode=True) == 0.05
    assert sched.val == 0.05


def test_var_scheduler_no_decay_ignores_end_val() -> None:
    sched = VarScheduler(
        schedule(
            {"name": "no_decay", "start_val": 0.2, "end_val": 0.9, "start_step": 0, "end_step": 10}
        ),
        MAX_FRAME,
    )
    assert sched.update(5) == 0.2
    assert sched.update(5, eval_mode=True) == 0.2


def test_var_scheduler_without_spec_uses_default() -> None:
    assert VarScheduler(None, 10**6, default=0.2).update(123) == 0.2


@pytest.mark.parametrize("max_frame", [8000, 200_000, 4 * 10**5])
def test_end_frac_follows_the_runs_max_frame(max_frame: int) -> None:
    spec = {"name": "linear_decay", "start_val": 1.0, "end_val": 0.02, "end_frac": 0.1}
    sched = VarScheduler(schedule(spec), max_frame)
    assert sched.end_step == max_frame // 10
    assert sched.update(max_frame // 20) == pytest.approx(0.51)
    assert sched.update(max_frame // 10) == 0.02


def test_end_frac_rounds_to_the_frame_an_absolute_spec_named() -> None:
    """A fraction written to 6 digits gives the absolute frame it replaces (20000 of 3e5)."""
    spec = {"name": "linear_decay", "start_val": 1.0, "end_val": 0.02, "end_frac": 0.066667}
    assert VarScheduler(schedule(spec), 300_000).end_step == 20_000


def test_end_step_and_end_frac_together_are_refused() -> None:
    with pytest.raises(
        SpecError,
        match="end_frac: set end_step .* or end_frac .*, not both; to give end_step, also set schedule.end_frac=null",
    ):
        schedule({"name": "linear_decay", "start_val": 1.0, "end_step": 100, "end_frac": 0.5})
