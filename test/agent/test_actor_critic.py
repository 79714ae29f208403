"""The actor-critics' V(s_{t+1}): taken from the next row's V(s_t) where the episode goes on, the
net run only on the last row's successors and on final observations."""

from typing import Any

import pytest
import torch
from conftest import env_of, make_algorithm, make_spec

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.net import net_util


def build(algo: str, **memory: Any) -> ActorCritic:
    spec = make_spec(algo, num_envs=3)
    spec["agent"]["algorithm"].update(time_horizon=64, training_frequency=64)
    spec["agent"]["memory"].update(memory)
    return make_algorithm(spec)


def values_of(algo: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), net_util.eval_mode(algo.nets):
        return algo.denorm_v(algo.nets.value(flat(obs).float())).view(obs.shape[:2])


@pytest.mark.parametrize("algo_name", ["ppo", "a2c_gae"])
@pytest.mark.parametrize("restart_at", [None, 20])
def test_next_values_equal_the_net_on_every_successor(
    algo_name: str, restart_at: int | None
) -> None:
    """Against V(next_obs) over the whole batch, with episode ends inside the batch and, with
    `restart_at`, the env's episodes restarted mid-batch as a resume restarts them."""
    algo = build(algo_name)
    env = env_of(algo)
    env.reset()
    while not algo.memory.ready():
        if algo.memory.ptr == restart_at:
            algo.memory.mark_truncated()
            env.reset(seed=123)
        algo.memory.add(env.step(algo.act(env.obs)))
    batch = algo.memory.sample(algo.device)
    assert 0 < int(batch.dones[:-1].sum()) < batch.dones.numel() // 4  # episodes end inside it
    values = values_of(algo, batch.obs)
    full = values_of(algo, batch.next_obs)
    seen: list[int] = []
    value = algo.nets.value
    algo.nets.value = lambda obs: seen.append(obs.shape[0]) or value(obs)
    next_values = algo.next_values(batch, values)
    torch.testing.assert_close(next_values, full, rtol=1e-6, atol=1e-6)
    T, N = batch.rewards.shape
    assert seen == [N + int(batch.dones[:-1].sum())]
