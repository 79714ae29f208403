"""GymVecEnv: real next observations, the clock, max_t, action rescaling, unnormalized returns, the
finished episodes it records, the Gymnasium version whose vector wrappers handle same-step
autoreset, and the refusal of a vector env in the other (NextStep) mode."""

import importlib.metadata
import tomllib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_env as env_of
from packaging.requirements import Requirement
from packaging.version import Version

from slm_lab import ROOT_DIR
from slm_lab.env import gym_backend
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.lib.config import SpecError, parse

# the first Gymnasium whose vector RecordEpisodeStatistics and NormalizeReward count the first
# step of an episode that a SAME_STEP autoreset started (earlier ones drop it, as for NEXT_STEP)
GYMNASIUM_SAME_STEP = Version("1.4")
THREE_STEP_ENV_ID = "SlmLabTestThreeStep-v0"
THREE_STEP_REWARDS = (1.0, 2.0, 4.0)


class ThreeStepEnv(gym.Env):
    """Episodes of 3 steps with rewards 1, 2, 4 whatever the action, then terminated."""

    observation_space = gym.spaces.Box(0.0, 3.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = THREE_STEP_REWARDS[self.t]
        self.t += 1
        return np.full(1, self.t, dtype=np.float32), reward, self.t == 3, False, {}


if THREE_STEP_ENV_ID not in gym.registry:
    gym.register(THREE_STEP_ENV_ID, entry_point=ThreeStepEnv)

CARTPOLE_ANGLE_LIMIT = 12 * 2 * np.pi / 360  # CartPole-v1 terminates past this pole angle
CARTPOLE_X_LIMIT = 2.4
CARTPOLE_RESET_BOUND = 0.05  # reset observations are uniform in [-0.05, 0.05]


def make_env(
    name: str = "CartPole-v1", num_envs: int = 2, seed: int = 0, **spec: object
) -> GymVecEnv:
    return env_of({"name": name, "num_envs": num_envs, "max_frame": 10**6, **spec}, seed)


def random_actions(env: GymVecEnv, rng: np.random.Generator) -> np.ndarray:
    if env.info.is_discrete:
        return rng.integers(env.info.action_space.n, size=env.info.num_envs)
    return rng.uniform(-1, 1, size=(env.info.num_envs, *env.info.action_space.shape)).astype(
        np.float32
    )


def test_real_next_obs_differs_exactly_where_an_episode_ended() -> None:
    env = make_env()
    rng = np.random.default_rng(0)
    env.reset()
    ended = 0
    for step in range(300):
        acted_on = env.obs
        t = env.step(random_actions(env, rng))
        assert t.obs is acted_on
        # next_obs: what the agent acts on next; real_next_obs: each transition's true successor
        next_obs, real_next_obs = env.obs, t.next_obs
        terminateds, truncateds = t.terminateds, t.truncateds
        dones = terminateds | truncateds
        ended += int(dones.sum())
        for i in range(env.info.num_envs):
            if dones[i]:
                assert not np.array_equal(real_next_obs[i], next_obs[i])
                assert np.all(
                    np.abs(next_obs[i]) <= CARTPOLE_RESET_BOUND
                )  # the next episode's first obs
                if terminateds[i]:  # the true final obs is past a termination limit
                    x, angle = real_next_obs[i][0], real_next_obs[i][2]
                    assert abs(x) > CARTPOLE_X_LIMIT or abs(angle) > CARTPOLE_ANGLE_LIMIT
            else:
                assert np.array_equal(real_next_obs[i], next_obs[i])
        assert env.clock.t == step + 1
        assert env.clock.frame == 2 * (step + 1)
        assert env.clock.epi == ended
    assert ended >= 10  # random CartPole episodes last ~20 steps
    assert env.clock.done() is False
    env.close()


def test_clock_done_at_max_frame() -> None:
    env = env_of({"name": "CartPole-v1", "num_envs": 4, "max_frame": 20})
    env.reset()
    steps = 0
    while not env.clock.done():
        env.step(np.zeros(4, dtype=np.int64))
        steps += 1
    assert (steps, env.clock.frame) == (5, 20)
    env.close()


@pytest.mark.parametrize("name", ["Pendulum-v1", "CartPole-v1"])
def test_max_t_truncates_episodes(name: str) -> None:
    env = make_env(name, max_t=10)
    rng = np.random.default_rng(1)
    env.reset()
    lengths = np.zeros(env.info.num_envs, dtype=int)
    truncations = 0
    for _ in range(60):
        t = env.step(random_actions(env, rng))
        terminateds, truncateds = t.terminateds, t.truncateds
        lengths += 1
        assert np.all(lengths <= 10)
        assert np.all(lengths[truncateds] == 10)
        if name == "Pendulum-v1":
            assert not terminateds.any()
        assert np.all(truncateds[lengths == 10] | terminateds[lengths == 10])
        truncations += int(truncateds.sum())
        lengths[terminateds | truncateds] = 0
    if name == "Pendulum-v1":  # never terminates: every episode is cut at exactly 10 steps
        assert truncations == 2 * 6
    assert truncations > 0
    env.close()


def test_pendulum_acts_in_unit_box_rescaled_to_torque() -> None:
    env = make_env("Pendulum-v1")
    assert env.info.action_space.low.tolist() == [-1.0] and env.info.action_space.high.tolist() == [
        1.0
    ]
    assert not env.info.is_discrete
    env.reset()
    env.step(np.array([[0.5], [-1.0]], dtype=np.float32))
    torques = [e.unwrapped.last_u for e in env.vec.unwrapped.envs]
    assert torques == pytest.approx([1.0, -2.0])  # Pendulum's max torque is 2
    env.step(np.array([[3.0], [-7.0]], dtype=np.float32))  # out of range: clipped to [-1, 1]
    torques = [e.unwrapped.last_u for e in env.vec.unwrapped.envs]
    assert torques == pytest.approx([2.0, -2.0])
    samples = np.stack(
        [env.vec.action_space.sample() for _ in range(2000)]
    )  # what Random acts with
    assert samples.min() >= -1.0 and samples.max() <= 1.0
    assert np.mean(samples > 0.9) == pytest.approx(0.05, abs=0.02)  # uniform on [-1, 1]
    env.close()


@pytest.mark.parametrize("normalize_reward", [False, True])
def test_total_reward_is_mean_of_unnormalized_returns(normalize_reward: bool) -> None:
    raw_env = make_env("Pendulum-v1", seed=3, max_t=50)
    env = make_env(
        "Pendulum-v1",
        seed=3,
        max_t=50,
        normalize_reward=normalize_reward,
        normalize_obs=normalize_reward,
    )
    assert np.isnan(env.total_reward)
    rng = np.random.default_rng(2)
    raw_env.reset()
    env.reset()
    running = np.zeros(2)
    returns: list[float] = []
    rewards_differ = False
    for _ in range(230):
        actions = random_actions(env, rng)
        raw = raw_env.step(actions)
        raw_rewards, term, trunc = raw.rewards, raw.terminateds, raw.truncateds
        rewards = env.step(actions).rewards
        rewards_differ |= not np.allclose(rewards, raw_rewards)
        running += raw_rewards
        for i in np.flatnonzero(term | trunc):
            returns.append(running[i])
            running[i] = 0.0
    assert len(returns) == 8  # 2 envs x 4 episodes of 50 steps
    assert env.total_reward == pytest.approx(np.mean(returns), rel=1e-5)
    assert raw_env.total_reward == pytest.approx(np.mean(returns), rel=1e-5)
    assert rewards_differ == normalize_reward  # the agent does see normalized rewards
    env.close()
    raw_env.close()


@pytest.mark.parametrize("clip", [1.5, [1.5, 3.0]])
def test_clip_reward_clips_training_rewards_not_returns(clip: float | list[float]) -> None:
    env = make_env(THREE_STEP_ENV_ID, clip_reward=clip)
    env.reset()
    lo, hi = (-clip, clip) if isinstance(clip, float) else clip
    expected = np.clip(THREE_STEP_REWARDS, lo, hi)  # 1, 1.5, 1.5 or 1.5, 2, 3
    for reward in expected:
        t = env.step(np.zeros(2, dtype=np.int64))
        assert t.rewards.dtype == np.float32
        assert np.array_equal(t.rewards, np.full(2, reward, dtype=np.float32))
    assert env.total_reward == sum(THREE_STEP_REWARDS)  # episode returns are unclipped
    env.close()


def test_total_reward_window_is_last_100_episodes() -> None:
    env = make_env("CartPole-v1", num_envs=4, max_t=2)
    env.reset()
    for _ in range(60):  # 4 envs x 30 episodes of 2 steps
        env.step(np.zeros(4, dtype=np.int64))
    assert env.clock.epi == 120
    assert len(env.stats.return_queue) == 100
    assert env.total_reward == 2.0
    env.close()


def test_recorded_episodes_are_the_finished_ones() -> None:
    """Each episode that ends (terminated, or truncated at max_t) is recorded once, in env order
    within a step, with the frame after its last step, its index, return and length; the
    returns are RecordEpisodeStatistics' (all of them: fewer than its window of 100)."""
    num_envs = 3
    env = make_env("CartPole-v1", num_envs=num_envs, max_t=15)
    env.record_episodes()
    env.reset()
    rng = np.random.default_rng(0)
    returns, lengths = np.zeros(num_envs), np.zeros(num_envs, dtype=int)
    expected = []  # (frame, episode, return, length), tracked per env from the transitions
    for step in range(100):
        t = env.step(random_actions(env, rng))
        returns += t.rewards
        lengths += 1
        for i in np.flatnonzero(t.terminateds | t.truncateds):
            expected.append((num_envs * (step + 1), len(expected), returns[i], lengths[i]))
            returns[i], lengths[i] = 0.0, 0
    recorded = [
        (e.frame, e.first_index + k, r, n)
        for e in env.pop_episodes()
        for k, (r, n) in enumerate(zip(e.returns.tolist(), e.lengths.tolist(), strict=True))
    ]
    assert recorded == expected
    assert len(expected) == env.clock.epi > 10
    assert [r for _, _, r, _ in recorded] == list(env.stats.return_queue)
    assert any(n == 15 for _, _, _, n in recorded)  # some truncated at max_t
    assert env.pop_episodes() == []  # handed over once
    env.close()


@pytest.mark.box2d
def test_non_capturable_env_resumes_with_fresh_episodes_and_kept_statistics() -> None:
    """Box2D state is native: resume keeps finished-episode stats and reward normalizer, not episode state."""
    spec = {"name": "LunarLander-v3", "num_envs": 2, "max_frame": 10000, "normalize_reward": True}
    env = env_of(spec, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    while env.clock.epi < 2:
        env.step(rng.integers(0, 4, size=2))
    for _ in range(7):  # episodes in progress
        env.step(rng.integers(0, 4, size=2))
    state = env.state_dict()
    assert state["vec"] is None
    returns = list(env.stats.return_queue)
    rms_var = float(env.reward_norm.return_rms.var)

    resumed = env_of(spec, seed=3)
    resumed.clock.load_state_dict(env.clock.state_dict())  # the session restores its clock first
    assert resumed.load_state_dict(state) is False
    assert list(resumed.stats.return_queue) == returns
    assert resumed.stats.episode_count == env.stats.episode_count
    assert float(resumed.reward_norm.return_rms.var) == rms_var
    assert np.all(resumed.stats.episode_returns == 0)  # fresh episodes start from zero


def test_gymnasium_bound_is_the_first_same_step_release() -> None:
    pyproject = tomllib.loads((ROOT_DIR / "pyproject.toml").read_text())
    [gymnasium] = [
        req
        for req in map(Requirement, pyproject["project"]["optional-dependencies"]["train"])
        if req.name == "gymnasium"
    ]
    lower = [Version(spec.version) for spec in gymnasium.specifier if spec.operator == ">="]
    assert lower == [GYMNASIUM_SAME_STEP]
    assert Version(importlib.metadata.version("gymnasium")) >= GYMNASIUM_SAME_STEP


def test_episode_statistics_and_reward_normalizer_count_every_step_of_every_episode() -> None:
    """Same-step autoreset: the step after an episode's last is the next episode's first, and
    both wrappers must count it (Gymnasium < 1.4 dropped it, as if it were a reset step)."""
    spec = {"name": THREE_STEP_ENV_ID, "num_envs": 2, "max_frame": 100, "normalize_reward": True}
    env = env_of(spec, seed=0, gamma=0.5)
    env.reset()
    for _ in range(4):  # a whole episode, then the first step of the next
        env.step(np.zeros(2, dtype=np.int64))
    # the normalizer's discounted return: 1, 1 * 0.5 + 2 = 2.5, 4 (terminated: nothing carried
    # over); then the new episode's first reward
    assert env.reward_norm.accumulated_reward.tolist() == [1.0, 1.0]
    assert env.reward_norm.return_rms.count == pytest.approx(2 * 4, abs=1e-3)  # every step
    for _ in range(2):
        env.step(np.zeros(2, dtype=np.int64))
    assert list(env.stats.return_queue) == [7.0] * 4  # 2 envs x 2 episodes of 1 + 2 + 4
    assert list(env.stats.length_queue) == [3] * 4
    env.close()


class NextStepVecEnv(GymVecEnv):
    """A backend whose vector env autoresets in NextStep mode."""

    def _vector_env(
        self, config: EnvConfig, render_mode: str | None, seq_len: int | None, cpus: int
    ) -> tuple[gym.vector.VectorEnv, str]:
        vec = gym.vector.SyncVectorEnv(
            [lambda: gym.make(config.name)] * config.num_envs,
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
        return vec, "sync"


def test_a_next_step_vector_env_is_refused_when_built() -> None:
    """Before any step could look for the final observations NextStep does not give."""
    config = parse(EnvConfig, {"name": "CartPole-v1", "num_envs": 2, "max_frame": 100}, "env")
    with pytest.raises(SpecError) as err:
        NextStepVecEnv(config, 0, Clock(100, 2), 0.99)
    message = str(err.value)
    assert message.startswith("env: CartPole-v1 is a vector env in NextStep autoreset mode; ")
    assert message.endswith("build it with autoreset_mode=SAME_STEP")
    assert "SameStep mode only" in message and "\n" not in message


@pytest.mark.mujoco
def test_mujoco_warnings_are_logged_once_and_write_no_file(
    in_tmp: Path,
    log_messages: list[str],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gym_backend, "_mujoco_warned", set())  # as a fresh process has it
    for _ in range(2):  # HalfCheetah-v5's model has an attribute MuJoCo warns about
        make_env("HalfCheetah-v5", num_envs=2).close()
    assert [m for m in log_messages if m.startswith("MuJoCo: ")] == [
        "MuJoCo: compiler attribute 'settotalmass' is deprecated and will be removed in a "
        "future release: scale the masses and densities in the model, or call mj_setTotalmass "
        "and mj_setConst on the compiled model"
    ]
    assert "settotalmass" not in capfd.readouterr().out  # MuJoCo's own printf
    assert not (in_tmp / "MUJOCO_LOG.TXT").exists()
