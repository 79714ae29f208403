"""`vectorization_mode`: auto's rule as a function of (step seconds, envs, cores), the step probe,
the cores a session counts, and an explicit sync or async kept as the spec says."""

import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_env
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from slm_lab.env import vectorization
from slm_lab.env.vectorization import ASYNC_OVERHEAD_S, MIN_ASYNC_SPEEDUP, auto_mode, choose

SLOW_STEP_S = 2e-3  # a simulator far costlier than MuJoCo's (tens of us a step)


class SlowEnv(gym.Env):
    """An env whose step takes SLOW_STEP_S of wall time."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(SLOW_STEP_S)
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


def never_built() -> gym.Env:
    raise AssertionError("the env was built to time a step")


def break_even(num_envs: int, cpus: int) -> float:
    """The step time above which auto picks async: (n O + ceil(n / w) s) k = n s, solved for s."""
    rounds = -(-num_envs // min(num_envs, cpus))
    return MIN_ASYNC_SPEEDUP * num_envs * ASYNC_OVERHEAD_S / (num_envs - MIN_ASYNC_SPEEDUP * rounds)


@pytest.mark.parametrize(
    ("step_s", "num_envs", "cpus", "mode"),
    [
        (50e-6, 8, 2, "sync"),  # a MuJoCo step on 2 cores: the pipes cost more than it
        (40e-6, 16, 64, "sync"),  # ... even with a core for every env
        (150e-6, 16, 16, "sync"),  # Humanoid-like
        (1e-3, 16, 16, "async"),  # a costly simulator with free cores
        (5e-3, 8, 2, "async"),  # ... even on 2: 21 ms against 40 ms a vector step
        (1.0, 1, 64, "sync"),  # one env: nothing to parallelize
        (1.0, 16, 1, "sync"),  # one core: nothing to run it on
        (0.99 * break_even(8, 2), 8, 2, "sync"),
        (1.01 * break_even(8, 2), 8, 2, "async"),
        (0.99 * break_even(16, 4), 16, 4, "sync"),
        (1.01 * break_even(16, 4), 16, 4, "async"),
    ],
)
def test_auto_rule(step_s: float, num_envs: int, cpus: int, mode: str) -> None:
    assert auto_mode(step_s, num_envs, cpus) == mode


def test_break_even_by_hand() -> None:
    # 8 envs on 2 cores: (8 x 170 us + 4 s) x 1.5 = 8 s, so s = 2040 us / 2 = 1020 us
    assert break_even(8, 2) == pytest.approx(1020e-6)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_explicit_mode_is_kept_without_timing(mode: str) -> None:
    for cpus in (1, 64):  # whatever auto would pick
        assert choose(mode, never_built, 16, cpus, render=False) == (
            mode,
            "env.vectorization_mode",
        )


@pytest.mark.parametrize(
    ("num_envs", "cpus", "render", "why"),
    [
        (1, 8, False, "auto: 1 env, 8 free cores"),
        (8, 1, False, "auto: 8 envs, 1 free core"),
        (8, 8, True, "auto: rendering"),
    ],
)
def test_auto_times_no_step_where_async_cannot_gain(
    num_envs: int, cpus: int, render: bool, why: str
) -> None:
    assert choose("auto", never_built, num_envs, cpus, render) == ("sync", why)


@pytest.mark.parametrize(
    ("make", "mode"),
    [
        pytest.param(SlowEnv, "async", id="slow_env"),
        pytest.param(lambda: gym.make("CartPole-v1"), "sync", id="cartpole"),
    ],
)
def test_auto_times_one_env_step(make: Callable[[], gym.Env], mode: str) -> None:
    chosen, why = choose("auto", make, 8, 4, render=False)
    assert (
        chosen == mode
        and why.startswith("auto: one step ")
        and why.endswith(" us, 8 envs, 4 free cores")
    )


def test_the_probe_times_a_step() -> None:
    assert vectorization.step_seconds(SlowEnv, steps=8) >= SLOW_STEP_S


@pytest.mark.parametrize(
    ("cpus", "load", "max_session", "expected"),
    [
        (16, 0.5, 4, 4),  # an idle machine shared by 4 sessions
        (16, 10.2, 1, 5),  # a busy one: what is left
        (16, 14.0, 4, 2),  # the fewer of the two
        (2, 7.3, 1, 1),  # overloaded: one, never none
        (2, 0.0, 4, 1),
    ],
)
def test_session_cpus_are_the_free_share(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float, max_session: int, expected: int
) -> None:
    monkeypatch.setattr(vectorization, "machine_cpus", lambda: cpus)
    monkeypatch.setattr(vectorization.os, "getloadavg", lambda: (load, load, load))
    assert vectorization.session_cpus(max_session) == expected


@pytest.mark.parametrize(("mode", "vec_cls"), [("sync", SyncVectorEnv), ("async", AsyncVectorEnv)])
def test_the_backend_builds_the_mode_a_spec_names(mode: str, vec_cls: type) -> None:
    env = make_env(
        {"name": "CartPole-v1", "num_envs": 2, "max_frame": 100, "vectorization_mode": mode}
    )
    assert type(env.vec.unwrapped) is vec_cls
    assert env.vectorization == f"{mode} (env.vectorization_mode)"
    env.close()


def test_the_backend_resolves_auto() -> None:
    env = make_env({"name": "CartPole-v1", "num_envs": 2, "max_frame": 100}, cpus=1)
    assert type(env.vec.unwrapped) is SyncVectorEnv
    assert env.vectorization == "sync (auto: 2 envs, 1 free core)"
    env.close()
