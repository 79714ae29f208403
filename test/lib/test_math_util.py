"""Returns, GAE and n-step returns on tiny [T, N] batches, checked against hand-computed values;
explained variance, running statistics and the percentile scale.

Shared batch (T=3, N=2, gamma=0.9):
- env 0: rewards 1, 1, 1; the episode *terminates* at t=1 (V of that terminal obs, 9.0, must be
  ignored); t=2 is cut off by the batch end and bootstraps from next_values[2] = 0.2.
- env 1: rewards 2, 2, 2; the episode is *truncated* at t=1 and bootstraps from the value of its
  true final observation, next_values[1] = 5.0.
"""

import math

import numpy as np
import pytest
import torch

from slm_lab.lib.math_util import (
    PercentileScale,
    RunningMeanStd,
    calc_gaes,
    calc_nstep_returns,
    calc_returns,
    explained_variance,
)

GAMMA, LAM = 0.9, 0.8


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


REWARDS = t([[1, 2], [1, 2], [1, 2]])
VALUES = t([[0.5, 1.0], [0.4, 1.0], [0.3, 1.0]])
NEXT_VALUES = t([[0.4, 1.0], [9.0, 5.0], [0.2, 1.0]])
TERMINATEDS = torch.tensor([[False, False], [True, False], [False, False]])
DONES = torch.tensor([[False, False], [True, True], [False, False]])


def test_calc_returns_resets_at_episode_end() -> None:
    rewards = t([[1, 2], [3, 4], [5, 6]])
    dones = torch.tensor([[False, False], [True, False], [False, False]])
    # env 0: R2 = 5; R1 = 3 (done cuts); R0 = 1 + 0.9 * 3 = 3.7
    # env 1: R2 = 6; R1 = 4 + 0.9 * 6 = 9.4; R0 = 2 + 0.9 * 9.4 = 10.46
    expected = t([[3.7, 10.46], [3.0, 9.4], [5.0, 6.0]])
    torch.testing.assert_close(calc_returns(rewards, dones, GAMMA), expected)


def test_calc_gaes_termination_truncation_and_batch_end() -> None:
    # deltas env 0: 1 + .9*.4 - .5 = .86 | 1 - .4 = .6 (terminal: no bootstrap) | 1 + .9*.2 - .3 = .88
    # deltas env 1: 2 + .9 - 1 = 1.9 | 2 + .9*5 - 1 = 5.5 (truncated: bootstraps) | 1.9
    # A2 = delta2 (batch end); A1 = delta1 (episode end cuts); A0 = delta0 + .72 * A1
    expected = t([[0.86 + 0.72 * 0.6, 1.9 + 0.72 * 5.5], [0.6, 5.5], [0.88, 1.9]])
    advs = calc_gaes(REWARDS, TERMINATEDS, DONES, VALUES, NEXT_VALUES, GAMMA, LAM)
    torch.testing.assert_close(advs, expected)
    torch.testing.assert_close(advs[0], t([[1.292, 5.86]])[0])


def test_calc_gaes_lam_one_without_dones_is_bootstrapped_return_minus_value() -> None:
    rewards, values = t([[1], [2]]), t([[0.5], [0.7]])
    next_values = t([[0.7], [3.0]])
    no = torch.zeros(2, 1, dtype=torch.bool)
    advs = calc_gaes(rewards, no, no, values, next_values, GAMMA, 1.0)
    # A1 = 2 + .9*3 - .7 = 4.0; A0 = (1 + .9*.7 - .5) + .9 * 4.0 = 4.73
    torch.testing.assert_close(advs, t([[4.73], [4.0]]))


def test_calc_nstep_returns_two_step() -> None:
    # env 0: R0 = 1 + .9*1 (terminated at t=1, no bootstrap) = 1.9; R1 = 1; R2 = 1 + .9*.2 = 1.18
    # env 1: R0 = 2 + .9*2 + .81*5 = 7.85; R1 = 2 + .9*5 = 6.5; R2 = 2 + .9*1 = 2.9
    expected = t([[1.9, 7.85], [1.0, 6.5], [1.18, 2.9]])
    returns = calc_nstep_returns(REWARDS, TERMINATEDS, DONES, NEXT_VALUES, GAMMA, 2)
    torch.testing.assert_close(returns, expected)


def test_calc_nstep_returns_one_step_is_td_target() -> None:
    returns = calc_nstep_returns(REWARDS, TERMINATEDS, DONES, NEXT_VALUES, GAMMA, 1)
    expected = t(
        [[1 + 0.9 * 0.4, 2 + 0.9 * 1.0], [1.0, 2 + 0.9 * 5.0], [1 + 0.9 * 0.2, 2 + 0.9 * 1.0]]
    )
    torch.testing.assert_close(returns, expected)


