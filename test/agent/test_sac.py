"""SoftActorCritic and CrossQ: the squashed-Gaussian log-prob, discrete targets and losses worked
by hand, the temperature, target updates, spec checks, CLI smoke runs and a resume round trip."""

import contextlib
import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import (
    SMALL_NET,
    TIMING_COLUMNS,
    check_progress_lines,
    env_of,
    invoke,
    make_algorithm,
    progress_lines,
    progress_values,
    read_session_df,
    run_dirs,
    session_log,
    write_spec_file,
)
from torch import distributions as dist

from slm_lab.agent.algorithm.crossq import CrossQ
from slm_lab.agent.algorithm.sac import SoftActorCritic, squashed_normal_sample, tanh_log_det
from slm_lab.agent.memory.base import Batch, Transition
from slm_lab.agent.net.batch_renorm import BatchRenorm1d
from slm_lab.experiment import control
from slm_lab.spec import spec_util
from slm_lab.spec.spec_util import SpecError

LOG_2 = math.log(2.0)


def sac_spec(
    algo: str = "SoftActorCritic",
    env: str = "Pendulum-v1",
    max_frame: int = 400,
    memory: str = "Replay",
    random_seed: int = 42,
    **algorithm: Any,
) -> dict[str, Any]:
    """A small SAC/CrossQ spec: 2 envs, training from frame 100, a gradient step per env step."""
    net = {**copy.deepcopy(SMALL_NET), "update_type": "polyak", "polyak_coef": 0.005}
    agent: dict[str, Any] = {
        "name": algo,
        "algorithm": {
            "name": algo,
            "gamma": 0.99,
            "training_start_step": 100,
            "training_frequency": 2,
            "training_iter": 1,
            **algorithm,
        },
        "memory": {"name": memory, "max_size": 10000, "batch_size": 32},
        "net": net,
    }
    if memory == "PrioritizedReplay":
        agent["memory"].update(alpha=0.6, epsilon=1e-4, beta_end_step=max_frame)
    if algo == "CrossQ":
        agent["algorithm"]["policy_delay"] = 3
        agent["net"] = {**net, "hid_layers_activation": "relu"}
        agent["critic_net"] = {
            "type": "MLPNet",
            "hid_layers": [32, 32],
            "hid_layers_activation": "relu",
            "batch_renorm": True,
            "batch_renorm_warmup_steps": 50,
            "optim_spec": {"name": "Adam", "lr": 1e-3, "betas": [0.5, 0.999]},
            "gpu": False,
        }
    return {
        "agent": agent,
        "env": {
            "name": env,
            "num_envs": 2,
            "max_t": 50 if env == "Pendulum-v1" else None,
            "max_frame": max_frame,
        },
        "meta": {
            "distributed": False,
            "log_frequency": 100,
            "eval_frequency": 100,
            "max_session": 1,
            "max_trial": 1,
            "random_seed": random_seed,
        },
    }


def build(spec: dict[str, Any]) -> SoftActorCritic:
    return make_algorithm(spec)


# -- the squashed Gaussian ------------------------------------------------------------------------
def test_squashed_normal_log_prob_matches_torch_transformed_distribution() -> None:
    torch.manual_seed(0)
    mean = torch.rand(64, 3) * 2 - 1
    log_std = torch.rand(64, 3) - 1.5
    actions, log_probs = squashed_normal_sample(mean, log_std)
    assert actions.shape == (64, 3) and log_probs.shape == (64,)
    assert actions.abs().max() < 0.999  # away from +-1, where atanh is well conditioned
    base = dist.Independent(dist.Normal(mean.double(), log_std.double().exp()), 1)
    ref = dist.TransformedDistribution(base, [dist.TanhTransform()])
    torch.testing.assert_close(
        log_probs.double(), ref.log_prob(actions.double()), atol=1e-3, rtol=0
    )


