"""Batch norm and batch renorm run in train mode only for gradient steps: acting, targets and
PPO's old-policy pass use running statistics and leave them alone."""

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import (
    SMALL_NET,
    env_of,
    invoke,
    make_algorithm,
    make_spec,
    read_session_df,
    run_dirs,
    write_spec_file,
)
from torch import nn

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.net.batch_renorm import BatchRenorm1d
from slm_lab.agent.net.net_util import eval_mode

NORM_LAYERS = (nn.BatchNorm1d, BatchRenorm1d)
EXPLORE = {
    "name": "linear_decay",
    "start_val": 1.0,
    "end_val": 0.1,
    "start_step": 0,
    "end_step": 100,
}


def value_agent(name: str, norm: str) -> dict[str, Any]:
    return {
        "name": name,
        "algorithm": {
            "name": name,
            "action_policy": "epsilon_greedy",
            "explore_var_spec": EXPLORE,
            "gamma": 0.99,
            "training_start_step": 32,
            "training_frequency": 4,
        },
        "memory": {"name": "Replay", "max_size": 1000, "batch_size": 16},
        "net": {
            "type": "MLPNet",
            "hid_layers": [16],
            norm: True,
            "optim_spec": {"name": "Adam", "lr": 1e-3},
            "update_type": "replace",
            "update_frequency": 50,
        },
    }


def sac_agent(name: str, norm: str) -> dict[str, Any]:
    agent = {
        "name": name,
        "algorithm": {
            "name": name,
            "gamma": 0.99,
            "training_start_step": 32,
            "training_frequency": 1,
            "policy_delay": 1,
        },
        "memory": {"name": "Replay", "max_size": 1000, "batch_size": 16},
        "net": {
            **copy.deepcopy(SMALL_NET),
            norm: True,
            "update_type": "polyak",
            "polyak_coef": 0.5,
        },
    }
    if name == "CrossQ":  # its critics: batch renorm, whatever the actor has
        agent["critic_net"] = {"type": "MLPNet", "hid_layers": [16], "batch_renorm": True}
    return agent


def spec_of(algo: str, norm: str, num_envs: int, max_frame: int = 400) -> dict[str, Any]:
    """A small spec of `algo` whose nets have `norm` (batch_norm or batch_renorm) layers."""
    if algo in ("ppo", "a2c_gae"):
        spec = make_spec(algo, num_envs=num_envs, max_frame=max_frame)
        spec["agent"]["net"][norm] = True
        return spec
    env = "Pendulum-v1" if algo in ("SoftActorCritic", "CrossQ") else "CartPole-v1"
    spec = make_spec("random", env, num_envs=num_envs, max_frame=max_frame, max_t=50)
    if algo in ("SoftActorCritic", "CrossQ"):
        spec["agent"] = sac_agent(algo, norm)
    else:
        spec["agent"] = value_agent(algo, norm)
    return spec


def build(spec: dict[str, Any]) -> Algorithm:
    return make_algorithm(spec)


def norm_layers(net: nn.Module) -> list[nn.Module]:
    return [m for m in net.modules() if isinstance(m, NORM_LAYERS)]


def counts(net: nn.Module) -> list[int]:
    """num_batches_tracked of each norm layer: how many train-mode forwards it saw."""
    return [int(m.num_batches_tracked) for m in norm_layers(net)]


def fill(algo: Algorithm) -> None:
    """Random transitions into the replay memory until it can give a batch."""
    env = env_of(algo)
    env.reset()
    while not algo.memory.ready():
        algo.memory.add(env.step(env.info.sample_actions()))


