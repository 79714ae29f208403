"""PPO's minibatches: the leftover merged into the last one."""

from typing import Any

import pytest
import torch
from conftest import make_spec

from slm_lab.agent import Agent
from slm_lab.agent.algorithm.ppo import PPO, minibatch_idxs
from slm_lab.env import VecEnv


def build(num_envs: int, **algorithm: Any) -> PPO:
    spec = make_spec("ppo", num_envs=num_envs)
    spec["agent"]["algorithm"].update(algorithm)
    return Agent(spec["agent"], VecEnv(spec["env"], seed=0)).algorithm


def fill(algo: PPO) -> None:
    """Act in the env until the memory holds a batch, without training."""
    env = algo.env
    obs = env.reset()
    while not algo.memory.ready():
        actions = algo.act(obs)
        next_obs, rewards, terminateds, truncateds, real_next_obs = env.step(actions)
        algo.memory.add(obs, actions, rewards, real_next_obs, terminateds, truncateds)
        obs = next_obs


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
