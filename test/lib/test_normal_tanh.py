"""The tanh-squashed Gaussian (action_pdtype NormalTanh) of the policy-gradient algorithms."""

import math
from typing import Any

import numpy as np
import pytest
import torch
from conftest import env_of, make_algorithm, make_spec

from slm_lab.agent.algorithm.ppo import PPO
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
    # u = 30: tanh rounds to 1, log(1 - tanh(u)^2) = 2 (log 2 - 30) in the log-det's stable form
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


def normal_tanh_ppo(algo: str = "ppo", **spec_kwargs: Any) -> PPO:
    spec = make_spec(algo, env="Pendulum-v1", **spec_kwargs)
    spec["agent"]["algorithm"]["action_pdtype"] = "NormalTanh"
    spec["agent"]["net"]["shared"] = True  # PPO keeps the log-probs its acting forward took
    spec["agent"]["net"]["log_std_init"] = -2.0
    return make_algorithm(spec)


def test_ppo_with_normal_tanh_acts_inside_the_bounds_and_stores_the_pre_tanh_sample() -> None:
    """The env gets tanh(u); the memory gets u, and the log-prob acting kept for the row is
    that of u (what training compares its new log-probs with)."""
    algo = normal_tanh_ppo()
    assert algo.keep_acted
    env = env_of(algo)
    env.reset()
    obs = torch.as_tensor(env.obs, dtype=torch.float32)
    actions = algo.act(env.obs)
    u = algo.acted_u
    assert actions.shape == u.shape == (2, 1) and np.abs(actions).max() < 1
    np.testing.assert_array_equal(actions, np.tanh(u))
    algo.update(env.step(actions))
    np.testing.assert_array_equal(algo.memory.data["actions"][0], u)
    assert algo.acted_u is None
    with torch.no_grad():
        mean, log_std = algo.nets.pdparam(obs)
        torch.testing.assert_close(
            algo.kept_log_probs[0], algo.log_prob(mean, log_std, torch.as_tensor(u))
        )
        algo.action_policy = "greedy"
        mean, _ = algo.nets.pdparam(torch.as_tensor(env.obs, dtype=torch.float32))
        np.testing.assert_allclose(algo.act(env.obs), torch.tanh(mean).numpy(), rtol=1e-6)


def test_an_update_without_its_act_is_refused() -> None:
    algo = normal_tanh_ppo()
    env = env_of(algo)
    env.reset()
    with pytest.raises(RuntimeError, match="without an act"):
        algo.update(env.step(np.zeros((2, 1), dtype=np.float32)))


def test_a_saturated_normal_tanh_policy_trains_on_samples_near_its_mean() -> None:
    """A mean of 12 (std e^-2): float32 tanh rounds every action to exactly 1, yet the memory
    holds u within a few stds of the mean (an action's atanh, clamped short of 1, would sit at
    7.25: 35 stds away), and a PPO update on that batch stays finite with a small KL."""
    algo = normal_tanh_ppo(num_envs=4)
    mean_head = algo.nets.net.heads[0]
    with torch.no_grad():
        mean_head.weight.zero_()
        mean_head.bias.fill_(12.0)
    env = env_of(algo)
    env.reset()
    algo.to_train = lambda: False
    while not algo.memory.ready():
        actions = algo.act(env.obs)
        assert (actions == 1.0).all()
        algo.update(env.step(actions))
    stored = torch.as_tensor(algo.memory.data["actions"])
    assert ((stored - 12.0).abs() < 5 * math.exp(-2.0)).all()
    assert math.isfinite(algo.train())
    assert 0 <= algo.stats["approx_kl"] < 0.1
    assert all(torch.isfinite(p).all() for p in algo.nets.parameters())


def test_ppo_sil_with_normal_tanh_imitates_the_pre_tanh_sample() -> None:
    """Self-imitation's replay holds the same u as PPO's memory, and scores it with log_prob."""
    algo = normal_tanh_ppo("ppo_sil")
    env = env_of(algo)
    env.reset()
    actions = algo.act(env.obs)
    u = algo.acted_u
    algo.update(env.step(actions))
    np.testing.assert_array_equal(algo.sil.memory.stage["actions"][:, 0], u)
