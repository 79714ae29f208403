"""Value-based algorithms: the three Q-targets on a hand-built batch, SARSA's target, target updates."""

import copy

import numpy as np
import pytest
import torch
from conftest import env_of, make_algorithm, make_env_agent
from torch import nn

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.memory.base import Batch, Transition
from slm_lab.agent.net import net_util

GAMMA = 0.9


class FixedQ(nn.Module):
    """Q(s, .) = s @ W: a linear table we set by hand (returns a list of heads like every net)."""

    def __init__(self, weight: list[list[float]]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(weight))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [x @ self.weight]


def dqn_spec(name: str, per: bool = False) -> dict:
    memory = (
        {"name": "PrioritizedReplay", "alpha": 0.6, "epsilon": 1e-6, "beta_end_step": 100}
        if per
        else {"name": "Replay"}
    )
    return {
        "name": name,
        "algorithm": {
            "name": name,
            "action_policy": "epsilon_greedy",
            "gamma": GAMMA,
            "explore_var_spec": {"name": "no_decay", "start_val": 0.1},
        },
        "memory": {**memory, "max_size": 100, "batch_size": 4},
        "net": {
            "type": "MLPNet",
            "hid_layers": [8],
            "optim_spec": {"name": "SGD", "lr": 0.1},
            "update_type": "replace",
            "update_frequency": 1,
        },
    }


ENV = {"name": "CartPole-v1", "num_envs": 1, "max_frame": 1000}


def full_spec(agent: dict) -> dict:
    return {"agent": agent, "env": ENV, "meta": {}}


def make_algo(name: str, per: bool = False) -> Algorithm:
    return make_algorithm(full_spec(dqn_spec(name, per)))


def use_fixed_q(algo: Algorithm, online: list[list[float]], target: list[list[float]]) -> None:
    """Swap in hand-set Q tables (the target one when the algorithm has a target net); the
    gradient step leaves them as they are (lr 0)."""
    algo.net = FixedQ(online)
    if getattr(algo, "target", None) is not None:
        algo.target.nets, algo.target.targets = [algo.net], [FixedQ(target)]
    algo.grad_step = net_util.GradStep([torch.optim.SGD(algo.net.parameters(), lr=0.0)], [])


