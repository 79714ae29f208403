"""Env state capture: every plain value round-trips through `torch.save` and
`torch.load(weights_only=True)` with its type and dtype; anything else marks the state partial
and is named by its path, never raised; real Gymnasium envs resume exactly where they can."""

import io
from collections import deque, namedtuple
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import load, make_env, make_spec
from loguru import logger

from slm_lab.env import state as env_state
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.experiment import control
from slm_lab.experiment import session as session_module
from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.task import SessionTask

STEPS_BEFORE = 40
STEPS_AFTER = 60
RESTARTS = "restarts the episodes in progress"  # what a native env's run says a resume loses
Point = namedtuple("Point", "x y")


class Holder:
    """An object whose attributes capture walks."""

    def __init__(self, **attrs: Any) -> None:
        vars(self).update(attrs)


class HolderEnv(gym.Env):
    """A sub-env with one attribute of a type capture cannot encode."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.native = Holder()  # stands in for a physics world
        self.count = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> tuple:
        self.count += 1
        return np.zeros(1, dtype=np.float32), 0.0, False, False, {}


class NoteWrapper(gym.Wrapper):
    """A wrapper that keeps a value capture cannot encode."""

    def __init__(self, env: gym.Env, note: Any) -> None:
        super().__init__(env)
        self.note = note


def saved_and_loaded(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def assert_same(a: Any, b: Any) -> None:
    """Equal, with the same types all the way down (and dtypes, shapes, byte order, maxlen)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray | np.generic):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    elif isinstance(a, list | tuple | deque):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
        if isinstance(a, deque):
            assert a.maxlen == b.maxlen
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, float) and a != a:
        assert b != b
    else:
        assert a == b


