"""Self-imitation: episode returns in the SIL replay (vector envs, truncation, wrap-around), the
SIL loss worked by hand, spec checks and a resume round trip through the CLI."""

import contextlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import (
    TIMING_COLUMNS,
    invoke,
    make_algorithm,
    make_spec,
    read_session_df,
    run_dirs,
    write_spec_file,
)

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.ppo import PPO
from slm_lab.agent.algorithm.registry import ALGORITHMS
from slm_lab.agent.algorithm.sil import SelfImitation
from slm_lab.agent.memory.base import Batch, Layout, Transition
from slm_lab.agent.memory.config import SILMemoryConfig
from slm_lab.agent.memory.sil import SILReplay
from slm_lab.experiment import control
from slm_lab.lib.math_util import calc_returns
from slm_lab.spec import spec_util
from slm_lab.spec.spec_util import SpecError

GAMMA = 0.5
CPU = torch.device("cpu")


def replay(max_size: int = 100, batch_size: int = 4, num_envs: int = 2, cer: bool = False):
    config = SILMemoryConfig(
        name="OnPolicyBatchReplay", max_size=max_size, batch_size=batch_size, use_cer=cer
    )
    layout = Layout(num_envs, (1,), np.dtype(np.float32), (), np.dtype(np.int64))
    return SILReplay(config, layout, gamma=GAMMA)


def transition(obs: np.ndarray, rewards, term, trunc) -> Transition:
    """One vector step of `obs` (the next obs is obs + 1: SIL stores no successors)."""
    n = len(obs)
    return Transition(
        obs,
        np.arange(n),
        np.asarray(rewards, dtype=np.float32),
        obs + 1,
        np.asarray(term),
        np.asarray(trunc),
    )


def step(mem: SILReplay, t: int, rewards, term=(False, False), trunc=(False, False), values=None):
    """Env e's obs at step t is 10 * e + t (so rows are traceable)."""
    obs = np.array([[10.0 * e + t] for e in range(mem.num_envs)], dtype=np.float32)
    mem.add(
        transition(obs, rewards, term, trunc),
        None if values is None else np.asarray(values, dtype=np.float32),
    )


def assert_same_batch(a: Batch, b: Batch) -> None:
    """The SIL fields (obs, actions, returns) equal; the rest absent from both."""
    for k, x, y in zip(Batch._fields, a, b, strict=True):
        assert (x is None) == (y is None), k
        if x is not None:
            torch.testing.assert_close(x, y)


def stored(mem: SILReplay) -> dict[float, float]:
    """obs -> return of every stored row."""
    n = mem.size
    return dict(zip(mem.data["obs"][:n, 0].tolist(), mem.data["returns"][:n].tolist(), strict=True))


def test_discounted_returns_by_hand() -> None:
    rewards = torch.tensor([[1.0], [2.0], [4.0]])  # [T, N]: one env's episode
    no_end = torch.zeros(3, 1, dtype=torch.bool)
    torch.testing.assert_close(
        calc_returns(rewards, no_end, 0.5), torch.tensor([[3.0], [4.0], [4.0]])
    )
    # bootstrapped: R_2 = 4 + 0.5 * 8 = 8, R_1 = 2 + 4 = 6, R_0 = 1 + 3 = 4
    torch.testing.assert_close(
        calc_returns(rewards, no_end, 0.5, bootstrap=8.0), torch.tensor([[4.0], [6.0], [8.0]])
    )


def test_episode_returns_per_env_over_whole_episodes() -> None:
    mem = replay()
    # env 0: rewards 1, 2, 4 then terminated; env 1: rewards 1, 1, 1, 1 then truncated, V = 8
    step(mem, 0, [1, 1])
    step(mem, 1, [2, 1])
    assert mem.size == 0 and not mem.ready()  # nothing is sampled before an episode is over
    step(mem, 2, [4, 1], term=(True, False))
    assert stored(mem) == {0.0: 3.0, 1.0: 4.0, 2.0: 4.0}
    # env 0's next episode starts from 0 again (obs 3 is its first step)
    step(mem, 3, [1, 1], trunc=(False, True), values=[99.0, 8.0])
    # env 1: R_3 = 1 + 0.5 * 8 = 5, R_2 = 1 + 2.5, R_1 = 1 + 1.75, R_0 = 1 + 1.375
    got = stored(mem)
    assert {k: got[k] for k in (10.0, 11.0, 12.0, 13.0)} == {
        10.0: 2.375,
        11.0: 2.75,
        12.0: 3.5,
        13.0: 5.0,
    }
    assert 3.0 not in got  # env 0's second episode is still running
    assert mem.ready()
    # a truncation that also terminated does not bootstrap
    step(mem, 4, [2, 0], term=(True, False), trunc=(True, False), values=[99.0, 0.0])
    assert stored(mem)[4.0] == 2.0 and stored(mem)[3.0] == 2.0  # 1 + 0.5 * 2


