"""The Atari backend on real ROMs: the observation layout of each obs_type and of the single-env
path, continuous actions, max_t, full-game scores beside clipped training rewards, life losses as
training terminals only (in the Transition and in PPO's batch), the final and reset stacks at a
game over, and evaluations that score whole games."""

import functools
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from slm_lab.agent.memory.base import Batch
from slm_lab.env import atari_backend
from slm_lab.env.atari_backend import AtariVecEnv
from slm_lab.env.backend import FinishedEpisodes
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.transition import Transition
from slm_lab.experiment.build import build
from slm_lab.experiment.evaluation import Evaluation
from slm_lab.experiment.task import SessionTask
from slm_lab.lib.config import parse
from slm_lab.spec import spec_util

pytestmark = pytest.mark.atari

FRAMES = (4, 84, 84)  # ALE's default stack of grey 84x84 frames, newest last
RAM_BYTES = 128
NOOP = 0
# Asterix with random actions: 50 points an item (so clipping shows), a life lost every ~100
# steps and a game over within ~330
SCORING_GAME = "ALE/Asterix-v5"
LIVES_ENVS = 3
MAX_GAME_STEPS = 600  # every env of the lives rollout has had a game over by then


def config_of(name: str = "ALE/Pong-v5", num_envs: int = 2, **env: Any) -> EnvConfig:
    return parse(EnvConfig, {"name": name, "num_envs": num_envs, "max_frame": 10**6, **env}, "env")


def make(name: str = "ALE/Pong-v5", num_envs: int = 2, seed: int = 0, **env: Any) -> AtariVecEnv:
    config = config_of(name, num_envs, **env)
    return AtariVecEnv(config, seed, Clock(config.max_frame, num_envs), 0.99)


def random_actions(env: AtariVecEnv, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(env.info.action_space.n, size=env.info.num_envs)


def assert_reset_stacks(obs: np.ndarray) -> None:
    """Each env's stack right after a reset: zeros before the game's first frame."""
    assert not obs[:, :-1].any()
    assert all(frame.any() for frame in obs[:, -1])


# -- observations and actions ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env", "shape", "frame_stack"),
    [
        ({}, FRAMES, 4),
        ({"obs_type": "rgb"}, (*FRAMES, 3), 4),
        ({"obs_type": "ram"}, (RAM_BYTES,), 1),
    ],
    ids=["grayscale", "rgb", "ram"],
)
def test_each_obs_type_gives_its_uint8_layout(
    env: dict[str, Any], shape: tuple[int, ...], frame_stack: int
) -> None:
    backend = make(**env)
    info = backend.info
    assert (info.observation_space.shape, info.observation_space.dtype) == (shape, np.uint8)
    assert (info.obs_dtype, info.frame_stack, info.action_space) == (
        np.uint8,
        frame_stack,
        gym.spaces.Discrete(6),
    )
    obs = backend.reset()
    assert (obs.shape, obs.dtype) == ((2, *shape), np.uint8)
    t = backend.step(info.sample_actions())
    assert (t.next_obs.shape, t.next_obs.dtype) == ((2, *shape), np.uint8)
    assert (t.rewards.dtype, t.terminateds.dtype, t.truncateds.dtype) == (
        np.float32,
        np.bool_,
        np.bool_,
    )
    if frame_stack > 1:
        assert_reset_stacks(obs)
        assert np.array_equal(t.next_obs[:, :-1], obs[:, 1:])  # the stack moved one frame on
    backend.close()


def test_continuous_actions_are_the_agents_box_in_minus_one_one() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = make(continuous=True)
    assert [str(w.message) for w in caught] == []  # nothing about ALE's float64 bounds
    space = backend.info.action_space
    assert space == gym.spaces.Box(-1.0, 1.0, (3,), np.float32) and not backend.info.is_discrete
    backend.reset()
    rng = np.random.default_rng(0)
    edges = np.array([[-1, -1, -1], [1, 1, 1]], dtype=np.float32)
    for actions in [edges, *(rng.uniform(-1, 1, (2, 3)).astype(np.float32) for _ in range(10))]:
        t = backend.step(actions)
        assert t.next_obs.shape == (2, *FRAMES)
    backend.close()


