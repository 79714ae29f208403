"""The diagnostics a training call adds to the metrics row, checked by hand: PPO's approx_kl and
clip_frac, explained_variance of a critic that explains nothing, PPO's averages over its
minibatches, and one read from the device per training call."""

import math
from typing import Any

import pytest
import torch
from conftest import env_of, make_algorithm, make_spec

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.ppo import approx_kl, clip_frac

EPS = 0.2


def build(algo: str, num_envs: int = 2, **algorithm: Any) -> Algorithm:
    spec = make_spec(algo, num_envs=num_envs)
    spec["agent"]["algorithm"].update(algorithm)
    return make_algorithm(spec)


def fill(algo: Algorithm) -> None:
    """Act in the env until the memory holds a batch, without training."""
    env = env_of(algo)
    env.reset()
    while not algo.memory.ready():
        algo.memory.add(env.step(algo.act(env.obs)))


def zero_critic(algo: Algorithm) -> None:
    """V(s) = 0 for every s."""
    with torch.no_grad():
        for p in algo.nets.critic.parameters():
            p.zero_()


def test_approx_kl_and_clip_frac_hand_computed() -> None:
    ratios = torch.tensor([1.0, 2.0, 0.5, 1.1])
    log_ratios = ratios.log()
    # (r - 1) - log r per sample: 0, 1 - ln 2, -0.5 + ln 2, 0.1 - ln 1.1
    assert approx_kl(ratios, log_ratios).item() == pytest.approx((0.6 - math.log(1.1)) / 4)
    # clipped to [0.8, 1.2]: 2 and 0.5 move, 1 and 1.1 do not
    assert clip_frac(ratios, ratios.clamp(1 - EPS, 1 + EPS)).item() == 0.5


def test_ppo_first_step_and_a_critic_that_explains_nothing() -> None:
    """One epoch, one minibatch of the whole batch: its step starts from pi = pi_old, so every
    ratio is 1 (nothing clipped, KL 0). With V = 0, V_target - V = V_target: explained
    variance 1 - Var[V_target] / Var[V_target] = 0."""
    algo = build("ppo", time_horizon=16, minibatch_size=32, training_epoch=1)
    fill(algo)
    zero_critic(algo)
    algo.train()
    assert algo.stats["clip_frac"] == 0.0
    assert algo.stats["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert algo.stats["explained_variance"] == 0.0


def test_a2c_explained_variance_of_a_critic_that_explains_nothing() -> None:
    algo = build("a2c_gae")
    fill(algo)
    zero_critic(algo)
    algo.train()
    assert algo.stats["explained_variance"] == 0.0
    assert math.isfinite(algo.stats["policy_loss"]) and math.isfinite(algo.stats["value_loss"])


def row_index(table: torch.Tensor, rows: torch.Tensor) -> list[int]:
    """Where each of `rows` is in `table` (CartPole observations are distinct floats)."""
    return [int((table == row).all(1).nonzero()[0]) for row in rows]


def test_ppo_ratio_diagnostics_cover_every_minibatch_sample() -> None:
    """2 epochs of 2 minibatches (4 and 6 of a batch of 10), a large lr so that later
    minibatches clip: approx_kl and clip_frac are over the 20 samples the minibatches trained
    on, recomputed here from each minibatch's log-probs and the old ones."""
    torch.manual_seed(0)
    algo = build("ppo", num_envs=1, time_horizon=10, minibatch_size=4, training_epoch=2)
    for optim in algo.optims:
        for group in optim.param_groups:
            group["lr"] = 0.1
    fill(algo)
    forwards: list[list[torch.Tensor]] = []  # [obs, log_probs]: the old pass, then minibatches
    pdparam_value, log_prob_entropy = algo.nets.pdparam_value, algo.log_prob_entropy
    log_prob = algo.log_prob  # the old pass's (no entropy)

    def recording_pdparam_value(obs: torch.Tensor) -> Any:
        forwards.append([obs])
        return pdparam_value(obs)

    def recording_log_prob_entropy(*args: Any) -> Any:
        log_probs, entropy = log_prob_entropy(*args)
        forwards[-1].append(log_probs.detach())
        return log_probs, entropy

    def recording_log_prob(*args: Any) -> Any:
        log_probs = log_prob(*args)
        forwards[-1].append(log_probs.detach())
        return log_probs

    algo.nets.pdparam_value = recording_pdparam_value
    algo.log_prob_entropy = recording_log_prob_entropy
    algo.log_prob = recording_log_prob
    algo.train()
    (old_obs, old_log_probs), *minibatches = forwards
    assert [len(obs) for obs, _ in minibatches] == [4, 6, 4, 6]
    log_ratios = torch.cat(
        [log_probs - old_log_probs[row_index(old_obs, obs)] for obs, log_probs in minibatches]
    )
    ratios = log_ratios.exp()
    kl = ((ratios - 1) - log_ratios).mean().item()
    assert algo.stats["approx_kl"] == pytest.approx(kl, rel=1e-5)
    assert algo.stats["clip_frac"] == ((ratios - 1).abs() > EPS).float().mean().item() > 0.0


@pytest.mark.parametrize("algo", ["reinforce", "a2c_gae", "ppo"])
def test_one_host_read_per_training_call(algo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loss and every diagnostic come back from the device together (one .tolist(), no
    .item()); the training loop's other reads are the optimizer's finiteness checks."""
    model = build(algo)
    fill(model)
    reads: list[str] = []
    item, tolist = torch.Tensor.item, torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append("item") or item(t))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append("tolist") or tolist(t))
    model.train()
    assert reads == ["tolist"]
    assert all(math.isfinite(v) for v in model.stats.values())