def test_long_episodes_grow_the_stage_and_wrap_the_store() -> None:
    mem = replay(max_size=300, num_envs=1)
    n = 700  # longer than the initial stage (256) and than the store
    for t in range(n):
        mem.add(transition(np.array([[t]], dtype=np.float32), [1.0], [t == n - 1], [False]))
    assert mem.size == 300
    assert mem.stage["obs"].shape[1] == 300  # staged obs are a ring of at most max_size steps
    got = stored(mem)
    assert sorted(got) == [float(t) for t in range(400, 700)]  # the episode's last 300 steps
    for t in (400, 650, 699):  # n - t rewards of 1 to the end: sum of 0.5^k = 2 * (1 - 0.5^(n-t))
        assert got[float(t)] == pytest.approx(2 * (1 - GAMMA ** (n - t)))
    # the next episode overwrites the oldest rows first
    for t in range(3):
        mem.add(transition(np.array([[1000.0 + t]], dtype=np.float32), [1.0], [t == 2], [False]))
    got = stored(mem)
    assert 400.0 not in got and 402.0 not in got and 403.0 in got and 1002.0 in got


def test_cer_puts_the_newest_episode_ends_last_and_sampling_is_seeded() -> None:
    torch.manual_seed(3)
    mem = replay(batch_size=5, cer=True)
    for t in range(4):
        step(mem, t, [1, 1], term=(t == 3, t == 1))
    batch = mem.sample(CPU)
    assert batch.obs.shape == (5, 1) and batch.rewards.dtype == torch.float32  # R in rewards
    for _ in range(10):  # env 0's last step, the newest episode end, closes every batch
        assert mem.sample(CPU).obs[-1, 0].item() == 3.0
    torch.manual_seed(3)
    plain = replay(batch_size=5)
    for t in range(4):
        step(plain, t, [1, 1], term=(t == 3, t == 1))
    assert any(plain.sample(CPU).obs[-1, 0].item() != 3.0 for _ in range(10))
    torch.manual_seed(3)
    mem2 = replay(batch_size=5, cer=True)
    for t in range(4):
        step(mem2, t, [1, 1], term=(t == 3, t == 1))
    assert_same_batch(mem2.sample(CPU), batch)


def test_state_round_trip_through_torch_save_keeps_staged_episodes_and_rng(
    tmp_path: Path,
) -> None:
    mem = replay()
    step(mem, 0, [1, 1], term=(True, False))
    step(mem, 1, [2, 2])
    mem.sample(CPU)  # the generator has moved on from its seed
    torch.save(mem.state_dict(), tmp_path / "mem.pt")
    mem2 = replay()
    mem2.load_state_dict(torch.load(tmp_path / "mem.pt", weights_only=True))
    for m in (mem, mem2):
        step(m, 2, [4, 4], term=(False, True))
    assert stored(mem) == stored(mem2)
    assert stored(mem2)[10.0] == 1 + 0.5 * (2 + 0.5 * 4)  # staged steps survived the round trip
    assert_same_batch(mem.sample(CPU), mem2.sample(CPU))
    mem2.mark_truncated()  # a resume that restarted episodes drops the partial ones
    assert mem2.stage_len.tolist() == [0, 0]


# -- the SIL loss worked by hand -------------------------------------------------------------
def sil_algo(algo: str = "sil") -> ActorCritic:
    spec = make_spec(algo, "CartPole-v1")
    spec["agent"]["net"]["hid_layers"] = []  # heads only: outputs are set by hand
    spec["agent"]["algorithm"]["training_iter"] = 1
    spec["agent"]["algorithm"]["sil_val_loss_coef"] = 0.5
    spec["agent"]["net"]["clip_grad_val"] = None
    return make_algorithm(spec)


def test_sil_loss_imitates_only_better_than_expected_transitions() -> None:
    algo = sil_algo()
    actor, critic = algo.nets.actor, algo.nets.critic
    with torch.no_grad():  # pi(.|s) = softmax([0, log 3]) = [0.25, 0.75]; V(s) = 2
        actor.heads[0].weight.zero_()
        actor.heads[0].bias.copy_(torch.tensor([0.0, math.log(3.0)]))
        critic.heads[0].weight.zero_()
        critic.heads[0].bias.fill_(2.0)
    # two transitions: action 0 with R = 6 (A+ = 4), action 1 with R = 1 (A+ = 0)
    batch = Batch(
        obs=torch.zeros(2, 4), actions=torch.tensor([0, 1]), rewards=torch.tensor([6.0, 1.0])
    )
    algo.sil.memory.sample = lambda device: batch
    algo.sil.memory.size = algo.sil.memory.batch_size  # ready
    for optim in algo.optims:
        optim.param_groups[0]["lr"] = 0.0  # look at the loss and gradients, keep the weights
    algo.sil.train()
    loss = algo.sil.loss
    policy_loss = -(math.log(0.25) * 4 + 0) / 2
    val_loss = 0.5 * (4**2 + 0) / 2
    assert loss == pytest.approx(1.0 * policy_loss + 0.5 * val_loss, rel=1e-5)
    # d/dlogits of -log pi(0) * 4 / 2 = 2 * (pi - onehot(0)) = [-1.5, 1.5]; the second
    # transition (A+ = 0) adds nothing, else the gradient would have a +-0.5 * (pi - onehot(1))
    torch.testing.assert_close(actor.heads[0].bias.grad, torch.tensor([-1.5, 1.5]))
    # d/dV of 0.5 * 0.5 * mean(max(R - V, 0)^2) = 0.25 * (-2 * 4) / 2 = -1: only the
    # under-estimated transition pulls the value up
    assert critic.heads[0].bias.grad.item() == pytest.approx(-1.0)


