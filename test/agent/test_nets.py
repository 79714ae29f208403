"""Nets built from a spec: head init std, LR schedulers driven by the clock, optimizer sharing."""

import copy
from typing import Any

import numpy as np
import pytest
import torch
from conftest import make_env_agent, make_spec

from slm_lab.agent.agent import Agent
from slm_lab.agent.algorithm import base
from slm_lab.agent.net import net_util


def build(spec: dict) -> Agent:
    return make_env_agent(spec)[1]


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_actor_and_critic_head_init_std(env_name: str) -> None:
    spec = make_spec("ppo", env_name)
    spec["agent"]["net"]["hid_layers"] = [64, 64]
    torch.manual_seed(0)
    nets = build(spec).algorithm.nets
    actor_head, critic_head = nets.actor.heads[0].weight, nets.critic.heads[0].weight
    assert actor_head.std().item() < 0.05
    assert actor_head.abs().max().item() < 0.05
    assert critic_head.std().item() > 0.05  # orthogonal gain 1 on a 1 x 64 row: std ~ 1/8
    assert nets.actor.heads[0].bias.abs().max().item() == 0.0
    # the body keeps its own init: a hidden layer is far from tiny
    assert nets.actor.body[0].weight.std().item() > 0.1


def test_shared_net_heads_get_their_role_std() -> None:
    spec = make_spec("a2c_gae")
    spec["agent"]["net"].update(shared=True, hid_layers=[64])
    torch.manual_seed(0)
    net = build(spec).algorithm.nets.net
    policy_head, value_head = net.heads[0].weight, net.heads[-1].weight
    assert policy_head.std().item() < 0.05
    assert value_head.std().item() > 0.05


def lrs(agent: Agent) -> list[float]:
    return [o.param_groups[0]["lr"] for o in agent.algorithm.optims]


@pytest.mark.filterwarnings(
    "ignore:Detected call of:UserWarning"
)  # schedulers stepped without training
def test_lr_scheduler_linear_to_zero_follows_frames() -> None:
    spec = make_spec("ppo")
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 1000}
    spec["agent"]["net"]["critic_optim_spec"]["lr"] = 2e-3
    agent = build(spec)
    algo, clock = agent.algorithm, agent.algorithm.clock
    assert len(algo.lr_schedulers) == 2
    assert lrs(agent) == pytest.approx([1e-3, 2e-3])
    for frame, factor in ((250, 0.75), (500, 0.5), (1000, 0.0), (1600, 0.0)):
        clock.frame = frame
        for scheduler in algo.lr_schedulers:
            scheduler.step()
        assert lrs(agent) == pytest.approx([1e-3 * factor, 2e-3 * factor], abs=1e-12)
    assert lrs(agent) == [0.0, 0.0]


def test_lr_reaches_zero_at_frame_through_training() -> None:
    """Driving the clock by real env steps: PPO trains every 64 frames; LR hits 0 at 256."""
    spec = make_spec("ppo", max_frame=256)
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 256}
    env, agent = make_env_agent(spec)
    env.reset()
    seen = []
    while not env.clock.done():
        agent.update(env.step(agent.act(env.obs)))
        if env.clock.frame % 64 == 0:
            seen.append(agent.algorithm.lr)
    assert seen == pytest.approx([1e-3 * (1 - f / 256) for f in (64, 128, 192, 256)])
    assert agent.algorithm.lr == 0.0
    assert env.clock.opt_step == 4 * 2 * 2  # 4 trainings x 2 epochs x 2 minibatches of 32


@pytest.mark.filterwarnings(
    "ignore:Detected call of:UserWarning"
)  # schedulers stepped without training
def test_linear_to_min_floors_lr() -> None:
    spec = make_spec("a2c_gae")
    spec["agent"]["net"]["lr_scheduler_spec"] = {
        "name": "LinearToMin",
        "frame": 1000,
        "min_factor": 0.1,
    }
    agent = build(spec)
    agent.algorithm.clock.frame = 500
    for scheduler in agent.algorithm.lr_schedulers:
        scheduler.step()
    assert lrs(agent) == pytest.approx([1e-3 * 0.55] * 2)
    agent.algorithm.clock.frame = 5000
    for scheduler in agent.algorithm.lr_schedulers:
        scheduler.step()
    assert lrs(agent) == pytest.approx([1e-4] * 2)