def test_tanh_log_det_is_exact_and_finite_when_saturated() -> None:
    u = torch.linspace(-20.0, 20.0, 401, dtype=torch.float64)
    # log(1 - tanh(u)^2) = log(sech(u)^2) = 2 * (log 2 - log(e^u + e^-u)), computed apart
    expected = 2 * (LOG_2 - torch.logaddexp(u, -u))
    got = tanh_log_det(u.float().unsqueeze(-1))
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), expected, atol=1e-4, rtol=1e-5)
    # the naive form is -inf there: tanh(20) is 1.0 in float32
    assert torch.isinf(torch.log(1 - torch.tanh(torch.tensor(20.0)) ** 2))
    # a saturated sample still has a finite log-prob
    _, log_probs = squashed_normal_sample(torch.full((4, 2), 20.0), torch.full((4, 2), -20.0))
    assert torch.isfinite(log_probs).all()


# -- discrete SAC worked by hand -----------------------------------------------------------------
def constant_net(net: torch.nn.Module, outputs: list[float]) -> None:
    """Make a head-only MLPNet output `outputs` for every observation."""
    [head] = net.heads
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor(outputs))


P = [0.25, 0.75]  # pi(.|s) of the hand-built actor
ALPHA = 0.5


@pytest.fixture
def discrete_sac() -> SoftActorCritic:
    spec = sac_spec(env="CartPole-v1")
    spec["agent"]["net"]["hid_layers"] = []  # heads only: constant outputs are easy to set
    spec["agent"]["algorithm"]["target_entropy"] = 0.3
    algo = build(spec)
    constant_net(algo.actor, [0.0, math.log(3.0)])  # softmax -> [0.25, 0.75]
    with torch.no_grad():
        algo.log_alpha.value.fill_(math.log(ALPHA))
    return algo


