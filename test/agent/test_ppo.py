"""PPO's minibatches (the leftover merged into the last one), its advantage normalization
(standardized or DreamerV3's percentile scale, whose state resumes), a percentile run through
the CLI, and the log-probs and values a shared net's acting keeps for the batch."""

import contextlib
import copy
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import (
    TIMING_COLUMNS,
    env_of,
    invoke,
    make_algorithm,
    make_spec,
    read_session_df,
    run_dirs,
    write_spec_file,
)

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.algorithm.ppo import PPO, minibatch_idxs
from slm_lab.agent.net import net_util
from slm_lab.experiment import control

NO_ENTROPY = {"name": "no_decay", "start_val": 0.0, "end_val": 0.0, "start_step": 0, "end_step": 0}


def build(num_envs: int, algo: str = "ppo", **algorithm: Any) -> PPO:
    spec = make_spec(algo, num_envs=num_envs)
    spec["agent"]["algorithm"].update(algorithm)
    return make_algorithm(spec)


def fill(algo: PPO) -> None:
    """Act in the env until the memory holds a batch, without training."""
    env = env_of(algo)
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
    assert math.isfinite(algo.stats["entropy"])
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


@pytest.mark.parametrize("recompute_advs", [False, True])
def test_recompute_advs_takes_the_critic_each_epoch_starts_with(recompute_advs: bool) -> None:
    """With recompute_advs each epoch after the first trains on advantages computed from the
    critic as the previous epoch left it; without it every epoch trains on the rollout's."""
    algo = build(
        num_envs=2,
        time_horizon=8,
        minibatch_size=4,
        training_epoch=3,
        recompute_advs=recompute_advs,
    )
    fill(algo)
    batch = algo.memory.sample(algo.device)
    algo.memory.sample = lambda device: batch
    T, N = batch.rewards.shape
    obs = flat(batch.obs).float()
    computed: list[tuple[torch.Tensor, ...]] = []  # (V(s_t) given, critic's V now, advs)
    calc = algo.calc_advs_v_targets

    def recording(batch_: Any, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        advs, v_targets = calc(batch_, values)
        with torch.no_grad():
            critic_now = algo.denorm_v(algo.nets.value(obs)).view(T, N)
        computed.append((values.clone(), critic_now, flat(advs).clone()))
        return advs, v_targets

    trained_advs: list[torch.Tensor] = []  # each minibatch's advantages as computed
    normalize_advs = algo.normalize_advs

    def recording_advs(advs: torch.Tensor) -> torch.Tensor:
        trained_advs.append(advs.clone())
        return normalize_advs(advs)

    algo.calc_advs_v_targets, algo.normalize_advs = recording, recording_advs
    algo.train()
    assert len(computed) == (3 if recompute_advs else 1)
    for values, critic_now, _ in computed:
        torch.testing.assert_close(values, critic_now)  # the critic of that moment
    if recompute_advs:  # the critic moved between epochs, and so did the advantages
        assert not torch.allclose(computed[0][2], computed[1][2])
    per_epoch = [torch.cat(trained_advs[i : i + 4]).sort().values for i in (0, 4, 8)]
    for epoch, advs in enumerate(per_epoch):
        expected = computed[epoch if recompute_advs else 0][2]
        torch.testing.assert_close(advs, expected.sort().values)


PRIMED_PERCENTILES = (-2.0, 3.0)  # P5 and P95 before the step: a scale above 1 after it


def test_percentile_advantages_in_the_loss() -> None:
    """As test_normalize_advs (loss = -mean(A) at the first step), with the percentile scale
    primed: after the minibatch's update, A is divided by P95 - P5, not centered."""
    algo = build(
        num_envs=2,
        time_horizon=16,
        minibatch_size=32,
        training_epoch=1,
        val_loss_coef=0.0,
        entropy_coef_spec=NO_ENTROPY,
        normalize_advantages="percentile",
    )
    fill(algo)
    batch = algo.memory.sample(algo.device)
    algo.memory.sample = lambda device: batch
    T, N = batch.rewards.shape
    with torch.no_grad():
        values = algo.nets.value(flat(batch.obs).float()).view(T, N)
        advs, _ = algo.calc_advs_v_targets(batch, values)
    algo.adv_scale.percentiles.copy_(torch.tensor(PRIMED_PERCENTILES))
    p5, p95 = torch.quantile(flat(advs), torch.tensor([0.05, 0.95])).tolist()
    low = 0.99 * PRIMED_PERCENTILES[0] + 0.01 * p5
    high = 0.99 * PRIMED_PERCENTILES[1] + 0.01 * p95
    assert high - low > 1.0
    loss = algo.train()
    assert loss == pytest.approx(-advs.mean().item() / (high - low), rel=1e-5)
    assert algo.adv_scale.percentiles.tolist() == pytest.approx([low, high], rel=1e-6)


@pytest.mark.parametrize("algo_name", ["ppo", "ppo_sil"])
def test_percentile_scale_is_saved_state(algo_name: str) -> None:
    a = build(num_envs=2, algo=algo_name, normalize_advantages="percentile")
    fill(a)
    a.train()
    state = copy.deepcopy(a.state_dict())
    b = build(num_envs=2, algo=algo_name, normalize_advantages="percentile")
    b.load_state_dict(state)
    assert not torch.equal(a.adv_scale.percentiles, torch.zeros(2))
    assert torch.equal(b.adv_scale.percentiles, a.adv_scale.percentiles)


def test_standardized_advantages_keep_the_saved_state_as_it_was() -> None:
    assert build(num_envs=2).state_dict()["extra"].keys() == {"v_rms"}


PERCENTILE_RUN = "ppo_percentile"
PERCENTILE_FRAMES = 600
STOP_FRAME = 350  # after the checkpoint at 300, in the middle of a 64-frame batch


class Interrupted(BaseException):
    """Stands in for a kill: the session stops between two steps, uncaught."""


@pytest.mark.cli
def test_percentile_run_finishes_and_resumes_to_the_same_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec("ppo", max_frame=PERCENTILE_FRAMES, random_seed=7)
    spec["agent"]["algorithm"]["normalize_advantages"] = "percentile"
    spec_file = write_spec_file(tmp_path / "spec.json", {PERCENTILE_RUN: spec})
    update = Algorithm.update  # every algorithm's update reaches it

    def update_until_killed(self: Algorithm, *args: object) -> None:
        if self.clock.frame >= STOP_FRAME:
            raise Interrupted
        update(self, *args)

    with contextlib.chdir(tmp_path):
        result = invoke(["run", str(spec_file), PERCENTILE_RUN, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        [dir_a] = run_dirs(Path("data"))
        with monkeypatch.context() as m, pytest.raises(Interrupted):
            m.setattr(Algorithm, "update", update_until_killed)
            m.setattr(control, "SAVE_INTERVAL_S", 0.0, raising=False)
            invoke(["run", str(spec_file), PERCENTILE_RUN, "dev"])
        [dir_b] = set(run_dirs(Path("data"))) - {dir_a}
        result = invoke(["run", str(spec_file), PERCENTILE_RUN, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
        df_a, df_b = read_session_df(dir_a), read_session_df(dir_b)
    assert df_a["frame"].tolist() == list(range(100, PERCENTILE_FRAMES + 1, 100))
    assert df_a["opt_step"].tolist() == [4, 12, 16, 24, 28, 36]  # 4 minibatches per 64 frames
    assert all(math.isfinite(x) for x in df_a["loss"])
    pd.testing.assert_frame_equal(
        df_a.drop(columns=TIMING_COLUMNS), df_b.drop(columns=TIMING_COLUMNS)
    )


@pytest.mark.parametrize("clip_vloss", [False, True])
def test_value_loss_weight_of_each_path(clip_vloss: bool) -> None:
    """At the first minibatch step V equals the old V, so the clip moves nothing and both paths
    see the same squared errors: the unclipped path (MSELoss) reports their mean, the clipped
    path half of it, as SLM Lab v5 and CleanRL weigh it."""
    algo = build(
        num_envs=2,
        time_horizon=16,
        minibatch_size=32,
        training_epoch=1,
        clip_vloss=clip_vloss,
        entropy_coef_spec=NO_ENTROPY,
    )
    fill(algo)
    batch = algo.memory.sample(algo.device)
    algo.memory.sample = lambda device: batch
    T, N = batch.rewards.shape
    with torch.no_grad():
        values = algo.nets.value(flat(batch.obs).float()).view(T, N)
        _, v_targets = algo.calc_advs_v_targets(batch, values)
    mse = (flat(values) - flat(v_targets)).pow(2).mean().item()
    algo.train()
    expected = 0.5 * mse if clip_vloss else mse
    assert algo.stats["value_loss"] == pytest.approx(expected, rel=1e-4)


def build_shared(env: str) -> PPO:
    spec = make_spec("ppo", env=env, num_envs=3)
    spec["agent"]["net"]["shared"] = True
    return make_algorithm(spec)


def fill_acting(algo: PPO, restored_rows: int = 0) -> None:
    """Act and update until the memory holds a batch, without training; the first
    `restored_rows` steps go to the memory directly, as rows a resume restores."""
    algo.to_train = lambda: False
    env = env_of(algo)
    env.reset()
    while not algo.memory.ready():
        t = env.step(algo.act(env.obs))
        if algo.memory.ptr < restored_rows:
            algo.acted = None
            algo.memory.add(t)
        else:
            algo.update(t)


def old_pass(algo: PPO, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad(), net_util.eval_mode(algo.nets):
        mean, log_std, v_preds = algo.nets.pdparam_value(obs)
        return algo.log_prob_entropy(mean, log_std, actions)[0], v_preds


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_a_shared_net_keeps_the_log_probs_and_values_it_acted_with(env: str) -> None:
    """With one actor-critic body, acting's forward gives log pi(a|s) and V(s) of every stored
    step: the batch takes them (no second pass), equal to that pass up to float rounding."""
    algo = build_shared(env)
    assert algo.keep_acted
    fill_acting(algo)
    batch = algo.memory.sample(algo.device)
    T = batch.rewards.shape[0]
    obs, actions = flat(batch.obs).float(), flat(batch.actions)
    expected = old_pass(algo, obs, actions)
    seen = record_forwards(algo)
    kept = algo.old_log_probs_values(obs, actions, T)
    assert seen == []
    for got, want in zip(kept, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert algo.kept_rows == 0  # the next batch starts from its first row
    fill_acting(algo)
    assert math.isfinite(algo.train())  # the kept rows (inference tensors) in a gradient step


def test_a_batch_with_rows_not_kept_takes_the_pass() -> None:
    """Rows restored from a checkpoint without kept values: the whole batch is run once."""
    algo = build_shared("CartPole-v1")
    fill_acting(algo, restored_rows=5)
    batch = algo.memory.sample(algo.device)
    T, N = batch.rewards.shape
    assert algo.kept_rows == 0  # rows 0-4 have none, so none after them are kept
    obs, actions = flat(batch.obs).float(), flat(batch.actions)
    seen = record_forwards(algo)
    kept = algo.old_log_probs_values(obs, actions, T)
    assert [x.shape[0] for x in seen] == [T * N]
    for got, want in zip(kept, old_pass(algo, obs, actions), strict=True):
        assert torch.equal(got, want)


def test_evaluation_and_separate_nets_keep_nothing() -> None:
    """Acting in evaluation stores no row; separate actor and critic nets give no V(s) when
    acting, so their PPO runs the pass."""
    algo = build_shared("CartPole-v1")
    env = env_of(algo)
    env.reset()
    algo.eval_mode = True
    algo.act(env.obs)
    assert algo.acted is None
    assert not build(3).keep_acted