def test_use_same_optim_is_one_optimizer_over_both_nets() -> None:
    spec = make_spec("a2c_gae")
    spec["agent"]["net"]["use_same_optim"] = True
    algo = build(spec).algorithm
    assert len(algo.optims) == 1
    n_params = sum(p.numel() for p in algo.nets.parameters())
    assert sum(p.numel() for g in algo.optims[0].param_groups for p in g["params"]) == n_params


def test_continuous_policy_state_independent_log_std() -> None:
    spec = make_spec("ppo", "Pendulum-v1")
    spec["agent"]["net"]["log_std_init"] = -1.0
    agent = build(spec)
    mean, log_std = agent.algorithm.nets.pdparam(torch.zeros(3, 3))
    assert mean.shape == (3, 1)
    assert log_std.tolist() == [[-1.0]] * 3
    actions = agent.act(np.zeros((2, 3), dtype=np.float32))
    assert actions.shape == (2, 1) and actions.dtype == np.float32


def test_get_device() -> None:
    assert net_util.get_device(False) == torch.device("cpu")
    assert net_util.get_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def overflowing_loss(w: torch.nn.Parameter) -> torch.Tensor:
    """PPO's clipped surrogate where exp(log-ratio) overflows: the loss is finite (the clamp's
    bound) but its gradient is 0 * inf = NaN."""
    return torch.exp(w * 1000.0).clamp(max=1.2).sum()