def batch_of(algo: SoftActorCritic, rewards: list[float], terminateds: list[bool]) -> Batch:
    n = len(rewards)
    return Batch(
        obs=torch.randn(n, *algo.obs_shape),
        actions=torch.tensor([1, 0] * (n // 2)),
        rewards=torch.tensor(rewards),
        next_obs=torch.randn(n, *algo.obs_shape),
        terminateds=torch.tensor(terminateds),
        dones=torch.ones(n, dtype=torch.bool),  # the others truncated: they still bootstrap
    )


def test_discrete_soft_v_target(discrete_sac: SoftActorCritic) -> None:
    algo = discrete_sac
    target_q1_net, target_q2_net = algo.target.targets
    constant_net(target_q1_net, [1.0, 2.0])
    constant_net(target_q2_net, [1.5, 1.0])  # min over the twins: [1, 1]
    # the online critics must not enter the target
    constant_net(algo.q1_net, [100.0, 100.0])
    constant_net(algo.q2_net, [100.0, 100.0])
    algo.gamma = 0.9
    # V(s') = sum_a pi(a) (min Q(a) - alpha log pi(a)) = 0.25 (1 + 0.5 log 4) + 0.75 (1 + 0.5 log 4/3)
    v_next = 0.25 * (1 + 0.5 * math.log(4)) + 0.75 * (1 + 0.5 * math.log(4 / 3))
    q_targets = algo.calc_q_targets(batch_of(algo, [1.0, 0.5], [False, True]))
    torch.testing.assert_close(q_targets, torch.tensor([1.0 + 0.9 * v_next, 0.5]))


def test_discrete_actor_and_alpha_losses(discrete_sac: SoftActorCritic) -> None:
    algo = discrete_sac
    constant_net(algo.q1_net, [2.0, 0.0])
    constant_net(algo.q2_net, [1.0, 3.0])  # min over the twins: [1, 0]
    obs = torch.randn(4, *algo.obs_shape)
    actor_loss, expected_log_probs = algo.calc_actor_loss(obs)
    # sum_a pi(a) (alpha log pi(a) - min Q(a))
    expected = 0.25 * (ALPHA * math.log(0.25) - 1.0) + 0.75 * (ALPHA * math.log(0.75) - 0.0)
    assert actor_loss.item() == pytest.approx(expected, abs=1e-6)
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    torch.testing.assert_close(expected_log_probs, torch.full((4,), -entropy))
    actor_loss.backward()
    assert algo.actor.heads[0].bias.grad.abs().sum() > 0
    assert algo.q1_net.heads[0].bias.grad is None  # discrete: Q is a constant in the actor loss

    # temperature: loss = -alpha * (E log pi + target_entropy), alpha = exp(log_alpha), so its
    # gradient on log_alpha is that same loss (a log_alpha-linear loss would give -(E log pi + H))
    alpha_loss = algo.calc_alpha_loss(expected_log_probs)
    expected_alpha_loss = -ALPHA * (-entropy + 0.3)
    assert alpha_loss.item() == pytest.approx(expected_alpha_loss, abs=1e-6)
    alpha_loss.backward()
    assert algo.log_alpha.value.grad.item() == pytest.approx(expected_alpha_loss, abs=1e-6)
    assert algo.alpha.item() == pytest.approx(ALPHA)


def test_discrete_target_entropy_auto_and_fixed_alpha() -> None:
    spec = sac_spec(env="CartPole-v1", fixed_alpha=0.2)
    algo = build(spec)
    assert algo.target_entropy == pytest.approx(0.98 * math.log(2))
    assert algo.alpha.item() == pytest.approx(0.2)
    assert not algo.log_alpha.value.requires_grad and len(algo.optims) == 2  # no alpha optimizer
    assert build(sac_spec()).target_entropy == -1.0  # Pendulum: -action_dim


# -- discrete SAC through GumbelSoftmax samples --------------------------------------------------
@pytest.fixture
def gumbel_sac(discrete_sac: SoftActorCritic) -> SoftActorCritic:
    """The hand-built discrete SAC (pi = [0.25, 0.75], alpha 0.5), GumbelSoftmax."""
    spec = sac_spec(env="CartPole-v1", action_pdtype="GumbelSoftmax", target_entropy=0.3)
    spec["agent"]["net"]["hid_layers"] = []
    algo = build(spec)
    algo.load_state_dict(discrete_sac.state_dict())
    return algo


def test_gumbel_softmax_samples_are_one_hot_and_follow_pi(gumbel_sac: SoftActorCritic) -> None:
    algo = gumbel_sac
    torch.manual_seed(0)
    actions, log_probs = algo.policy(torch.randn(20000, *algo.obs_shape))
    assert actions.shape == (20000, 2)
    assert set(actions.unique().tolist()) == {0.0, 1.0} and (actions.sum(-1) == 1).all()
    assert actions[:, 1].mean().item() == pytest.approx(P[1], abs=0.01)
    torch.testing.assert_close(log_probs, torch.log(torch.tensor(P))[actions.argmax(-1)])


def test_gumbel_softmax_soft_v_target_is_one_sample(gumbel_sac: SoftActorCritic) -> None:
    """y = r + gamma * (min(Q1, Q2)_target(s', a') - alpha * log pi(a'|s')), a' the sample."""
    algo = gumbel_sac
    target_q1_net, target_q2_net = algo.target.targets
    constant_net(target_q1_net, [1.0, 2.0])
    constant_net(target_q2_net, [1.5, 1.0])  # min over the twins: [1, 1]
    constant_net(algo.q1_net, [100.0, 100.0])  # the online critics must not enter the target
    algo.gamma = 0.9
    batch = batch_of(algo, [1.0, 0.5] * 500, [False, True] * 500)
    torch.manual_seed(1)
    next_actions, _ = algo.policy(batch.next_obs)
    torch.manual_seed(1)
    q_targets = algo.calc_q_targets(batch)
    v_next = 1.0 - ALPHA * torch.log(torch.tensor(P))[next_actions.argmax(-1)]
    expected = batch.rewards + 0.9 * (1.0 - batch.terminateds.float()) * v_next
    torch.testing.assert_close(q_targets, expected)
    assert len(set(q_targets[::2].tolist())) == 2  # both actions were sampled


def test_gumbel_softmax_actor_loss_reaches_the_logits_through_q(
    gumbel_sac: SoftActorCritic,
) -> None:
    """The straight-through sample carries Q's gradient to the logits: with alpha near 0 (the
    entropy term gone) a step moves pi toward the action of higher Q, and the critics' weights
    get no gradient. Exact expectations (Categorical) give the same direction; the sampled
    loss's value is the sample's."""
    algo = gumbel_sac
    constant_net(algo.q1_net, [2.0, 0.0])
    constant_net(algo.q2_net, [1.0, 3.0])  # min over the twins: [1, 0]
    obs = torch.randn(256, *algo.obs_shape)
    torch.manual_seed(2)
    actions, log_probs = algo.policy(obs)
    torch.manual_seed(2)
    actor_loss, expected_log_probs = algo.calc_actor_loss(obs)
    min_q = torch.tensor([1.0, 0.0])[actions.argmax(-1)]
    assert actor_loss.item() == pytest.approx((ALPHA * log_probs - min_q).mean().item(), abs=1e-5)
    torch.testing.assert_close(expected_log_probs, log_probs.detach())
    with torch.no_grad():
        algo.log_alpha.value.fill_(-20.0)
    actor_loss, _ = algo.calc_actor_loss(obs)
    actor_loss.backward()
    assert algo.q1_net.heads[0].bias.grad is None and algo.q2_net.heads[0].bias.grad is None
    logits_grad = algo.actor.heads[0].bias.grad
    assert logits_grad[0] < 0 < logits_grad[1]  # descent raises the logit of action 0 (Q = 1)


def test_gumbel_softmax_is_for_sac_discrete_actors() -> None:
    spec = sac_spec("CrossQ", env="CartPole-v1", action_pdtype="GumbelSoftmax")
    with pytest.raises(SpecError, match=r"^agent.algorithm.action_pdtype: GumbelSoftmax trains"):
        spec_util.validate(spec)
    spec = sac_spec(action_pdtype="GumbelSoftmax")  # Pendulum: a Box
    with pytest.raises(SpecError, match="GumbelSoftmax does not fit the Box action space"):
        spec_util.validate(spec)


# -- the temperature's bounds ---------------------------------------------------------------------
ENTROPY = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))  # H(pi) of the hand-built actor, 0.562
ALPHA_LR = 1e-3  # SMALL_NET's actor lr, which the temperature's Adam takes


