"""Evaluation mechanics: when evaluations fall, what an evaluation measures, and that it leaves
training as it was (runs through the CLI are in test_control.py)."""

import random
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import load, make_spec

from slm_lab.agent.agent import rng_state, set_rng_state
from slm_lab.env.clock import Clock
from slm_lab.experiment.build import build
from slm_lab.experiment.config import MetaConfig
from slm_lab.experiment.evaluation import Evaluation, evaluation_seed
from slm_lab.experiment.task import SessionTask
from slm_lab.lib.config import parse


def build_env_agent(typed: Any, seed: int) -> tuple[Any, Any]:
    """A session's env and agent, on a clock of their own (`env.clock`)."""
    return build(SessionTask.detached(typed, seed), Clock(typed.env.max_frame, typed.env.num_envs))


SEED = 8  # the session seed; its first evaluation's episodes are the ones the split test needs
LINEAR_ENTROPY = {
    "name": "linear_decay",
    "start_val": 0.1,
    "end_val": 0.01,
    "start_step": 0,
    "end_step": 1000,
}


@pytest.mark.parametrize(
    ("meta", "every"),
    [
        ({"eval_frequency": 300}, None),  # v5 specs carry eval_frequency without evaluations
        ({"eval_frequency": 300, "rigorous_eval": 0}, None),
        ({"rigorous_eval": 5}, 100),  # eval_frequency null: log_frequency
        ({"rigorous_eval": 5, "eval_frequency": None}, 100),
        ({"rigorous_eval": 5, "eval_frequency": 300}, 300),
    ],
)
def test_frames_between_evaluations(meta: dict[str, Any], every: int | None) -> None:
    assert parse(MetaConfig, {"log_frequency": 100, **meta}, "meta").eval_every == every


def push_left_returns(seed: int, episodes: int) -> list[float]:
    """CartPole returns of always pushing left, episodes one after another from reset(seed)."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    returns = []
    for _ in range(episodes):
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(0)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        env.reset()
    return returns


def test_an_evaluation_is_the_mean_raw_return_of_its_episodes() -> None:
    spec = make_spec("ppo", num_envs=2)
    spec["env"]["reward_scale"] = 0.1  # scales what the agent learns from, not what it scores
    spec["meta"]["rigorous_eval"] = 3
    typed = load(spec)
    env, agent = build_env_agent(typed, SEED)
    agent.act = lambda obs: np.zeros(len(obs), dtype=np.int64)  # deterministic episodes
    evaluation = Evaluation(typed, env, env.clock, agent, SEED)
    row = evaluation.run()

    seed = evaluation_seed(SEED, 0)
    # sub-env i is seeded seed + i and counts its first (3 + i) // 2 episodes: 1 and 2
    first, second = push_left_returns(seed, 2), push_left_returns(seed + 1, 2)
    # CartPole scores 1 a step: sub-env 0's second episode ends before sub-env 1's, with
    # another return; counting whichever episodes end first would take it instead
    assert sum(first) < sum(second) and first[1] != second[1]
    assert row["total_reward"] == pytest.approx((first[0] + sum(second)) / 3, abs=1e-12)
    assert {k: row[k] for k in ("frame", "t", "epi", "opt_step")} == dict.fromkeys(
        ("frame", "t", "epi", "opt_step"), 0
    )
    assert row["total_reward_ma"] == row["total_reward"]
    assert evaluation.next_frame == 100  # eval_frequency

    again = evaluation.run()  # same frame, same seed: the same episodes
    assert again["total_reward"] == row["total_reward"]
    assert [r["total_reward_ma"] for r in evaluation.rows] == [row["total_reward"]] * 2


def test_the_eval_env_has_at_most_rigorous_eval_sub_envs() -> None:
    spec = make_spec("random", num_envs=4)
    spec["meta"]["rigorous_eval"] = 2
    typed = load(spec)
    env, agent = build_env_agent(typed, SEED)
    assert Evaluation(typed, env, env.clock, agent, SEED).env.info.num_envs == 2


def draws() -> tuple[list[float], list[float], float]:
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random()


def test_an_evaluation_leaves_the_rngs_and_the_training_env_as_they_were() -> None:
    spec = make_spec("random", num_envs=2)  # Random acts by sampling the env's action space
    spec["env"]["normalize_obs"] = True
    spec["meta"]["rigorous_eval"] = 3
    typed = load(spec)
    env, agent = build_env_agent(typed, SEED)
    env.reset()
    for _ in range(5):
        agent.update(env.step(agent.act(env.obs)))
    evaluation = Evaluation(typed, env, env.clock, agent, SEED)
    rngs = rng_state()
    action_rng = env.vec.action_space.np_random.bit_generator.state
    rms = env.obs_norm.rms
    obs_stats = (rms.mean.copy(), rms.var.copy(), rms.count)
    obs = env.obs.copy()

    evaluation.run()
    after = draws()
    set_rng_state(rngs)
    assert after == draws()
    assert env.vec.action_space.np_random.bit_generator.state == action_rng
    assert env.clock.frame == 10 and np.array_equal(env.obs, obs)
    np.testing.assert_array_equal(rms.mean, obs_stats[0])
    np.testing.assert_array_equal(rms.var, obs_stats[1])
    assert rms.count == obs_stats[2]
    # the eval env normalizes with the training statistics, frozen through its own steps
    own = evaluation.env.obs_norm.rms
    np.testing.assert_array_equal(own.mean, obs_stats[0])
    assert own.count == obs_stats[2]


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_evaluating_acts_greedily_at_the_schedules_end_values(env_name: str) -> None:
    spec = make_spec("ppo", env_name)
    spec["agent"]["algorithm"]["entropy_coef_spec"] = LINEAR_ENTROPY
    typed = load(spec)
    env, agent = build_env_agent(typed, SEED)
    algorithm = agent.algorithm
    obs = env.reset()
    with torch.no_grad():
        mean, _ = algorithm.nets.pdparam(torch.as_tensor(obs))
    greedy = (mean.argmax(-1) if algorithm.discrete else mean).numpy()

    with agent.evaluating(env.info, greedy=True):
        assert algorithm.entropy_coef.val == LINEAR_ENTROPY["end_val"]
        np.testing.assert_array_equal(agent.act(obs), greedy)
    assert algorithm.action_policy == "default" and not algorithm.eval_mode
    assert algorithm.entropy_coef.val == LINEAR_ENTROPY["start_val"]  # frame 0 again
    with agent.evaluating(env.info, greedy=False):
        assert algorithm.action_policy == "default"  # the policy's own sampling
        assert algorithm.entropy_coef.val == LINEAR_ENTROPY["end_val"]