@pytest.mark.parametrize("clip", [0.5, None])
def test_grad_step_takes_no_step_on_a_non_finite_gradient(clip: float | None) -> None:
    w = torch.nn.Parameter(torch.tensor([1.0, 0.0]))
    optim = torch.optim.Adam([w], lr=0.1)
    grad_step = net_util.GradStep([optim], [([w], clip)])
    loss = overflowing_loss(w)
    assert torch.isfinite(loss)
    stepped = grad_step(loss)
    assert torch.equal(w.detach(), torch.tensor([1.0, 0.0])) and w.grad is None
    assert stepped is False
    assert optim.state_dict()["state"] == {}  # Adam's moments and step count untouched
    assert grad_step(((w - 2.0) ** 2).sum()) is True
    assert torch.isfinite(w).all() and not torch.equal(w.detach(), torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize(
    "optim_cls, kwargs",
    [
        (torch.optim.Adam, {"lr": 0.01}),
        (torch.optim.Adam, {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
        (torch.optim.AdamW, {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-5}),
        (torch.optim.Adam, {"lr": 0.01, "amsgrad": True}),  # the optimizer's own update
    ],
)
def test_fused_adam_step_is_the_optimizers_own_step(optim_cls: Any, kwargs: Any) -> None:
    """bare_step's direct kernel call gives every parameter, moment and step count bit for bit
    what optimizer.step() gives, over steps with an LR schedule, a parameter without a gradient
    and a second param group, and after the optimizer's state is loaded again (a resume)."""
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Linear(8, 2)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    optims = [
        optim_cls(
            [{"params": n[0].parameters()}, {"params": n[1].parameters(), "lr": 0.003}],
            fused=True,
            **kwargs,
        )
        for n in nets
    ]
    schedulers = [torch.optim.lr_scheduler.StepLR(o, 3, 0.5) for o in optims]
    bare = net_util.bare_step(optims[1])
    assert isinstance(bare, net_util.FusedAdamStep)
    for i in range(12):
        x = torch.randn(5, 3)
        for net, optim in zip(nets, optims, strict=True):
            optim.zero_grad(set_to_none=True)
            net(x).pow(2).mean().backward()
            if i % 4 == 1:  # a parameter without a gradient is left alone
                net[0].bias.grad = None
        optims[0].step()
        bare()
        for scheduler in schedulers:
            scheduler.step()
        if i == 6:
            optims[1].load_state_dict(copy.deepcopy(optims[1].state_dict()))
    assert all(
        torch.equal(a, b) for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True)
    )
    states = [o.state_dict()["state"] for o in optims]
    assert states[0].keys() == states[1].keys()
    for k in states[0]:
        assert all(torch.equal(states[0][k][m], states[1][k][m]) for m in states[0][k])


def test_fused_adam_step_after_a_group_of_another_dtype_is_added() -> None:
    """A param group added after bare_step was built, in another dtype than the first: the step
    is still the optimizer's own, bit for bit (one kernel call would take the two dtypes)."""
    torch.manual_seed(0)
    weights = [[torch.nn.Parameter(torch.randn(4)) for _ in range(2)] for _ in range(2)]
    weights[1] = [torch.nn.Parameter(w.detach().clone()) for w in weights[0]]
    extra = [torch.nn.Parameter(torch.randn(3, dtype=torch.float64)) for _ in range(2)]
    extra[1] = torch.nn.Parameter(extra[0].detach().clone())
    optims = [torch.optim.Adam(w, lr=0.01, fused=True) for w in weights]
    bare = net_util.bare_step(optims[1])
    for i in range(6):
        if i == 2:
            for optim, e in zip(optims, extra, strict=True):
                optim.add_param_group({"params": [e]})
        for ws, e in zip(weights, extra, strict=True):
            for p in [*ws, e]:
                p.grad = None
            (sum(w.pow(2).sum() for w in ws) + e.pow(3).sum()).backward()
        optims[0].step()
        bare()
    assert isinstance(bare, net_util.FusedAdamStep) and not bare.one_kind
    assert all(torch.equal(a, b) for a, b in zip(weights[0], weights[1], strict=True))
    assert torch.equal(extra[0], extra[1])


def test_grad_step_takes_a_step_whose_finite_values_sum_past_the_largest_float() -> None:
    """A finite loss and gradient norm whose sum overflows float32 are still finite: the step is
    taken (only NaN or inf skips one)."""
    w = torch.nn.Parameter(torch.tensor([1.0]))
    # lr 1e-37: a normal float32 (the session flushes denormals), a step of 30
    grad_step = net_util.GradStep([torch.optim.SGD([w], lr=1e-37)], [([w], None)])
    loss = (w * 3e38).sum()  # loss 3e38, gradient 3e38: their sum is inf in float32
    assert torch.isinf(loss.detach() + 3e38)
    assert grad_step(loss) is True
    assert torch.isfinite(w).all() and not torch.equal(w.detach(), torch.tensor([1.0]))


def test_optimize_skips_a_non_finite_gradient_uncounted_and_the_net_stays_finite() -> None:
    algo = make_env_agent(make_spec("ppo"))[1].algorithm
    before = [p.detach().clone() for p in algo.nets.parameters()]
    first = next(algo.nets.parameters())
    opt_step = algo.clock.opt_step
    assert algo.optimize(overflowing_loss(first)) is False
    assert algo.clock.opt_step == opt_step
    assert all(torch.equal(p, b) for p, b in zip(algo.nets.parameters(), before, strict=True))
    assert algo.optimize((first**2).sum()) is True and algo.clock.opt_step == opt_step + 1


def test_optimize_gives_up_after_too_many_non_finite_steps_in_a_row() -> None:
    """A net whose every gradient step is skipped stays frozen: the session stops with one line
    once MAX_SKIPPED_STEPS in a row were skipped over MIN_SPANNED_CALLS training calls. Not
    sooner (a bad batch can skip the rest of its call), and a finite step starts the count
    again. Each optimizer counts its own (SAC's actor can freeze while its critic steps)."""
    algo = make_env_agent(make_spec("ppo"))[1].algorithm
    first = next(algo.nets.parameters())
    other = torch.nn.Parameter(torch.zeros(2))  # a second optimizer that always steps
    other_step = net_util.GradStep([torch.optim.SGD([other], lr=0.1)], [([other], None)])

    def nan_loss() -> torch.Tensor:
        return first.sum() * float("nan")

    def skip(n: int) -> None:
        for _ in range(n):
            assert algo.optimize(nan_loss()) is False
            assert algo.optimize((other**2).sum() + 1.0, other_step) is True

    algo.train_calls = 1
    skip(3 * base.MAX_SKIPPED_STEPS)  # in one call, however many: the next batch may step
    for _ in range(base.MIN_SPANNED_CALLS - 2):  # and into the calls after it, one too few
        algo.train_calls += 1
        skip(1)
    assert algo.optimize((first**2).sum()) is True  # the count starts again
    algo.train_calls += 1
    skip(base.MAX_SKIPPED_STEPS)
    for _ in range(base.MIN_SPANNED_CALLS - 2):
        algo.train_calls += 1
        skip(1)
    algo.train_calls += 1
    with pytest.raises(
        base.TrainingDiverged,
        match=rf"^{base.MAX_SKIPPED_STEPS + base.MIN_SPANNED_CALLS - 1} gradient steps in a row, "
        rf"over {base.MIN_SPANNED_CALLS} training calls, had a non-finite loss",
    ):
        algo.optimize(nan_loss())