@pytest.mark.parametrize("algo_name", ["SoftActorCritic", "CrossQ"])
@pytest.mark.parametrize(
    ("target_entropy", "bound", "direction"),
    [
        (0.6, {"log_alpha_max": 0.0}, 1),  # H < target: the step raises log_alpha
        (0.3, {"log_alpha_min": 0.0}, -1),  # H > target: the step lowers log_alpha
        (0.6, {}, 1),  # default bounds [-5, 2]: the step goes through
        (0.3, {}, -1),
    ],
)
def test_log_alpha_is_clamped_after_the_temperature_step(
    algo_name: str, target_entropy: float, bound: dict[str, float], direction: int
) -> None:
    """log_alpha starts at 0; Adam's first step moves it by its lr, in the direction that brings
    H(pi) to the target, unless a bound at 0 holds it there."""
    spec = sac_spec(algo_name, env="CartPole-v1", target_entropy=target_entropy, **bound)
    spec["agent"]["algorithm"]["policy_delay"] = (
        1  # the temperature steps with the first critic step
    )
    spec["agent"]["net"]["hid_layers"] = []
    algo = build(spec)
    constant_net(algo.actor, [0.0, math.log(3.0)])  # pi = [0.25, 0.75] for every observation
    fill(algo)
    assert algo.log_alpha.value.item() == 0.0
    stats = algo.train_batch(algo.memory.sample(algo.device))
    assert stats["entropy"].item() == pytest.approx(ENTROPY, abs=1e-6)
    expected = 0.0 if bound else direction * ALPHA_LR
    assert algo.log_alpha.value.item() == pytest.approx(expected, abs=1e-7)