def test_continuous_actions_out_of_range_reach_ale_clipped() -> None:
    """A Gaussian policy's samples beyond [-1, 1] reach ALE as the edge of its Box: a radius
    below -1 would otherwise become negative and turn the stick around."""
    vec = atari_backend._vector(config_of(num_envs=1, continuous=True), 1, render_mode=None)
    sent: list[np.ndarray] = []
    send = vec.unwrapped.send
    vec.unwrapped.send = lambda actions: (sent.append(actions.copy()), send(actions))[1]
    vec.reset(seed=0)
    vec.step(np.array([[-1.6, 0.0, 2.5]], dtype=np.float32))
    vec.step(np.array([[1.5, -3.0, -1.2]], dtype=np.float32))
    vec.close()
    np.testing.assert_allclose(sent[0], [[0.0, 0.0, 1.0]], atol=1e-6)  # radius 0, fire 1
    np.testing.assert_allclose(sent[1], [[1.0, -np.pi, 0.0]], atol=1e-6)
    assert all(a.dtype == np.float32 for a in sent)


@pytest.mark.parametrize("obs_type", ["grayscale", "rgb"])
def test_the_single_env_path_gives_the_native_layout(obs_type: str) -> None:
    """Render and ram take single AtariEnvs; their frames are stacked as the native env's."""
    config = config_of(num_envs=1, obs_type=obs_type)
    native = atari_backend._vector(config, 1, render_mode=None)
    single = SyncVectorEnv(
        [functools.partial(atari_backend._single_env, config, None)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    assert single.single_observation_space == native.single_observation_space
    assert single.single_action_space == native.single_action_space
    for vec in (native, single):
        obs, info = vec.reset(seed=0)
        assert (obs.dtype, info["lives"].tolist()) == (np.uint8, [0])  # Pong has no lives
        assert_reset_stacks(obs)
        next_obs, *_ = vec.step(np.full(1, NOOP))
        assert np.array_equal(next_obs[:, :-1], obs[:, 1:])
        vec.close()


def single_envs(config: EnvConfig, num_envs: int) -> SyncVectorEnv:
    """The single-env path's vector env (render, enjoy --record, ram)."""
    make_env = functools.partial(atari_backend._single_env, config, None)
    return SyncVectorEnv([make_env] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)


@pytest.mark.parametrize("use_fire_reset", [False, True])
@pytest.mark.parametrize("obs_type", ["grayscale", "ram"])
def test_the_single_env_path_plays_the_native_game(obs_type: str, use_fire_reset: bool) -> None:
    """Without sticky actions or no-ops (whose draws come from different generators), the single
    env plays the native env's game, FIRE reset or not, over several lives of Breakout (FIRE
    serves each ball): the same stacks of frames, or for ram the same rewards and lives."""
    env = {"repeat_action_probability": 0.0, "noop_max": 0, "use_fire_reset": use_fire_reset}
    native = atari_backend._vector(config_of("ALE/Breakout-v5", 1, **env), 1, render_mode=None)
    single = single_envs(config_of("ALE/Breakout-v5", 1, obs_type=obs_type, **env), 1)
    rng = np.random.default_rng(0)
    (native_obs, native_info), (obs, info) = native.reset(seed=0), single.reset(seed=0)
    same_stacks, lives = [np.array_equal(native_obs, obs)], [native_info["lives"]]
    for _ in range(300):
        actions = rng.integers(native.single_action_space.n, size=1)
        native_obs, *native_out, native_info = native.step(actions)
        obs, *out, info = single.step(actions)
        assert [x.tolist() for x in out] == [x.tolist() for x in native_out]
        assert info["lives"].tolist() == native_info["lives"].tolist()
        same_stacks.append(np.array_equal(native_obs, obs))
        lives.append(native_info["lives"])
    assert len(np.unique(lives)) >= 3  # lives went: FIRE served more than one ball
    if obs_type == "grayscale":
        assert all(same_stacks)
    native.close()
    single.close()


def test_the_single_env_resets_count_no_ops_in_frames() -> None:
    """A reset presses FIRE (Breakout) and no-ops for a number of emulator frames drawn below
    noop_max, FIRE included, as the native env does: never a number of agent steps (up to 4x
    as many frames), on the grayscale and the ram single-env paths."""
    num_envs, noop_max = 16, 30
    native = atari_backend._vector(config_of("ALE/Breakout-v5", num_envs), num_envs, None)
    singles = [
        single_envs(config_of("ALE/Breakout-v5", 1, obs_type=o), num_envs)
        for o in ("grayscale", "ram")
    ]
    for vec in (native, *singles):
        _, info = vec.reset(seed=0)
        frames = info["episode_frame_number"]
        assert 1 <= frames.min() and frames.max() < noop_max, frames
        assert len(np.unique(frames)) > noop_max // 3  # drawn, not fixed
        vec.close()


@pytest.mark.parametrize("obs_type", ["grayscale", "ram"])
def test_max_t_cuts_games_at_that_many_agent_steps_on_both_paths(obs_type: str) -> None:
    """ram takes the single-env path, whose resets step no-ops and FIRE: max_t counts neither."""
    backend = make(max_t=12, obs_type=obs_type)
    backend.record_episodes()
    backend.reset()
    for step in range(1, 25):
        t = backend.step(np.full(2, NOOP))
        assert t.truncateds.tolist() == [step % 12 == 0] * 2 and not t.terminateds.any()
    finished = backend.pop_episodes()
    assert [(f.frame, f.lengths.tolist()) for f in finished] == [(24, [12, 12]), (48, [12, 12])]
    backend.close()


# -- scores, lives and the autoreset at a game over --------------------------------------------
class AleRecord:
    """What ALE's own vector env returned under a backend (its statistics and reward wrappers):
    its rewards before any clipping, its game overs and its lives after the reset and after each
    step."""

    def __init__(self, backend: AtariVecEnv) -> None:
        self.rewards: list[np.ndarray] = []
        self.terminateds: list[np.ndarray] = []
        self.truncateds: list[np.ndarray] = []
        self.lives: list[np.ndarray] = []
        native = backend.stats.env
        self._step, self._reset = native.step, native.reset
        native.step, native.reset = self.step, self.reset

    def reset(self, **kwargs: Any) -> tuple:
        obs, info = self._reset(**kwargs)
        self.lives.append(info["lives"].copy())
        return obs, info

    def step(self, actions: np.ndarray) -> tuple:
        out = self._step(actions)
        _, rewards, terminateds, truncateds, info = out
        self.rewards.append(rewards.copy())  # a copy: the wrappers above clip it in place
        self.terminateds.append(terminateds.copy())
        self.truncateds.append(truncateds.copy())
        self.lives.append(info["lives"].copy())
        return out

    def life_losses(self) -> np.ndarray:
        """[T, N]: where a life went and the game did not end."""
        lives = np.array(self.lives)
        return (lives[1:] < lives[:-1]) & ~self.game_overs()

    def game_overs(self) -> np.ndarray:
        return np.array(self.terminateds) | np.array(self.truncateds)


class Rollout(NamedTuple):
    """Random play on an AtariVecEnv with life_loss_info, beside what ALE itself returned."""

    transitions: list[Transition]
    obs: list[np.ndarray]  # the backend's `obs` after each step: what the agent acts on next
    ale: AleRecord
    finished: list[FinishedEpisodes]
    epi: int  # the clock's episode count
    total_reward: float


def play(game: str, num_envs: int, steps: int | None, **env: Any) -> Rollout:
    """Random actions for `steps` steps, or (None) until every env has had a game over."""
    backend = make(game, num_envs, life_loss_info=True, **env)
    ale = AleRecord(backend)
    backend.record_episodes()
    backend.reset()
    rng = np.random.default_rng(0)
    transitions, obs = [], []
    had_game_over = np.zeros(num_envs, dtype=bool)
    for _ in range(steps or MAX_GAME_STEPS):
        transitions.append(backend.step(random_actions(backend, rng)))
        obs.append(backend.obs)
        had_game_over |= ale.terminateds[-1] | ale.truncateds[-1]
        if steps is None and had_game_over.all():
            break
    assert steps is not None or had_game_over.all()
    finished = backend.pop_episodes()
    backend.close()
    return Rollout(transitions, obs, ale, finished, backend.clock.epi, backend.total_reward)


@pytest.fixture(scope="module")
def lives_rollout() -> Rollout:
    """Asterix, the default reward clipping, until each env has had a game over."""
    return play(SCORING_GAME, LIVES_ENVS, None)


def stacked(transitions: list[Transition], field: str) -> np.ndarray:
    return np.array([getattr(t, field) for t in transitions])


def test_the_game_score_is_unclipped_while_training_rewards_are_clipped(
    lives_rollout: Rollout,
) -> None:
    raw = np.array(lives_rollout.ale.rewards)
    assert raw.max() > 1  # Asterix's 50s: clipping shows
    assert np.array_equal(stacked(lives_rollout.transitions, "rewards"), np.clip(raw, -1, 1))
    # each game's return, as the episodes list has them: the sum of every life's points
    expected, score = [], np.zeros(LIVES_ENVS)
    for rewards, overs in zip(raw, lives_rollout.ale.game_overs(), strict=True):
        score += rewards
        expected += score[overs].tolist()
        score[overs] = 0.0
    returns = [r for f in lives_rollout.finished for r in f.returns.tolist()]
    assert returns == expected
    assert lives_rollout.total_reward == pytest.approx(np.mean(expected))


def test_a_lost_life_is_a_training_terminal_and_the_game_goes_on(lives_rollout: Rollout) -> None:
    ale, transitions = lives_rollout.ale, lives_rollout.transitions
    lost = ale.life_losses()
    assert lost.sum() >= LIVES_ENVS  # each game lost lives before its game over
    assert np.array_equal(stacked(transitions, "terminateds"), np.array(ale.terminateds) | lost)
    assert np.array_equal(stacked(transitions, "truncateds"), np.array(ale.truncateds))
    # episodes are games: the clock, the episodes list and their lengths know no life loss
    overs = ale.game_overs()
    assert lives_rollout.epi == overs.sum() == sum(len(f.returns) for f in lives_rollout.finished)
    game_start = np.zeros(LIVES_ENVS, dtype=int)
    for f in lives_rollout.finished:
        step = f.frame // LIVES_ENVS
        ended = overs[step - 1]
        assert f.lengths.tolist() == (step - game_start[ended]).tolist()
        game_start[ended] = step


def test_a_game_over_gives_the_final_stack_then_the_reset_stack(lives_rollout: Rollout) -> None:
    overs = lives_rollout.ale.game_overs()
    assert overs.sum() >= LIVES_ENVS
    for t, obs, over in zip(lives_rollout.transitions, lives_rollout.obs, overs, strict=True):
        # the transition's successor continues its stack, at a life loss and a game over alike
        assert np.array_equal(t.next_obs[:, :-1], t.obs[:, 1:])
        assert np.array_equal(obs[~over], t.next_obs[~over])
        if over.any():  # what the agent acts on next: the new game's first stack
            assert_reset_stacks(obs[over])
    for t, obs in zip(lives_rollout.transitions[1:], lives_rollout.obs, strict=False):
        assert np.array_equal(t.obs, obs)


def test_clip_reward_false_trains_on_the_games_own_rewards() -> None:
    rollout = play(SCORING_GAME, 2, 40, clip_reward=False)
    raw = np.array(rollout.ale.rewards)
    assert raw.max() > 1 and np.array_equal(stacked(rollout.transitions, "rewards"), raw)


@pytest.mark.parametrize("obs_type", ["grayscale", "ram"])
def test_a_life_lost_as_the_time_limit_ends_the_game_is_a_training_terminal(
    obs_type: str,
) -> None:
    """The step that hits max_t and loses a life ends the game truncated, a terminal for
    training (as a lost life is), with the game's true final stack and its full score; native
    and single-env paths alike. The same game without a time limit gives the reference."""

    def steps(backend: AtariVecEnv, n: int) -> list[Transition]:
        rng = np.random.default_rng(3)  # a first lost life after some points, on both paths
        backend.record_episodes()
        backend.reset()
        return [backend.step(random_actions(backend, rng)) for _ in range(n)]

    env = {"life_loss_info": True, "clip_reward": False, "obs_type": obs_type}
    whole = make(SCORING_GAME, 1, **env)
    reference = steps(whole, 100)
    assert whole.clock.epi == 0  # one game: every terminal is a lost life
    whole.close()
    max_t = int(np.flatnonzero(stacked(reference, "terminateds"))[0]) + 1
    score = float(sum(t.rewards[0] for t in reference[:max_t]))
    assert score > 1  # the points before that life went, which the game's score keeps

    cut = make(SCORING_GAME, 1, max_t=max_t, **env)
    played = steps(cut, max_t + 1)
    last = played[max_t - 1]
    assert (last.terminateds.tolist(), last.truncateds.tolist()) == ([True], [True])
    assert not stacked(played[: max_t - 1], "terminateds").any()
    assert np.array_equal(last.next_obs, reference[max_t - 1].next_obs)  # the final stack
    [finished] = cut.pop_episodes()
    assert (finished.returns.tolist(), finished.lengths.tolist()) == ([score], [max_t])
    if obs_type != "ram":  # the next game's first stack, which the step after continues
        assert_reset_stacks(played[max_t].obs)
    cut.close()


def test_a_game_over_beside_a_game_cut_by_the_time_limit() -> None:
    """Breakout pressing FIRE and never moving loses its balls within ~120 steps. With max_t the
    step of the first game over, that game ends terminated and the other is cut, truncated, in
    the same step: each transition has its own game's final stack, each env a new game."""
    fire = np.ones(2, dtype=np.int64)

    def steps(backend: AtariVecEnv, n: int) -> list[Transition]:
        backend.reset()
        return [backend.step(fire) for _ in range(n)]

    whole = make("ALE/Breakout-v5")
    reference = steps(whole, 200)
    whole.close()
    overs = stacked(reference, "terminateds")
    max_t = int(np.flatnonzero(overs.any(axis=1))[0]) + 1
    assert overs[max_t - 1].sum() == 1  # one game over, the other game goes on

    cut = make("ALE/Breakout-v5", max_t=max_t)
    last = steps(cut, max_t)[-1]
    assert np.array_equal(last.terminateds, overs[max_t - 1])
    assert np.array_equal(last.truncateds, ~overs[max_t - 1])
    assert np.array_equal(last.next_obs, reference[max_t - 1].next_obs)
    assert_reset_stacks(cut.obs)
    cut.close()


# -- through the agent ---------------------------------------------------------------------------
PPO_SPEC = "benchmark/ppo/ppo_atari.json"
TIME_HORIZON = 48
SMALL_PPO = {  # ppo_atari on a tiny ConvNet, a short batch
    "env": "ALE/Breakout-v5",
    "env.num_envs": "2",
    "agent.net.conv_hid_layers": "[[8, 8, 8, 0, 1]]",
    "agent.net.fc_hid_layers": "[16]",
    "agent.net.gpu": "false",
    "agent.algorithm.time_horizon": str(TIME_HORIZON),
    "agent.algorithm.minibatch_size": str(TIME_HORIZON),
}


def record_batches(memory: Any) -> list[Batch]:
    """The batches `memory` hands over, as it hands them."""
    sample = memory.sample
    batches: list[Batch] = []

    def recording_sample(device: torch.device) -> Batch:
        batches.append(batch := sample(device))
        return batch

    memory.sample = recording_sample
    return batches


@pytest.fixture
def session_threads() -> Iterator[None]:
    """torch on one thread, as a session of these specs sets it (meta.num_threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_life_loss_terminals_reach_ppos_batch(session_threads: None) -> None:
    """ppo_atari (life_loss_info true) on Breakout, whose lives go every ~30 random steps: the
    batch PPO trains on ends its returns at each lost life, and nowhere else."""
    spec = spec_util.load_spec(PPO_SPEC, "ppo_atari", SMALL_PPO).spec
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    env, agent = build(SessionTask.detached(spec, 0), clock)
    ale = AleRecord(env)
    batches = record_batches(agent.algorithm.memory)
    env.reset()
    while not batches:
        t = env.step(agent.act(env.obs))
        agent.update(t)
    assert clock.t == TIME_HORIZON and clock.epi == 0  # no game ended
    lost = ale.life_losses()
    assert lost.any()
    [batch] = batches
    assert torch.equal(batch.terminateds.cpu(), torch.from_numpy(lost))
    assert torch.equal(batch.dones.cpu(), torch.from_numpy(lost))
    env.close()


def test_ppo_trains_on_uint8_minibatches_of_its_batch(session_threads: None) -> None:
    """PPO keeps its batch of frames uint8 and hands the net one minibatch of stored rows at a
    time (a float32 copy of ppo_atari's 2048 stacked frames would be 231 MB)."""
    spec = spec_util.load_spec(
        PPO_SPEC, "ppo_atari", {**SMALL_PPO, "agent.algorithm.minibatch_size": "8"}
    ).spec
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    env, agent = build(SessionTask.detached(spec, 0), clock)
    nets = agent.algorithm.nets
    assert nets.shared  # the acting forward's log-probs are kept: no no-grad pass over the batch
    batches = record_batches(agent.algorithm.memory)
    seen: list[torch.Tensor] = []  # what the net gets once the batch is handed over
    pdparam_value = nets.pdparam_value
    nets.pdparam_value = lambda obs: (batches and seen.append(obs)) or pdparam_value(obs)
    env.reset()
    while not batches:
        agent.update(env.step(agent.act(env.obs)))
    [batch] = batches
    stored = batch.obs.flatten(0, 1)
    assert seen and all(obs.dtype == torch.uint8 and obs.shape[0] == 8 for obs in seen)
    rows = {bytes(row.numpy()) for row in stored}
    assert all(bytes(row.numpy()) in rows for obs in seen for row in obs)
    env.close()


def test_an_evaluation_scores_whole_games_unclipped(session_threads: None) -> None:
    """ppo_atari trains on clipped rewards and life-loss terminals; its evaluation plays whole
    games of Asterix (50 points an item) and scores each by every life's points."""
    sets = {**SMALL_PPO, "env": SCORING_GAME, "meta.rigorous_eval": "2"}
    spec = spec_util.load_spec(PPO_SPEC, "ppo_atari", sets).spec
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    env, agent = build(SessionTask.detached(spec, 0), clock)
    evaluation = Evaluation(spec, env, clock, agent, 0)
    ale = AleRecord(evaluation.env)
    row = evaluation.run()
    # each of the 2 envs counts its first game: the points up to its first game over
    raw, overs = np.array(ale.rewards), ale.game_overs()
    firsts = overs.argmax(axis=0)
    assert overs.any(axis=0).all() and len(raw) == firsts.max() + 1
    scores = [raw[: end + 1, i].sum() for i, end in enumerate(firsts)]
    assert min(scores) > 1 and ale.life_losses()[: firsts.min()].any()
    assert row["total_reward"] == pytest.approx(np.mean(scores))
    evaluation.close()
    env.close()