@pytest.mark.cli
@pytest.mark.parametrize("algo", ["ppo", "a2c_gae", "DQN", "SoftActorCritic"])
def test_one_env_batch_norm_run_through_cli(algo: str, in_tmp: Path) -> None:
    """One env acts on a batch of one observation: in train mode batch norm cannot normalize it."""
    spec = spec_of(algo, "batch_norm", num_envs=1, max_frame=200)
    spec_file = write_spec_file(in_tmp / "spec.json", {"bn": spec})
    result = invoke(["run", str(spec_file), "bn", "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    last = read_session_df(run_dir).iloc[-1]
    assert last["frame"] == 200 and last["opt_step"] > 0 and math.isfinite(last["loss"])


@pytest.mark.parametrize("norm", ["batch_norm", "batch_renorm"])
@pytest.mark.parametrize("algo", ["ppo", "DQN", "SoftActorCritic"])
def test_acting_leaves_norm_statistics_alone(algo: str, norm: str) -> None:
    spec = spec_of(algo, norm, num_envs=2)
    if algo == "SoftActorCritic":  # act with the actor from the start, not at random
        spec["agent"]["algorithm"]["training_start_step"] = 0
    algo_ = build(spec)
    nets = list(algo_.modules().values())
    assert any(norm_layers(net) for net in nets)
    before = [copy.deepcopy(dict(net.named_buffers())) for net in nets]
    env = env_of(algo_)
    env.reset()
    for _ in range(5):
        env.step(algo_.act(env.obs))
    for net, buffers in zip(nets, before, strict=True):
        for name, buffer in net.named_buffers():
            assert torch.equal(buffer, buffers[name]), name
    # back in train mode for the gradient steps (target nets stay in eval mode)
    assert all(m.training for m in norm_layers(nets[0]))


def test_ppo_norm_layers_count_only_minibatch_steps() -> None:
    """2 envs x 32 steps, minibatches of 32, 2 epochs: 4 gradient steps, each one forward of
    the actor and one of the critic; the old-policy pass and V(s') add none."""
    algo = build(spec_of("ppo", "batch_renorm", num_envs=2))
    env = env_of(algo)
    env.reset()
    while not algo.memory.ready():
        algo.memory.add(env.step(algo.act(env.obs)))
    algo.train()
    assert algo.clock.opt_step == 4
    assert counts(algo.nets.actor) == counts(algo.nets.critic) == [4]


def test_double_dqn_target_forwards_are_in_eval_mode() -> None:
    """One gradient step: one train-mode forward of Q(s, .); the online net's argmax over s'
    and the target net's Q(s', .) use running statistics."""
    algo = build(spec_of("DoubleDQN", "batch_renorm", num_envs=2))
    fill(algo)
    algo.train_batch(algo.memory.sample(algo.device))
    assert algo.clock.opt_step == 1
    assert counts(algo.net) == [1]
    assert counts(algo.target.targets[0]) == [0]


@pytest.mark.parametrize("name", ["SoftActorCritic", "CrossQ"])
def test_sac_norm_layers_count_only_their_own_gradient_steps(name: str) -> None:
    """One critic step then one actor step (policy_delay 1). The critics see one train-mode
    forward (SAC: of (s, a); CrossQ: the joint one of (s, a) and (s', a')), the actor one (its
    step); a' ~ pi(s') for the targets and Q in the actor step use running statistics."""
    algo = build(spec_of(name, "batch_renorm", num_envs=2))
    fill(algo)
    algo.train_batch(algo.memory.sample(algo.device))
    assert counts(algo.q1_net) == counts(algo.q2_net) == [1]
    assert counts(algo.actor) == [1]
    assert all(m.training for net in (algo.actor, algo.q1_net) for m in norm_layers(net))


def test_eval_mode_restores_the_mode_each_layer_had() -> None:
    net = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    net[3].eval()  # a layer already in eval mode stays so after the block
    with eval_mode(net):
        assert [m.training for m in net] == [True, False, False, False]
        with eval_mode(net):  # nested: the inner block restores the outer block's modes
            pass
        assert not net[1].training
        x = torch.randn(3, 2)
        np.testing.assert_array_equal(net(x).detach().numpy(), net(x).detach().numpy())
    assert [m.training for m in net] == [True, True, True, False]


def test_eval_mode_switches_the_layers_that_draw_random_numbers() -> None:
    """RReLU's slopes and attention's dropout draw from the global generator in train mode:
    in an eval block (acting, targets) they draw nothing and give the same output twice."""
    attention = nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True)
    plain = nn.MultiheadAttention(4, 2, batch_first=True)  # no dropout: nothing to switch
    rrelu = nn.Sequential(nn.Linear(2, 4), nn.RReLU())
    with eval_mode(rrelu), eval_mode(attention), eval_mode(plain):
        assert not rrelu[1].training and not attention.training and plain.training
        x, seq = torch.randn(3, 2), torch.randn(1, 5, 4)
        torch.manual_seed(0)
        outs = rrelu(x), attention(seq, seq, seq)[0]
        drawn = torch.rand(2)
        torch.manual_seed(0)
        assert torch.equal(drawn, torch.rand(2))  # the forwards drew nothing
        assert torch.equal(outs[0], rrelu(x)) and torch.equal(outs[1], attention(seq, seq, seq)[0])
    assert rrelu[1].training and attention.training