NUMERIC_DTYPES = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
]
PLAIN_VALUES = {
    **{f"array_{dt}": np.arange(6).reshape(2, 3).astype(dt) for dt in NUMERIC_DTYPES},
    "array_0d": np.array(2.5, dtype=np.float32),
    "array_empty": np.zeros((0, 3), dtype=np.int16),
    "array_fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "array_strided": np.arange(10.0)[::3],
    "array_nan_inf": np.array([np.nan, np.inf, -np.inf]),
    "array_bytes": np.array([[b"S", b"F"], [b"H", b"G"]], dtype="S1"),  # FrozenLake's map
    "array_str": np.array(["left", "up"]),
    "array_str_0d": np.array("x"),
    "array_big_endian": np.arange(4, dtype=">f4"),
    "array_longdouble": np.array([1.0, 2.5], dtype=np.longdouble),
    "array_ulonglong": np.array([1, 2**64 - 1], dtype=np.ulonglong),  # torch takes uint64 only
    "array_datetime": np.array(["2024-01-01", "2025-06-30"], dtype="datetime64[D]"),
    "array_structured": np.array([(1, 2.5), (3, 4.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
    "np_float32": np.float32(1.5),
    "np_float64": np.float64(-0.25),
    "np_int64": np.int64(7),
    "np_uint8": np.uint8(255),
    "np_bool": np.bool_(True),
    "np_str": np.str_("hearts"),  # Blackjack's dealer_top_card_suit
    "np_bytes": np.bytes_(b"G"),
    "np_complex": np.complex64(1 + 2j),
    "int_big": 2**100,
    "float_nan": float("nan"),
    "complex": 1 - 1j,
    "bytes": b"\x00\xff",
    "none": None,
    "bool": False,
    "list_nested": [[1, 2.0], (3, [np.float32(4)]), [], ()],
    "tuple_of_np_floats": (np.float64(0.1), np.float64(-0.2)),  # MountainCar's state
    "list_of_arrays": [np.zeros(2, np.float32), np.ones((1, 2), np.uint8)],
    "deque": deque([np.zeros(2), np.ones(2)], maxlen=4),
    "deque_unbounded": deque([1.0, 2.0]),
    "deque_np_float64": deque([np.float64(0.5), np.float64(np.nan)], maxlen=100),  # returns
    "deque_np_int64": deque([np.int64(3), np.int64(-1)], maxlen=100),  # episode lengths
    "deque_np_bool": deque([np.bool_(True), np.bool_(False)]),
    "deque_np_float16": deque([np.float16(0.5), np.float16(-2.0)], maxlen=2),
    "deque_np_complex64": deque([np.complex64(1 + 2j)]),
    "deque_np_mixed": deque([np.float32(1.5), np.float64(2.5)]),  # two types: item by item
    "deque_np_longdouble": deque([np.longdouble(1.5)]),  # no tensor dtype: item by item
    "deque_np_empty": deque(maxlen=3),
    "dict_in_list": [{"a": 1, 2: np.int64(3), (4, 5): [6.0], np.int64(7): "seven"}],
}


@pytest.mark.parametrize("name", list(PLAIN_VALUES))
def test_plain_value_round_trips_with_its_type(name: str) -> None:
    value = PLAIN_VALUES[name]
    state, complete = env_state.capture(Holder(value=value))
    assert complete
    restored = Holder()
    env_state.restore(restored, saved_and_loaded(state))
    assert_same(restored.value, value)


def test_restored_array_is_writable_and_not_shared() -> None:
    value = np.array([b"a", b"b"], dtype="S1")
    holder = Holder(value=value, counts=np.zeros(3))
    state, _ = env_state.capture(holder)
    holder.counts[0] = 9  # captured values do not follow the object after capture
    restored = Holder()
    env_state.restore(restored, saved_and_loaded(state))
    assert restored.counts[0] == 0
    restored.value[0] = b"z"
    restored.counts[1] = 1
    assert value[0] == b"a"


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.MT19937, np.random.Philox])
def test_generator_continues_its_stream(bit_generator: type) -> None:
    rng = np.random.Generator(bit_generator(5))
    rng.random(3)
    state, complete = env_state.capture(Holder(rng=rng))
    assert complete
    expected = rng.random(4)
    restored = Holder(rng=np.random.Generator(bit_generator(0)))
    env_state.restore(restored, saved_and_loaded(state))
    assert np.array_equal(restored.rng.random(4), expected)


def test_running_mean_std_restores_in_place() -> None:
    rms = gym.wrappers.utils.RunningMeanStd(shape=(2,))
    rms.update(np.array([[1.0, 2.0], [3.0, 5.0]]))
    state, complete = env_state.capture(Holder(rms=rms))
    assert complete
    restored = Holder(rms=gym.wrappers.utils.RunningMeanStd(shape=(2,)))
    target = restored.rms
    env_state.restore(restored, saved_and_loaded(state))
    assert restored.rms is target
    for k in ("mean", "var", "count"):
        assert_same(getattr(target, k), getattr(rms, k))


def test_code_and_configuration_are_skipped() -> None:
    holder = Holder(
        func=lambda x: x,
        env_fns=[partial(gym.make, "CartPole-v1")] * 2,
        space=gym.spaces.Discrete(3),
        mode="rgb_array",
        config={"key": object()},
        kind=gym.vector.AutoresetMode.SAME_STEP,
        _ezpickle_args=(object(),),
        t=3,
    )
    state, complete = env_state.capture(holder)
    assert complete
    assert list(state) == ["t"]


UNCAPTURABLE = {
    "object": (Holder(), "value"),
    "object_array": (np.array([1, "a"], dtype=object), "value"),
    "structured_with_object": (np.zeros(2, dtype=[("a", "O")]), "value"),
    "object_in_list": ([1.0, Holder()], "value[1]"),
    "object_in_nested_list": ([[1.0], (2.0, Holder())], "value[1][1]"),
    "object_in_deque": (deque([1.0, Holder()]), "value[1]"),
    "object_in_dict": ([{"w": Holder()}], "value[0]['w']"),
    "namedtuple": (Point(1.0, 2.0), "value"),
    "set": ({1, 2}, "value"),
    "lambda_in_mixed_list": ([1.0, lambda: 0], "value[1]"),
    "masked_array": (np.ma.masked_array([1.0, 2.0], mask=[0, 1]), "value"),
}


@pytest.mark.parametrize("name", list(UNCAPTURABLE))
def test_uncapturable_value_marks_state_partial_and_is_named(name: str) -> None:
    value, path = UNCAPTURABLE[name]
    holder = Holder(before=np.float32(1.0), value=value, after=[2, 3])
    state, complete = env_state.capture(holder)
    assert not complete
    assert env_state.uncapturable(holder) == path
    assert list(state) == ["before", "after"]  # the rest is still captured
    restored = Holder()
    env_state.restore(restored, saved_and_loaded(state))
    assert_same(restored.after, [2, 3])


def test_uncapturable_names_the_first_of_several() -> None:
    holder = Holder(a=1, first=Holder(), b=2, second=Holder())
    assert env_state.uncapturable(holder) == "first"


def make_vector(*wrappers: Any, num_envs: int = 2) -> gym.vector.VectorEnv:
    def make() -> gym.Env:
        env: gym.Env = HolderEnv()
        for wrap in wrappers:
            env = wrap(env)
        return env

    vec = gym.vector.SyncVectorEnv([make] * num_envs)
    return gym.wrappers.vector.RecordEpisodeStatistics(gym.wrappers.vector.ClipReward(vec, 0, 1))


def test_uncapturable_path_names_the_unwrapped_env_behind_wrappers() -> None:
    vec = make_vector(
        partial(gym.wrappers.TimeLimit, max_episode_steps=5), gym.wrappers.OrderEnforcing
    )
    assert env_state.uncapturable(vec) == "unwrapped.envs[0].unwrapped.native"


def test_uncapturable_path_names_a_wrapper_by_its_chain() -> None:
    vec = make_vector(
        lambda env: setattr(env, "native", 0) or env,  # HolderEnv made capturable
        partial(NoteWrapper, note=Holder()),
        partial(gym.wrappers.TimeLimit, max_episode_steps=5),
    )
    assert env_state.uncapturable(vec) == "unwrapped.envs[0].env.note"


def test_capturable_stack_has_no_uncapturable_path() -> None:
    vec = make_vector(lambda env: setattr(env, "native", np.zeros(2)) or env)
    vec.reset(seed=0)
    assert env_state.uncapturable(vec) is None
    assert env_state.capture(vec)[1]


def test_state_saved_before_tagged_scalars_and_dicts_restores() -> None:
    """A checkpoint written by the earlier encoding (numpy scalars as Python numbers, Generator
    states as raw dicts) still restores."""
    rng = np.random.default_rng(1)
    old = {
        "rng": {"__rng__": rng.bit_generator.state},
        "last_u": 0.5,
        "obs": {"__np__": torch.zeros(2)},
        "state": {"__seq__": [0.1, 0.2], "tuple": True},
        "queue": {"__deque__": [1.0], "maxlen": 3},
        "rms": {
            "__rms__": {
                "mean": {"__np__": torch.ones(1)},
                "var": {"__np__": torch.ones(1)},
                "count": 2.0,
            }
        },
    }
    expected = rng.random(3)
    holder = Holder(rng=np.random.default_rng(0), rms=gym.wrappers.utils.RunningMeanStd(shape=(1,)))
    env_state.restore(holder, saved_and_loaded(old))
    assert np.array_equal(holder.rng.random(3), expected)
    assert_same(holder.state, (0.1, 0.2))
    assert_same(holder.queue, deque([1.0], maxlen=3))
    assert holder.rms.count == 2.0


def test_episode_statistics_queues_save_as_one_tensor_each() -> None:
    """RecordEpisodeStatistics keeps its last 100 returns, lengths and times in three deques of
    numpy numbers: each is saved as one tensor, not one tensor a number, and restores exactly."""
    env = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", num_envs=2))
    env.reset(seed=0)
    while len(env.return_queue) < 5:
        env.step(env.action_space.sample())
    state, complete = env_state.capture(env)
    assert complete
    loaded = saved_and_loaded(state)
    for name in ("return_queue", "length_queue", "time_queue"):
        assert isinstance(loaded[name]["__deque_np__"]["__np__"], torch.Tensor), name
    restored = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", num_envs=2))
    restored.reset(seed=1)
    env_state.restore(restored, loaded)
    for name in ("return_queue", "length_queue", "time_queue"):
        assert_same(getattr(restored, name), getattr(env, name))


def random_actions(env: GymVecEnv, rng: np.random.Generator) -> np.ndarray:
    info = env.info
    if info.is_discrete:
        return rng.integers(info.action_space.n, size=info.num_envs)
    return rng.uniform(-1, 1, size=(info.num_envs, *info.action_space.shape)).astype(np.float32)


def run_steps(env: GymVecEnv, rng: np.random.Generator, steps: int) -> list[tuple]:
    out = []
    for _ in range(steps):
        t = env.step(random_actions(env, rng))
        out.append((t.obs, t.rewards, t.next_obs, t.terminateds, t.truncateds, env.obs))
    return out


EXACT_ENVS = {
    "FrozenLake-v1": {},  # desc: a bytes array
    "FrozenLake8x8-v1": {},
    "Taxi-v4": {"max_t": 15},  # desc: bytes; locs: a list of tuples
    "CliffWalkingSlippery-v1": {"max_t": 15},
    "Blackjack-v1": {},  # dealer_top_card_suit: np.str_
    "CartPole-v1": {"max_t": 15},
    "MountainCar-v0": {"max_t": 20},  # state: a tuple of numpy floats
    "Pendulum-v1": {"max_t": 20, "normalize_obs": True, "normalize_reward": True},
    "Acrobot-v1": {"max_t": 20},
    # vector ClipReward keeps a wrapper of a placeholder env; TransformReward a lambda
    "CartPole-v1-clip-scale": {"max_t": 15, "clip_reward": 0.5, "reward_scale": 2.0},
}


@pytest.mark.parametrize("case", list(EXACT_ENVS))
def test_gymnasium_env_resumes_exactly(case: str) -> None:
    """Stepping on after a save, and after loading the save into a fresh env, give the same
    transitions, episode ends included."""
    name = case.removesuffix("-clip-scale")
    config = {"name": name, "num_envs": 2, "max_frame": 10**6, **EXACT_ENVS[case]}
    env = make_env(config, seed=7)
    env.reset()
    rng = np.random.default_rng(0)
    run_steps(env, rng, STEPS_BEFORE)
    assert env.uncapturable() is None
    state = saved_and_loaded(env.state_dict())
    clock = env.clock.state_dict()  # the session's, saved beside the env's state
    actions_rng_state = rng.bit_generator.state
    expected = run_steps(env, rng, STEPS_AFTER)

    resumed = make_env(config, seed=7)
    resumed.clock.load_state_dict(clock)
    assert resumed.load_state_dict(state) is True
    rng.bit_generator.state = actions_rng_state
    got = run_steps(resumed, rng, STEPS_AFTER)
    assert resumed.clock.epi == env.clock.epi > 0
    assert list(resumed.stats.return_queue) == list(env.stats.return_queue)
    for step_expected, step_got in zip(expected, got, strict=True):
        for a, b in zip(step_expected, step_got, strict=True):
            assert_same(a, b)


def test_stacked_observations_resume_exactly() -> None:
    config = {"name": "CartPole-v1", "num_envs": 2, "max_frame": 10**6, "max_t": 15}
    env = make_env(config, seed=1, seq_len=3)
    env.reset()
    rng = np.random.default_rng(0)
    run_steps(env, rng, STEPS_BEFORE)
    state = saved_and_loaded(env.state_dict())
    clock = env.clock.state_dict()
    rng_state = rng.bit_generator.state
    expected = run_steps(env, rng, STEPS_AFTER)
    resumed = make_env(config, seed=1, seq_len=3)
    resumed.clock.load_state_dict(clock)
    assert resumed.load_state_dict(state) is True
    rng.bit_generator.state = rng_state
    for step_expected, step_got in zip(expected, run_steps(resumed, rng, STEPS_AFTER), strict=True):
        for a, b in zip(step_expected, step_got, strict=True):
            assert_same(a, b)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        pytest.param(
            "LunarLander-v3", "unwrapped.envs[0].unwrapped.world", marks=pytest.mark.box2d
        ),
        pytest.param(
            "InvertedPendulum-v5", "unwrapped.envs[0].unwrapped.model", marks=pytest.mark.mujoco
        ),
    ],
)
def test_native_gymnasium_env_is_named_and_its_state_still_saves(name: str, path: str) -> None:
    env = make_env({"name": name, "num_envs": 2, "max_frame": 10**6})
    env.reset()
    run_steps(env, np.random.default_rng(0), 5)
    assert env.uncapturable() == path
    state = saved_and_loaded(env.state_dict())
    assert state["vec"] is None
    assert (
        make_env({"name": name, "num_envs": 2, "max_frame": 10**6}).load_state_dict(state) is False
    )