def test_calc_nstep_returns_full_window_bootstraps_from_value_n_steps_ahead() -> None:
    rewards = t([[1], [2], [3], [4]])
    next_values = t([[10], [20], [30], [40]])
    no = torch.zeros(4, 1, dtype=torch.bool)
    returns = calc_nstep_returns(rewards, no, no, next_values, GAMMA, 2)
    # R0 = 1 + .9*2 + .81*V(s2)=20 -> 19; R1 = 2 + 2.7 + .81*30 = 29; R2 = 3 + 3.6 + .81*40 = 39
    # R3: only one step left in the batch: 4 + .9*40 = 40
    torch.testing.assert_close(returns, t([[19.0], [29.0], [39.0], [40.0]]))


def test_running_mean_std_matches_numpy_on_concatenated_batches() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=n) for n in (5, 17, 1, 40)]
    rms = RunningMeanStd()
    for b in batches:
        rms.update(torch.as_tensor(b))
    allx = np.concatenate(batches)
    # the initial count (1e-4) of the prior mean 0 / var 1 biases the result by ~1e-4 / 63
    assert rms.mean == pytest.approx(allx.mean(), abs=1e-4)
    assert rms.var == pytest.approx(allx.var(), abs=1e-4)
    assert rms.std == pytest.approx(allx.std(), abs=1e-4)
    assert rms.count == pytest.approx(63, abs=1e-3)


def test_running_mean_std_state_round_trip() -> None:
    rms = RunningMeanStd()
    rms.update(torch.tensor([1.0, 2.0, 6.0]))
    other = RunningMeanStd()
    other.load_state_dict(rms.state_dict())
    assert (other.mean, other.var, other.count) == (rms.mean, rms.var, rms.count)


# five advantages 1000 apart: torch.quantile interpolates linearly between order statistics, so
# P5 sits at position 0.05 * 4 = 0.2 (-1000 + 0.2 * 1000 = -800) and P95 at 3.8 (2800)
ADVS = torch.tensor([-1000.0, 0.0, 1000.0, 2000.0, 3000.0])
DECAY = 0.99


def test_percentile_scale_is_the_ema_of_p5_and_p95() -> None:
    torch.testing.assert_close(
        torch.quantile(ADVS, torch.tensor([0.05, 0.95])), torch.tensor([-800.0, 2800.0])
    )
    scale = PercentileScale(DECAY, torch.device("cpu"))
    scale.update(ADVS)
    # the EMAs start at 0: P5 = 0.01 * -800 = -8, P95 = 0.01 * 2800 = 28; scale 36
    torch.testing.assert_close(scale.percentiles, torch.tensor([-8.0, 28.0]))
    torch.testing.assert_close(scale.scale(ADVS), ADVS / 36.0)  # divided, not centered
    scale.update(ADVS)
    # P5 = 0.99 * -8 + 0.01 * -800 = -15.92, P95 = 0.99 * 28 + 0.01 * 2800 = 55.72; scale 71.64
    torch.testing.assert_close(scale.percentiles, torch.tensor([-15.92, 55.72]))
    torch.testing.assert_close(scale.scale(ADVS), ADVS / 71.64)


def test_percentile_scale_never_enlarges() -> None:
    """A spread P95 - P5 under 1 leaves advantages as they are: small ones are not amplified."""
    scale = PercentileScale(DECAY, torch.device("cpu"))
    small = torch.tensor([-30.0, 0.0, 30.0])  # P5 -27, P95 27: EMAs -0.27 and 0.27
    scale.update(small)
    torch.testing.assert_close(scale.percentiles, torch.tensor([-0.27, 0.27]))
    assert torch.equal(scale.scale(small), small)


def test_percentile_scale_state_round_trip() -> None:
    scale = PercentileScale(DECAY, torch.device("cpu"))
    scale.update(ADVS)
    other = PercentileScale(DECAY, torch.device("cpu"))
    other.load_state_dict(scale.state_dict())
    assert torch.equal(other.percentiles, scale.percentiles)
    scale.update(ADVS)  # the saved state is a copy, not a view of the live one
    assert not torch.equal(other.percentiles, scale.percentiles)


def test_explained_variance_hand_computed() -> None:
    v_targets = torch.tensor([1.0, 2.0, 3.0, 4.0])
    # residuals [0, 0, 0, -1]: sample var 0.75 / 3 = 0.25; targets: 5 / 3
    assert explained_variance(torch.tensor([1.0, 2.0, 3.0, 5.0]), v_targets).item() == (
        pytest.approx(1 - 0.25 / (5 / 3))
    )
    assert explained_variance(v_targets, v_targets).item() == 1.0  # a perfect critic
    assert explained_variance(torch.full((4,), 7.0), v_targets).item() == 0.0  # a constant one
    assert explained_variance(-v_targets, v_targets).item() == pytest.approx(-3.0)  # 1 - 4


def test_explained_variance_of_constant_targets_is_nan() -> None:
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)).item())
