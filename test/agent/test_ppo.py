"""PPO's minibatches (the leftover merged into the last one) and its advantage normalization."""

from typing import Any

import pytest
import torch
from conftest import make_algorithm, make_spec

from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.algorithm.ppo import PPO, minibatch_idxs

NO_ENTROPY = {"name": "no_decay", "start_val": 0.0, "end_val": 0.0, "start_step": 0, "end_step": 0}


def build(num_envs: int, **algorithm: Any) -> PPO:
    spec = make_spec("ppo", num_envs=num_envs)
    spec["agent"]["algorithm"].update(algorithm)
    return make_algorithm(spec)


def fill(algo: PPO) -> None:
    """Act in the env until the memory holds a batch, without training."""
    env = algo.env
    env.reset()
    while not algo.memory.ready():
        algo.memory.add(env.step(algo.act(env.obs)))


def record_forwards(algo: PPO) -> list[torch.Tensor]:
    """The observations of every pdparam_value call (the old pass, then one per minibatch)."""
    seen: list[torch.Tensor] = []
    pdparam_value = algo.nets.pdparam_value

    def recording(obs: torch.Tensor) -> Any:
        seen.append(obs.clone())
        return pdparam_value(obs)

    algo.nets.pdparam_value = recording
    return seen


@pytest.mark.parametrize(
    ("batch_size", "minibatch_size", "sizes"),
    [
        (10, 4, [4, 6]),  # leftover 2 joins the last minibatch
        (5, 4, [5]),  # leftover 1: one minibatch of the whole batch
        (11, 4, [4, 7]),
        (8, 4, [4, 4]),
        (12, 4, [4, 4, 4]),
        (4, 4, [4]),
    ],
)
def test_minibatch_idxs_merge_the_leftover(
    batch_size: int, minibatch_size: int, sizes: list[int]
) -> None:
    idxs = minibatch_idxs(batch_size, minibatch_size, torch.device("cpu"))
    assert [len(i) for i in idxs] == sizes
    assert sorted(torch.cat(idxs).tolist()) == list(range(batch_size))  # each sample once


def test_every_epoch_covers_the_batch_in_full_minibatches() -> None:
    algo = build(num_envs=1, time_horizon=10, minibatch_size=4, training_epoch=2)
    fill(algo)
    seen = record_forwards(algo)
    loss = algo.train()
    # the old-policy pass over the batch of 10, then per epoch a minibatch of 4 and one of 4 + 2
    assert [len(obs) for obs in seen] == [10, 4, 6, 4, 6]
    batch_rows = sorted(map(tuple, seen[0].tolist()))
    for epoch in (seen[1:3], seen[3:5]):
        assert sorted(map(tuple, torch.cat(epoch).tolist())) == batch_rows
    assert algo.clock.opt_step == 4
    assert torch.isfinite(torch.tensor(loss))


def test_one_sample_leftover_gives_a_finite_loss() -> None:
    """A batch of 5 with minibatch_size 4 used to leave a minibatch of one sample, whose
    normalized advantage (std of one element) made the loss NaN and skipped its step."""
    algo = build(num_envs=1, time_horizon=5, minibatch_size=4, training_epoch=2)
    fill(algo)
    loss = algo.train()
    assert torch.isfinite(torch.tensor(loss))
    assert torch.isfinite(torch.tensor(algo.entropy))
    assert algo.clock.opt_step == 2  # one minibatch of 5 per epoch


@pytest.mark.parametrize("normalize_advs", [None, True, False])
def test_normalize_advs(normalize_advs: bool | None) -> None:
    """One epoch, one minibatch of the whole batch, no entropy or value term: at the first step
    the ratio is exactly 1, so loss = -mean(A), with A normalized (mean 0) unless turned off."""
    algorithm: dict[str, Any] = {
        "time_horizon": 16,
        "minibatch_size": 32,
        "training_epoch": 1,
        "val_loss_coef": 0.0,
        "entropy_coef_spec": NO_ENTROPY,
    }
    if normalize_advs is not None:
        algorithm["normalize_advs"] = normalize_advs
    algo = build(num_envs=2, **algorithm)
    fill(algo)
    batch = algo.memory.sample(algo.device)
    algo.memory.sample = lambda device: batch
    T, N = batch.rewards.shape
    with torch.no_grad():
        values = algo.nets.value(flat(batch.obs).float()).view(T, N)
        advs, _ = algo.calc_advs_v_targets(batch, values)
    assert advs.mean().item() > 1.0  # CartPole's rewards of 1 against a near-zero V
    loss = algo.train()
    if normalize_advs is False:
        assert loss == pytest.approx(-advs.mean().item(), rel=1e-5)
    else:  # the default, as SLM Lab v5's PPO: per-minibatch normalization
        assert loss == pytest.approx(0.0, abs=1e-5)