def test_log_alpha_starts_within_its_bounds() -> None:
    algo = build(sac_spec(log_alpha_min=-2.0, log_alpha_max=-1.0))
    assert (algo.log_alpha_min, algo.log_alpha_max) == (-2.0, -1.0)
    assert algo.log_alpha.value.item() == -1.0  # alpha 1 (log 0) is above the ceiling


def test_fixed_alpha_is_not_clamped() -> None:
    fixed_alpha = 0.001  # below the default floor e^-5 ~ 0.0067
    algo = build(sac_spec(env="CartPole-v1", fixed_alpha=fixed_alpha))
    fill(algo)
    algo.train_batch(algo.memory.sample(algo.device))
    assert algo.alpha.item() == pytest.approx(fixed_alpha)


# -- target nets, policy delay, priorities -------------------------------------------------------
def test_polyak_and_replace_target_updates() -> None:
    algo = build(sac_spec())
    target = algo.target
    target_q1_net, target_q2_net = target.targets
    assert (target.update_type, target.polyak_coef) == ("polyak", 0.005)  # from the spec
    target.polyak_coef = 0.1
    with torch.no_grad():
        for p in algo.q1_net.parameters():
            p.add_(1.0)
    old = [p.clone() for p in target_q1_net.parameters()]
    net = [p.clone() for p in algo.q1_net.parameters()]
    target.update()
    for t, o, n in zip(target_q1_net.parameters(), old, net, strict=True):
        torch.testing.assert_close(t, 0.9 * o + 0.1 * n)

    target.update_type, target.update_frequency = "replace", 10
    with torch.no_grad():
        algo.q2_net.heads[0].weight.add_(1.0)
    algo.clock.frame = 5
    target.update()  # 5 frames since the last copy: not yet
    assert not torch.equal(target_q2_net.heads[0].weight, algo.q2_net.heads[0].weight)
    algo.clock.frame = 10
    target.update()
    for t, n in zip(target_q2_net.parameters(), algo.q2_net.parameters(), strict=True):
        assert torch.equal(t, n)
    assert target.last_update == 10


def fill(algo: SoftActorCritic, steps: int = 20) -> None:
    env = env_of(algo)
    env.reset()
    for _ in range(steps):
        algo.memory.add(env.step(env.info.sample_actions()))


@pytest.mark.parametrize("algo_name", ["SoftActorCritic", "CrossQ"])
def test_policy_delay_updates_actor_every_kth_critic_step(algo_name: str) -> None:
    spec = sac_spec(algo_name)
    spec["agent"]["algorithm"]["policy_delay"] = 2  # CrossQ's spec has its own
    algo = build(spec)
    assert algo.config.policy_delay == 2
    fill(algo)
    actor_before = [p.clone() for p in algo.actor.parameters()]
    critic_before = [p.clone() for p in algo.q1_net.parameters()]
    log_alpha_before = algo.log_alpha.value.item()
    algo.train_batch(algo.memory.sample(algo.device))
    assert algo.clock.opt_step == 1
    assert all(
        torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters(), strict=True)
    )
    assert not all(
        torch.equal(a, b) for a, b in zip(critic_before, algo.q1_net.parameters(), strict=True)
    )
    assert algo.log_alpha.value.item() == log_alpha_before
    stats = algo.train_batch(algo.memory.sample(algo.device))
    assert algo.clock.opt_step == 2
    assert not all(
        torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters(), strict=True)
    )
    assert algo.log_alpha.value.item() != log_alpha_before
    assert all(math.isfinite(v.item()) for v in stats.values())


def test_prioritized_replay_gets_td_errors() -> None:
    algo = build(sac_spec(env="CartPole-v1", memory="PrioritizedReplay"))
    fill(algo)
    batch = algo.memory.sample(algo.device)
    assert algo.memory.tree.get(batch.idxs.numpy()).tolist() == [1.0] * 32
    algo.train_batch(batch)
    assert not np.allclose(algo.memory.tree.get(batch.idxs.numpy()), 1.0)


