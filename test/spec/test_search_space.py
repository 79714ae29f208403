"""The search block's distributions (Ray-free): the values validation tries are values the
distribution draws, and bounds Ray Tune refuses are one line naming the leaf."""

from typing import Any

import pytest

from slm_lab.spec import search_space
from slm_lab.spec.spec_util import SpecError

X = "agent.algorithm.x"


@pytest.mark.parametrize(
    ("dist", "args", "probes"),
    [
        ("uniform", [0, 1], [0, 1, search_space.NON_INTEGRAL_FRACTION]),
        ("quniform", [0, 1, 0.25], [0.0, 0.25, 1.0]),  # 0.25: a non-integral draw
        ("quniform", [0, 1, 1], [0.0, 1.0]),
        ("qloguniform", [1e-3, 1e-2, 1e-3], [1e-3, 2e-3, 1e-2]),
        ("randn", [0.5, 0.1], [0.5, 0.5 + 0.1 * search_space.NON_INTEGRAL_FRACTION]),
        ("qrandn", [0.2, 0.05, 0.01], [0.2, 0.21]),
        ("qrandn", [3.3, 1, 1], [3.0, 4.0]),  # the mean, rounded as its draws are
        ("randint", [1, 4], [1, 3]),
        ("qrandint", [0, 10, 1], [0, 9]),  # q = 1: hi excluded, as randint
        ("qrandint", [0, 10, 5], [0, 10]),
        ("qrandint", [3, 20, 5], [5, 20]),  # bounds off the grid: the multiples inside
        ("lograndint", [1, 64], [1, 63]),
        ("qlograndint", [1, 100, 10], [10, 100]),  # the smallest draw is 10, not 1 nor 0
        ("qlograndint", [8, 64, 8], [8, 64]),
        ("choice", [[16], None, "x"], [[16], None, "x"]),
    ],
)
def test_probes_are_the_smallest_and_largest_draws(
    dist: str, args: list[Any], probes: list
) -> None:
    [param] = search_space.parse({f"{X}__{dist}": args})
    assert param.probes() == probes


@pytest.mark.parametrize(
    ("dist", "args", "message"),
    [
        ("quniform", [0.1, 0.9, 0.2], "lo 0.1 is not a multiple of q 0.2, which Ray Tune refuses; use 0.0 or 0.2"),
        ("quniform", [0, 0.95, 0.1], "hi 0.95 is not a multiple of q 0.1, which Ray Tune refuses; use 0.9 or 1.0"),
        ("qloguniform", [1e-5, 1e-2, 1e-4], "lo 1e-05 is not a multiple of q 0.0001, which Ray Tune refuses; use 0.0001"),
        ("qrandint", [1, 9, 10], "no multiple of q 10 lies in [1, 9], so there is nothing to draw; widen the bounds or use a smaller q"),
        ("qlograndint", [11, 19, 10], "no multiple of q 10 lies in [11, 19], so there is nothing to draw; widen the bounds or use a smaller q"),
    ],
)  # fmt: skip
def test_bounds_ray_tune_refuses_are_one_line(dist: str, args: list[Any], message: str) -> None:
    with pytest.raises(SpecError) as e:
        search_space.parse({f"{X}__{dist}": args})
    assert str(e.value) == f"search.{X}__{dist}: {message}"