# next state s' = e_0: online Q(s', .) = [1, 3]; target Q(s', .) = [2, 0.5]
ONLINE = [[1.0, 3.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
TARGET = [[2.0, 0.5], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
NEXT_OBS = torch.tensor([[1.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("VanillaDQN", 3.0),  # max of the online net
        ("DQN", 2.0),  # max of the target net
        ("DoubleDQN", 0.5),  # the target net's value of the online net's argmax (action 1)
    ],
)
def test_q_targets_differ_as_named(name: str, expected: float) -> None:
    algo = make_algo(name)
    assert (algo.target is None) == (name == "VanillaDQN")
    use_fixed_q(algo, ONLINE, TARGET)
    assert algo.next_q(NEXT_OBS).item() == pytest.approx(expected)


def test_train_batch_uses_target_and_terminal_mask() -> None:
    """y = r + gamma * (1 - terminated) * max_a Q_target(s', a), checked through the loss."""
    algo = make_algo("DQN")
    use_fixed_q(algo, ONLINE, TARGET)
    algo.loss_fn = nn.MSELoss(reduction="none")
    batch = Batch(
        obs=torch.tensor([[1.0, 0, 0, 0], [1.0, 0, 0, 0]]),
        actions=torch.tensor([0, 1]),
        rewards=torch.tensor([1.0, 1.0]),
        next_obs=torch.cat([NEXT_OBS, NEXT_OBS]),
        terminateds=torch.tensor([False, True]),
        dones=torch.tensor([False, True]),
    )
    # q_preds = [1, 3]; targets = [1 + 0.9 * 2, 1] = [2.8, 1]; loss = mean((1-2.8)^2, (3-1)^2)
    stats = {k: v.item() for k, v in algo.train_batch(batch).items()}
    assert stats == pytest.approx(
        {
            "loss": ((1 - 2.8) ** 2 + (3 - 1) ** 2) / 2,
            "q_mean": (1 + 3) / 2,
            "td_error": (1.8 + 2) / 2,  # mean |Q(s, a) - y|
        }
    )


def test_replace_target_update_copies_the_online_net() -> None:
    algo = make_algo("DQN")
    target_net = algo.target.targets[0]
    with torch.no_grad():
        for p in algo.net.parameters():
            p.add_(1.0)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(algo.net.parameters(), target_net.parameters(), strict=True)
    )
    algo.clock.frame = 5
    algo.target.update()
    assert all(
        torch.equal(a, b)
        for a, b in zip(algo.net.parameters(), target_net.parameters(), strict=True)
    )


def test_per_priorities_follow_td_errors() -> None:
    algo = make_algo("DoubleDQN", per=True)
    env = env_of(algo)
    env.reset()
    for _ in range(8):
        algo.memory.add(env.step(algo.act(env.obs)))
    batch = algo.memory.sample(algo.device)
    assert batch.weights is not None and batch.idxs is not None
    before = algo.memory.tree.total
    algo.train_batch(batch)
    assert algo.memory.tree.total != before  # priorities were rewritten from the TD errors


def test_sarsa_target_uses_next_action_and_expectation_at_boundaries() -> None:
    spec = {
        "name": "SARSA",
        "algorithm": {
            "name": "SARSA",
            "action_policy": "epsilon_greedy",
            "gamma": GAMMA,
            "training_frequency": 3,
            "explore_var_spec": {"name": "no_decay", "start_val": 0.5},
        },
        "memory": {"name": "OnPolicyBatchReplay"},
        "net": {
            "type": "MLPNet",
            "hid_layers": [8],
            "optim_spec": {"name": "SGD", "lr": 0.1},  # use_fixed_q steps with lr 0
            "loss_spec": {"name": "MSELoss"},
        },
    }
    algo = make_algorithm(full_spec(spec))
    use_fixed_q(algo, ONLINE, TARGET)
    s = np.array([[1.0, 0, 0, 0]], dtype=np.float32)
    # three steps in one env: a = 0, 1, 0; rewards 1; no episode end
    for a in (0, 1, 0):
        algo.memory.add(
            Transition(
                obs=s,
                actions=np.array([a]),
                rewards=np.array([1.0], dtype=np.float32),
                next_obs=s,
                terminateds=np.array([False]),
                truncateds=np.array([False]),
            )
        )
    loss = algo.train()
    # Q(s,.) = [1, 3]; q_preds = [1, 3, 1]
    # t=0: next action 1 -> y = 1 + 0.9*3 = 3.7; t=1: next action 0 -> y = 1 + 0.9*1 = 1.9
    # t=2 (batch end): expectation under eps-greedy(0.5): 0.25*1 + 0.75*3 = 2.5 -> y = 1 + 0.9*2.5 = 3.25
    expected = ((1 - 3.7) ** 2 + (3 - 1.9) ** 2 + (1 - 3.25) ** 2) / 3
    assert loss == pytest.approx(expected)
    assert algo.stats == pytest.approx({"q_mean": 5 / 3, "td_error": (2.7 + 1.1 + 2.25) / 3})


def test_value_based_specs_deep_copy_safe() -> None:
    """Building an agent does not mutate its spec (specs are data reused across sessions)."""
    spec = full_spec(dqn_spec("DoubleDQN", per=True))
    before = copy.deepcopy(spec)
    make_env_agent(spec)
    assert spec == before


class CountingQ(FixedQ):
    """FixedQ that counts its forwards."""

    calls = 0

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        self.calls += 1
        return super().forward(x)


def test_epsilon_greedy_acting_draws_as_the_rule_and_skips_the_net_when_all_explore() -> None:
    """A DQN's `act` gives the actions of the rule (argmax, then a uniform action and a coin per
    env from the global generator) and leaves the generator where the rule does; the Q-net runs
    only when some env acts greedily; a frame-stack-shaped batch gets one action per row."""
    algo = make_algo("DQN")
    algo.net = CountingQ(ONLINE)
    obs = np.eye(4, dtype=np.float32)[[0, 1, 0, 2, 0, 3, 0, 0]]  # 8 envs: Q(e_0, .) = [1, 3]
    scores = torch.from_numpy(obs) @ torch.tensor(ONLINE)
    for eps in (0.0, 0.3, 0.9):
        algo.explore_var.val = eps
        for seed in range(20):
            torch.manual_seed(seed)
            greedy = scores.argmax(-1)
            random = torch.randint_like(greedy, 2)
            expected = torch.where(torch.rand(greedy.shape) < eps, random, greedy)
            after = torch.rand(3)
            torch.manual_seed(seed)
            assert algo.act(obs).tolist() == expected.tolist()
            assert torch.equal(torch.rand(3), after)
    algo.explore_var.val, algo.net.calls = 1.0, 0
    for _ in range(10):
        assert algo.act(obs).shape == (8,)
    assert algo.net.calls == 0
    frames = torch.zeros(5, 3, 7, 7)  # [envs, stack, H, W]: one action per env
    torch.manual_seed(0)
    actions = algo.q_actions(lambda: torch.zeros(5, 2), frames)
    assert actions.shape == (5,) and actions.dtype == torch.int64