def test_crossq_has_no_targets_and_batch_renorm_critics() -> None:
    spec = sac_spec("CrossQ")
    spec["agent"]["algorithm"]["policy_delay"] = 1
    algo = build(spec)
    assert isinstance(algo, CrossQ)
    assert algo.target is None
    assert set(algo.modules()) == {"actor", "q1_net", "q2_net", "log_alpha"}
    assert any(isinstance(m, BatchRenorm1d) for m in algo.q1_net.modules())
    assert tuple(algo.critic_optim.param_groups[0]["betas"]) == (0.5, 0.999)
    fill(algo)
    brn = next(m for m in algo.q1_net.modules() if isinstance(m, BatchRenorm1d))
    algo.train_batch(algo.memory.sample(algo.device))
    # one joint train-mode forward per critic step; the actor step (eval mode) adds none
    assert brn.num_batches_tracked.item() == 1
    assert algo.q1_net.training


# -- state -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo_name", ["SoftActorCritic", "CrossQ"])
def test_state_dict_round_trip(algo_name: str) -> None:
    spec = sac_spec(algo_name)
    a = build(spec)
    fill(a)
    for _ in range(3):
        a.train_batch(a.memory.sample(a.device))
    state = copy.deepcopy(a.state_dict())
    b = build(spec)
    b.load_state_dict(state)
    for k, m in a.modules().items():
        for (name, x), y in zip(
            m.state_dict().items(), b.modules()[k].state_dict().values(), strict=True
        ):
            assert torch.equal(x, y), f"{k}.{name}"
    assert b.alpha.item() == a.alpha.item() != 1.0
    assert len(b.optims) == 3
    torch.testing.assert_close(
        b.alpha_optim.state_dict()["state"], a.alpha_optim.state_dict()["state"]
    )


# -- specs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo_name", ["SoftActorCritic", "CrossQ"])
def test_spec_without_replay_memory_is_rejected(algo_name: str, tmp_path: Path) -> None:
    spec = sac_spec(algo_name)
    spec["agent"]["memory"] = {"name": "OnPolicyBatchReplay"}
    path = write_spec_file(tmp_path / "s.json", {"sac": spec})
    with pytest.raises(SpecError) as err:
        spec_util.get_spec(str(path), "sac")
    assert (
        f"agent.memory.name: {algo_name} needs one of Replay, PrioritizedReplay; got 'OnPolicyBatchReplay'"
        in str(err.value)
    )


def test_critic_net_keys_are_checked(tmp_path: Path) -> None:
    spec = sac_spec("CrossQ")
    spec["agent"]["critic_net"]["batch_renrom"] = True
    path = write_spec_file(tmp_path / "s.json", {"crossq": spec})
    with pytest.raises(SpecError) as err:
        spec_util.get_spec(str(path), "crossq")
    assert "agent.critic_net.batch_renrom: unknown key; did you mean batch_renorm?" in str(
        err.value
    )


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("benchmark/sac/sac_pendulum.json", "sac_pendulum"),
        pytest.param(
            "benchmark/sac/sac_lunar_continuous.json",
            "sac_lunar_continuous",
            marks=pytest.mark.box2d,
        ),
        ("benchmark/sac/sac_cartpole.json", "sac_cartpole"),
        ("benchmark/sac/sac_acrobot.json", "sac_acrobot"),
        pytest.param("benchmark/sac/sac_lunar.json", "sac_lunar", marks=pytest.mark.box2d),
        ("benchmark/crossq/crossq_cartpole.json", "crossq_cartpole"),
        ("benchmark/crossq/crossq_pendulum.json", "crossq_pendulum"),
        ("benchmark/crossq/crossq_acrobot.json", "crossq_acrobot"),
        pytest.param("benchmark/crossq/crossq_lunar.json", "crossq_lunar", marks=pytest.mark.box2d),
        pytest.param(
            "benchmark/crossq/crossq_lunar_continuous.json",
            "crossq_lunar_continuous",
            marks=pytest.mark.box2d,
        ),
    ],
)
def test_benchmark_specs_validate(path: str, name: str) -> None:
    spec = spec_util.get_spec(path, name)
    assert spec["meta"]["max_session"] == 4