def test_the_resume_note_says_what_a_user_loses_without_attribute_paths() -> None:
    note = env_state.resume_note("Hopper-v5")
    assert note.startswith("Hopper-v5 runs in a simulator whose state cannot be saved: ")
    assert "a resume of this run restarts the episodes in progress" in note
    assert "unwrapped" not in note and "envs[0]" not in note


@pytest.mark.box2d
@pytest.mark.usefixtures("in_tmp")
def test_a_native_env_says_it_once_a_run_and_not_where_no_resume_needs_it(tmp_path: Path) -> None:
    """Session 0 of a train run says it (once, over three checkpoints), session 1 does not; a
    search trial's sessions (rerun from the start, never resumed) and a replay do not (its
    folder goes to `data/` of the working directory: the test's own folder)."""
    spec = load({**make_spec("ppo", "LunarLander-v3", max_frame=300), "name": "ppo_lunar"})
    note = env_state.resume_note("LunarLander-v3")
    records: list[tuple[str, str]] = []
    sink = logger.add(lambda m: records.append((m.record["level"].name, m.record["message"])))
    said: dict[str, int] = {}
    try:
        for name, root, session, resumable in [
            ("train s0", tmp_path / "train", 0, True),
            ("train s1", tmp_path / "train", 1, True),
            ("search trial", tmp_path / "search", 0, False),
        ]:
            RunLayout(root, spec.name).make()
            task = SessionTask(spec, root, 0, session, resumable=resumable)
            records.clear()
            session_module.Session(task).run()
            assert any("session_metrics" in m for _, m in records)  # it ran to its end
            said[name] = [r for r in records if RESTARTS in r[1]]
        records.clear()
        control.enjoy(spec, tmp_path / "train", episodes=1)
        said["enjoy"] = [r for r in records if RESTARTS in r[1]]
    finally:
        logger.remove(sink)
    assert said == {"train s0": [("INFO", note)], "train s1": [], "search trial": [], "enjoy": []}
    assert len(list((tmp_path / "data").glob("train_enjoy_*"))) == 1
