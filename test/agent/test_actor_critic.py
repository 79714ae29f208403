"""The actor-critics' V(s_{t+1}): taken from the next row's V(s_t) where the episode goes on, the
net run only on the last row's successors and on final observations."""

from typing import Any

import pytest
import torch
from conftest import env_of, make_algorithm, make_spec

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.net import net_util


def build(algo: str, **net: Any) -> ActorCritic:
    """On OnPolicyBatchReplay, the one memory the actor-critics take: [64, 3] batches."""
    spec = make_spec(algo, num_envs=3)
    spec["agent"]["algorithm"].update(time_horizon=64, training_frequency=64)
    spec["agent"]["net"].update(net)
    return make_algorithm(spec)


def fill(algo: ActorCritic, restart_at: int | None = None) -> None:
    """Act until the memory is ready; at step `restart_at` the env's episodes restart, as on a
    resume (the memory marks them truncated)."""
    env = env_of(algo)
    env.reset()
    step = 0
    while not algo.memory.ready():
        if step == restart_at:
            algo.memory.mark_truncated()
            env.reset(seed=123)
        algo.memory.add(env.step(algo.act(env.obs)))
        step += 1


def eval_values(algo: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), net_util.eval_mode(algo.nets):
        return algo.denorm_v(algo.nets.value(flat(obs).float())).view(obs.shape[:2])


def counting_rows(algo: ActorCritic) -> list[int]:
    """The number of observations of every nets.value call from now on."""
    seen: list[int] = []
    value = algo.nets.value
    algo.nets.value = lambda obs: seen.append(obs.shape[0]) or value(obs)
    return seen


@pytest.mark.parametrize("algo_name", ["ppo", "a2c_gae"])
@pytest.mark.parametrize("restart_at", [None, 20])
def test_next_values_equal_the_net_on_every_successor(
    algo_name: str, restart_at: int | None
) -> None:
    """Against V(next_obs) over the whole batch, with episode ends inside the batch and, with
    `restart_at`, the env's episodes restarted mid-batch as a resume restarts them."""
    algo = build(algo_name)
    fill(algo, restart_at)
    batch = algo.memory.sample(algo.device)
    assert 0 < int(batch.dones[:-1].sum()) < batch.dones.numel() // 4  # episodes end inside it
    values = eval_values(algo, batch.obs)
    full = eval_values(algo, batch.next_obs)
    seen = counting_rows(algo)
    with net_util.eval_mode(algo.nets):  # as PPO's old-policy pass
        next_values = algo.next_values(batch, values)
    torch.testing.assert_close(next_values, full, rtol=1e-6, atol=1e-6)
    T, N = batch.rewards.shape
    assert seen == [N + int(batch.dones[:-1].sum())]


def test_train_mode_values_of_a_batch_norm_net_are_not_reused() -> None:
    """A2C's V(s_t) come from its gradient step's forward, in train mode: with batch norm they
    differ from eval mode's, so every successor is run in eval mode, as before the reuse."""
    algo = build("a2c_gae", batch_norm=True)
    assert net_util.mode_layers(algo.nets)
    fill(algo)
    batch = algo.memory.sample(algo.device)
    with torch.no_grad():
        train_values = algo.nets.value(flat(batch.obs).float()).view(batch.rewards.shape)
    full = eval_values(algo, batch.next_obs)
    assert not torch.allclose(train_values[1:], full[:-1], atol=1e-3)
    seen = counting_rows(algo)
    torch.testing.assert_close(algo.next_values(batch, train_values), full)
    assert seen == [batch.dones.numel()]


def test_ppo_runs_the_successors_in_eval_mode_with_batch_norm() -> None:
    """PPO's old-policy values come from eval mode, and its V(s_{t+1}) are computed in eval mode
    too, so a batch-norm net still runs the net only on the last row's and final successors."""
    algo = build("ppo", batch_norm=True)
    assert net_util.mode_layers(algo.nets)
    fill(algo)
    T, N = algo.memory.data["dones"].shape
    ended = int(algo.memory.data["dones"][:-1].sum())
    seen = counting_rows(algo)
    algo.train()
    assert seen[:2] == [T * N, N + ended]  # the old-policy pass, then the successors