# -- runs through the CLI ----------------------------------------------------------------------
@pytest.mark.cli
@pytest.mark.parametrize("env_name", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize("algo_name", ["SoftActorCritic", "CrossQ"])
def test_smoke_dev_run(algo_name: str, env_name: str, in_tmp: Path) -> None:
    name = f"{algo_name.lower()}_{env_name.split('-')[0].lower()}"
    spec_file = write_spec_file(in_tmp / "spec.json", {name: sac_spec(algo_name, env_name)})
    result = invoke(["run", str(spec_file), name, "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == [100, 200, 300, 400]
    # training from frame 100, one gradient step per 2-env step: frames 100, 102, ..., 400
    assert df["opt_step"].tolist() == [1, 51, 101, 151]
    last = df.iloc[-1]
    diagnostics = ["loss", "q1_mean", "q2_mean", "entropy", "actor_loss", "alpha_loss"]
    assert all(math.isfinite(last[c]) for c in diagnostics)
    assert last["lr"] == 1e-3
    # alpha starts at 1 and is tuned (Adam lr 1e-3 moves log_alpha by about 1e-3 a step)
    assert df["alpha"].iloc[0] == pytest.approx(1.0, abs=2e-3)
    assert abs(last["alpha"] - 1.0) > 0.02
    assert df["total_reward"].notna().all()
    check_progress_lines(result.stderr, run_dir, f"{name}_t0_s0", df)
    assert all("alpha" in progress_values(line) for line in progress_lines(session_log(run_dir)))


RESUME_FRAMES = 600
STOP_FRAME = 350


class Interrupted(BaseException):
    """Stands in for a kill: the session stops between two steps, uncaught."""


@pytest.mark.cli
def test_interrupted_sac_run_resumes_to_the_same_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "sac_resume"
    spec_file = write_spec_file(
        tmp_path / "spec.json", {name: sac_spec(max_frame=RESUME_FRAMES, random_seed=123)}
    )
    update = SoftActorCritic.update

    def update_until_killed(self: SoftActorCritic, t: Transition) -> None:
        if self.clock.frame >= STOP_FRAME:
            raise Interrupted
        update(self, t)

    with contextlib.chdir(tmp_path):
        assert invoke(["run", str(spec_file), name, "dev"]).exit_code == 0
        [dir_a] = run_dirs(Path("data"))
        with monkeypatch.context() as m, pytest.raises(Interrupted):
            m.setattr(SoftActorCritic, "update", update_until_killed)
            m.setattr(control, "SAVE_INTERVAL_S", 0.0, raising=False)
            invoke(["run", str(spec_file), name, "dev"])
        [dir_b] = set(run_dirs(Path("data"))) - {dir_a}
        assert read_session_df(dir_b)["frame"].tolist() == [100, 200, 300]
        result = invoke(["run", str(spec_file), name, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
        df_a, df_b = read_session_df(dir_a), read_session_df(dir_b)
    assert df_a["frame"].tolist() == list(range(100, RESUME_FRAMES + 1, 100))
    pd.testing.assert_frame_equal(
        df_a.drop(columns=TIMING_COLUMNS), df_b.drop(columns=TIMING_COLUMNS)
    )


def test_continuous_actor_loss_reaches_the_actor_through_q_but_not_the_critic_weights() -> None:
    algo = build(sac_spec())
    obs = torch.randn(8, *algo.obs_shape)
    actor_loss, _ = algo.calc_actor_loss(obs)
    actor_loss.backward()
    assert algo.actor.heads[0].weight.grad.abs().sum() > 0  # through the reparametrized action
    assert all(p.grad is None for p in algo.critic_params)  # no wasted weight gradients
    assert all(p.requires_grad for p in algo.critic_params)  # the critic step still trains them
