"""The tanh-squashed Gaussian (action_pdtype NormalTanh) of the policy-gradient algorithms."""

import math

import numpy as np
import pytest
import torch
from conftest import env_of, make_algorithm, make_spec

from slm_lab.lib import distribution as D


def normal_mass(lo: float, hi: float, mean: float, std: float) -> float:
    """P(lo <= X < hi) for X ~ N(mean, std), from erfc on the side of the mean the interval
    lies on, so a tail's small mass keeps its digits."""
    z_lo, z_hi = (lo - mean) / (std * math.sqrt(2)), (hi - mean) / (std * math.sqrt(2))
    if z_lo >= 0:
        return 0.5 * (math.erfc(z_lo) - math.erfc(z_hi))
    return 0.5 * (math.erfc(-z_hi) - math.erfc(-z_lo))


@pytest.mark.parametrize(("mean", "log_std"), [(0.0, 0.0), (0.8, -1.0), (-1.5, 0.5)])
@pytest.mark.parametrize("a", [-0.95, -0.3, 0.0, 0.5, 0.99])
def test_log_prob_is_the_density_of_tanh_of_a_gaussian(
    mean: float, log_std: float, a: float
) -> None:
    """Against a numerical reference: P(a - h/2 <= A < a + h/2) / h, the Gaussian's mass
    between atanh of the interval's ends, h small (the log-prob takes a's pre-tanh u)."""
    h, std = 1e-6, math.exp(log_std)
    density = normal_mass(math.atanh(a - h / 2), math.atanh(a + h / 2), mean, std) / h
    got = D.normal_tanh_log_prob(
        torch.tensor([[mean]], dtype=torch.float64),
        torch.tensor([[log_std]], dtype=torch.float64),
        torch.tensor([[math.atanh(a)]], dtype=torch.float64),
    )
    assert got.item() == pytest.approx(math.log(density), abs=1e-4)


def test_log_prob_sums_over_action_dims_and_stays_finite_where_tanh_saturates() -> None:
    mean, log_std = torch.tensor([[0.3, -0.2]]), torch.tensor([[-0.5, 0.1]])
    one = [D.normal_tanh_log_prob(mean[:, i : i + 1], log_std[:, i : i + 1], torch.tensor([[x]])) for i, x in enumerate((0.4, -0.7))]  # fmt: skip
    both = D.normal_tanh_log_prob(mean, log_std, torch.tensor([[0.4, -0.7]]))
    assert both.item() == pytest.approx((one[0] + one[1]).item(), abs=1e-5)
    # u = +-30: tanh rounds to +-1, log(1 - tanh(u)^2) = 2 (log 2 - 30) in the log-det's stable form
    edge = D.normal_tanh_log_prob(
        torch.tensor([[30.0]]), torch.tensor([[0.0]]), torch.tensor([[30.0]])
    )
    assert edge.item() == pytest.approx(
        -0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - 30), rel=1e-6
    )


def test_samples_are_inside_the_bounds_with_the_squashed_gaussians_masses() -> None:
    """Each of 20 bins of (-1, 1) gets the mass N(0.5, e^-0.3) has between atanh of its ends."""
    torch.manual_seed(0)
    draws = 200_000
    actions = torch.tanh(D.normal_sample(torch.full((draws, 1), 0.5), torch.full((draws, 1), -0.3)))
    assert actions.abs().max() < 1
    counts, edges = np.histogram(actions.numpy(), bins=20, range=(-1, 1))
    std = math.exp(-0.3)
    ends = [math.atanh(max(min(float(e), 1 - 1e-12), -1 + 1e-12)) for e in edges]
    masses = [normal_mass(lo, hi, 0.5, std) for lo, hi in zip(ends[:-1], ends[1:], strict=True)]
    np.testing.assert_allclose(counts / draws, masses, atol=0.004)  # 3.5 standard errors


def squashed_entropy(mean: float, log_std: float) -> float:
    """H of tanh(N(mean, e^log_std)) by Gauss-Hermite quadrature: H[N] + E[log(1 - tanh(u)^2)]."""
    x, w = np.polynomial.hermite_e.hermegauss(200)
    u = mean + math.exp(log_std) * x
    log_det = 2.0 * (math.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))
    return 0.5 + 0.5 * math.log(2 * math.pi) + log_std + float(w @ log_det / w.sum())