def test_sil_takes_no_step_when_nothing_beats_its_value() -> None:
    algo = sil_algo()
    batch = Batch(
        obs=torch.zeros(2, 4), actions=torch.tensor([0, 1]), rewards=torch.full((2,), -1e3)
    )
    algo.sil.memory.sample = lambda device: batch
    algo.sil.memory.size = algo.sil.memory.batch_size  # ready
    before = [p.detach().clone() for p in algo.nets.parameters()]
    algo.sil.train()
    assert algo.sil.loss == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, algo.nets.parameters(), strict=True))
    assert algo.clock.opt_step == 0


def test_truncated_episode_returns_bootstrap_from_the_critic() -> None:
    algo = sil_algo()
    with torch.no_grad():  # V(s) = 2 everywhere
        algo.nets.critic.heads[0].weight.zero_()
        algo.nets.critic.heads[0].bias.fill_(2.0)
    obs = np.zeros((2, 4), dtype=np.float32)
    algo.update(
        Transition(
            obs,
            np.array([0, 1]),
            np.array([1.0, 1.0], dtype=np.float32),
            obs,
            np.array([False, True]),
            np.array([True, True]),  # env 0 cut by a time limit, env 1 terminated (and cut)
        )
    )
    returns = sorted(algo.sil.memory.data["returns"][: algo.sil.memory.size].tolist())
    assert returns == pytest.approx([1.0, 1.0 + 0.99 * 2.0])


def test_ppo_sil_is_ppo_with_self_imitation() -> None:
    assert ALGORITHMS["PPOSIL"] is PPO and ALGORITHMS["SIL"] is ActorCritic
    algo = sil_algo("ppo_sil")
    assert type(algo) is PPO and isinstance(algo.sil, SelfImitation)
    assert algo.memory.size == 32  # PPO's time_horizon, not the SIL replay's sizes
    assert algo.sil.memory.batch_size == 16 and algo.sil.memory.use_cer
    # a training call is PPO's clipped update, not A2C's, then the self-imitation steps
    assert PPO.train_actor_critic is not ActorCritic.train_actor_critic
    calls = []
    algo.train_actor_critic = lambda: calls.append("ppo") or 1.5
    algo.sil.train = lambda: calls.append("sil")
    assert algo.train() == 1.5 and calls == ["ppo", "sil"]
    assert make_algorithm(make_spec("ppo")).sil is None  # plain PPO imitates nothing


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_size": None}, "agent.memory.max_size: required (int), missing"),
        (
            {"sil_replay_name": "PrioritizedReplay"},
            "agent.memory.sil_replay_name: 'PrioritizedReplay' is not one of Replay",
        ),
        ({"batch_size": 5000}, "agent.memory.batch_size: must be <= max_size (1000)"),
    ],
)
def test_sil_spec_checks(change: dict, message: str) -> None:
    spec = make_spec("ppo_sil")
    spec["agent"]["memory"].update(change)
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        spec_util.validate(spec)


class Interrupted(BaseException):
    """Stands in for a kill: the session stops between two steps, uncaught."""


@pytest.mark.cli
def test_interrupted_ppo_sil_run_resumes_to_the_same_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "ppo_sil_resume"
    spec = make_spec("ppo_sil", max_frame=600, random_seed=5)
    spec_file = write_spec_file(tmp_path / "spec.json", {name: spec})
    update = ActorCritic.update  # PPO's: the agent binds its algorithm's update when built

    def update_until_killed(self: ActorCritic, t: Transition) -> None:
        if self.clock.frame >= 350:
            raise Interrupted
        update(self, t)

    with contextlib.chdir(tmp_path):
        assert invoke(["run", str(spec_file), name, "dev"]).exit_code == 0
        [dir_a] = run_dirs(Path("data"))
        with monkeypatch.context() as m, pytest.raises(Interrupted):
            m.setattr(ActorCritic, "update", update_until_killed)
            m.setattr(control, "SAVE_INTERVAL_S", 0.0, raising=False)
            invoke(["run", str(spec_file), name, "dev"])
        [dir_b] = set(run_dirs(Path("data"))) - {dir_a}
        result = invoke(["run", str(spec_file), name, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
        df_a, df_b = read_session_df(dir_a), read_session_df(dir_b)
    assert df_a["frame"].tolist() == list(range(100, 601, 100))
    assert df_a["sil_loss"].notna().any()
    pd.testing.assert_frame_equal(
        df_a.drop(columns=TIMING_COLUMNS), df_b.drop(columns=TIMING_COLUMNS)
    )