@pytest.mark.parametrize(("mean", "log_std"), [(0.0, 0.0), (0.8, -1.0), (-2.5, 0.5)])
def test_entropy_estimate_and_its_gradient_are_the_squashed_gaussians(
    mean: float, log_std: float
) -> None:
    """The mean of 400k one-draw estimates is H (quadrature; also the mean of -log pi(a) over 1M
    sampled actions, which ties it to the density tested above), and its gradient is H's
    (central differences of the quadrature): the bonus widens a narrow policy and pulls a mean far
    out back from where tanh saturates."""
    torch.manual_seed(0)
    u = D.normal_sample(torch.full((1_000_000, 1), mean), torch.full((1_000_000, 1), log_std))
    mean_neg_log_prob = -D.normal_tanh_log_prob(torch.tensor([[mean]]), torch.tensor([[log_std]]), u).mean()  # fmt: skip
    assert mean_neg_log_prob.item() == pytest.approx(squashed_entropy(mean, log_std), abs=0.01)
    m = torch.full((400_000, 1), mean, dtype=torch.float64, requires_grad=True)
    s = torch.full((400_000, 1), log_std, dtype=torch.float64, requires_grad=True)
    estimate = D.normal_tanh_entropy(m, s).mean()
    estimate.backward()
    h = 1e-5
    d_mean = (squashed_entropy(mean + h, log_std) - squashed_entropy(mean - h, log_std)) / (2 * h)
    d_log_std = (squashed_entropy(mean, log_std + h) - squashed_entropy(mean, log_std - h)) / (
        2 * h
    )
    assert estimate.item() == pytest.approx(squashed_entropy(mean, log_std), abs=0.01)
    assert m.grad.sum().item() == pytest.approx(d_mean, abs=0.02)
    assert s.grad.sum().item() == pytest.approx(d_log_std, abs=0.02)


def test_entropy_sums_over_action_dims_with_a_shared_log_std() -> None:
    """A state-independent log_std (one per action dim) broadcasts over the batch: one estimate
    per row, each dim's Gaussian entropy plus its log-det at the row's draw, summed."""
    mean, log_std = torch.tensor([[0.3, -2.0], [1.0, 0.5]]), torch.tensor([-0.5, 0.2])
    torch.manual_seed(1)
    got = D.normal_tanh_entropy(mean, log_std)
    torch.manual_seed(1)
    u = mean + log_std.exp() * torch.randn(2, 2)
    per_dim = 0.5 + 0.5 * math.log(2 * math.pi) + log_std + torch.log(1 - torch.tanh(u).pow(2))
    assert got.shape == (2,)
    torch.testing.assert_close(got, per_dim.sum(-1))


def test_ppo_with_normal_tanh_acts_inside_the_bounds_and_stores_the_pre_tanh_sample() -> None:
    """The env gets tanh(u); the memory gets u, the sample the log-probs of training score."""
    spec = make_spec("ppo", env="Pendulum-v1", max_frame=256)
    spec["agent"]["algorithm"]["action_pdtype"] = "NormalTanh"
    algo = make_algorithm(spec)
    env = env_of(algo)
    env.reset()
    actions = algo.act(env.obs)
    u = algo.acted_u
    assert actions.shape == u.shape == (2, 1) and np.abs(actions).max() < 1
    np.testing.assert_array_equal(actions, np.tanh(u))
    t = env.step(actions)
    np.testing.assert_array_equal(t.actions, actions)
    algo.update(t)
    np.testing.assert_array_equal(algo.memory.data["actions"][0], u)
    assert algo.acted_u is None
    obs = torch.as_tensor(env.obs, dtype=torch.float32)
    mean, log_std = algo.nets.pdparam(obs)
    log_prob, entropy = algo.log_prob_entropy(mean, log_std, torch.as_tensor(u))
    assert entropy.shape == log_prob.shape == (2,)
    assert torch.isfinite(log_prob).all() and torch.isfinite(entropy).all()
    algo.action_policy = "greedy"
    with torch.no_grad():
        np.testing.assert_allclose(algo.act(env.obs), torch.tanh(mean).numpy(), rtol=1e-6)


def test_a_saturated_normal_tanh_policy_stores_samples_near_its_mean() -> None:
    """A mean of 12 (std e^-2): float32 tanh rounds every action to exactly 1, yet the memory
    holds u within a few stds of the mean, where its log-prob is that of an ordinary draw (an
    action's atanh, clamped short of 1, would sit at 7.25: 35 stds away, a log-prob of -600)."""
    spec = make_spec("ppo", env="Pendulum-v1", max_frame=256, num_envs=4)
    spec["agent"]["algorithm"]["action_pdtype"] = "NormalTanh"
    algo = make_algorithm(spec)
    env = env_of(algo)
    env.reset()
    mean, log_std = torch.full((4, 1), 12.0), torch.full((4, 1), -2.0)
    algo.nets.pdparam = lambda obs: (mean, log_std)
    torch.manual_seed(0)
    actions = algo.act(env.obs)
    assert (actions == 1.0).all()
    algo.update(env.step(actions))
    stored = torch.as_tensor(algo.memory.data["actions"][0])
    assert ((stored - mean).abs() < 4 * log_std.exp()).all()
    log_prob = algo.log_prob(mean, log_std, stored)
    assert (log_prob > D.normal_log_prob(mean, log_std, mean) - 8 - D.tanh_log_det(stored)).all()
