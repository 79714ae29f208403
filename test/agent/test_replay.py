"""Replay and PrioritizedReplay: sum tree math, IS weights, successors across wrap-around and
episode ends with vector envs, dtypes, footprint, exact state round trips, CER, bad specs."""

import copy
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psutil
import pytest
import torch
from conftest import invoke, make_spec

from slm_lab.agent.memory import frame_stacks, replay
from slm_lab.agent.memory.base import Batch, Layout, Transition
from slm_lab.agent.memory.config import PrioritizedReplayConfig, ReplayConfig
from slm_lab.agent.memory.layout import replay_bytes
from slm_lab.agent.memory.registry import MEMORIES
from slm_lab.agent.memory.replay import PrioritizedReplay, Replay
from slm_lab.agent.memory.sum_tree import SumTree
from slm_lab.lib.config import parse
from slm_lab.spec import spec_util
from slm_lab.spec.spec_util import SpecError

CPU = torch.device("cpu")
PER_SPEC = {"alpha": 1.0, "epsilon": 0.5, "beta": 0.4, "beta_end_step": 100}
MAX_FRAME = 10_000  # the run's length: PER's beta ends there when beta_end_step is null
CONFIGS = {Replay: ReplayConfig, PrioritizedReplay: PrioritizedReplayConfig}


@pytest.fixture(autouse=True)
def seeded() -> Iterator[None]:
    """Memories seed their sampler from torch's seed: fix it so every test is deterministic."""
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    yield
    torch.random.set_rng_state(state)


def layout(
    num_envs: int, obs_shape: tuple[int, ...] = (2,), obs_dtype: type = np.float32
) -> Layout:
    return Layout(num_envs, obs_shape, np.dtype(obs_dtype), (), np.dtype(np.int64))


def memory_config(cls: type[Replay], **spec: Any) -> ReplayConfig:
    """The memory's config from an agent.memory spec section, validated as a spec's is."""
    memory_spec = {"max_size": 6, "batch_size": 4} | (PER_SPEC if cls is PrioritizedReplay else {})
    return parse(CONFIGS[cls], {"name": cls.__name__} | memory_spec | spec, "agent.memory")


def make_memory(cls: type[Replay] = Replay, num_envs: int = 2, **spec: Any) -> Replay:
    # batch_steps is an on-policy memory's size: a replay ignores it
    return cls(memory_config(cls, **spec), layout(num_envs), 1, MAX_FRAME)


class EnvStream:
    """Vector-env steps with unique ids: obs = [id, env], actions = the transition's id.

    `step(dones)` adds one row; an env marked terminated/truncated gets a final obs [-id, env]
    as its successor and starts over from a fresh reset obs. `truth` maps transition id to
    (obs, next_obs, reward, terminated, done) as they really happened.
    """

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.next_id = 1
        self.obs = self._fresh(num_envs)
        self.truth: dict[int, tuple] = {}
        self.order: list[int] = []  # transition ids in the order they were added

    def _fresh(self, n: int) -> np.ndarray:
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.float32)
        self.next_id += n
        return np.stack([ids, np.arange(n, dtype=np.float32)], 1)

    def step(
        self, mem: Replay, terminated: list[int] = (), truncated: list[int] = ()
    ) -> np.ndarray:
        n = self.num_envs
        terms, truncs = np.zeros(n, bool), np.zeros(n, bool)
        terms[list(terminated)] = True
        truncs[list(truncated)] = True
        dones = terms | truncs
        actions = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        rewards = actions.astype(np.float32) / 10
        following = self._fresh(n)
        real_next = following.copy()
        real_next[dones, 0] *= -1  # the final obs; the env resets to `following`
        mem.add(Transition(self.obs, actions, rewards, real_next, terms, truncs))
        for e in range(n):
            self.truth[int(actions[e])] = (
                self.obs[e].tolist(),
                real_next[e].tolist(),
                float(rewards[e]),
                bool(terms[e]),
                bool(dones[e]),
            )
            self.order.append(int(actions[e]))
        self.obs = following
        return actions


def check_batch(batch: Batch, truth: dict[int, tuple]) -> set[int]:
    """Every sampled transition equals what happened; returns the ids seen."""
    ids = batch.actions.tolist()
    for i, tid in enumerate(ids):
        obs, next_obs, reward, terminated, done = truth[tid]
        assert batch.obs[i].tolist() == obs, tid
        assert batch.next_obs[i].tolist() == next_obs, tid
        assert batch.rewards[i].item() == pytest.approx(reward)
        assert batch.terminateds[i].item() == terminated
        assert batch.dones[i].item() == done
    return set(ids)


# -- sum tree ----------------------------------------------------------------------------------
def test_sum_tree_total_and_updates() -> None:
    tree = SumTree(5)
    tree.update(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert tree.total == 15.0
    tree.update(np.array([2]), np.array([10.0]))
    assert tree.total == 22.0
    tree.update(np.array([0, 4, 0]), np.array([7.0, 0.0, 7.0]))  # a repeated leaf
    assert tree.total == 7 + 2 + 10 + 4 + 0
    assert tree.get(np.arange(5)).tolist() == [7.0, 2.0, 10.0, 4.0, 0.0]


def test_sum_tree_find_by_prefix_sum() -> None:
    tree = SumTree(5)  # 8 leaves inside, the last 3 padding
    tree.update(np.arange(5), np.array([1.0, 0.0, 2.0, 3.0, 0.5]))
    prefix = [0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 6.49, 6.5, 100.0]
    # leaf 1 (zero) is never chosen; u at or past the total lands on the last positive leaf
    assert tree.find(np.array(prefix)).tolist() == [0, 0, 2, 2, 3, 3, 4, 4, 4, 4]
    assert SumTree(1).find(np.array([0.0])).tolist() == [0]


def test_sum_tree_sampling_proportions() -> None:
    tree = SumTree(4)
    priorities = np.array([1.0, 2.0, 3.0, 4.0])
    tree.update(np.arange(4), priorities)
    draws = tree.find(np.random.default_rng(0).random(100_000) * tree.total)
    freqs = np.bincount(draws, minlength=4) / len(draws)
    # std of each frequency <= 0.0016; 0.01 is over 6 std (and the seed is fixed)
    np.testing.assert_allclose(freqs, priorities / priorities.sum(), atol=0.01)


def test_sum_tree_state_rebuilds_the_same_tree() -> None:
    tree = SumTree(6)
    rng = np.random.default_rng(1)
    for _ in range(20):
        tree.update(rng.integers(0, 6, 3), rng.random(3))
    other = SumTree(6)
    other.load_state_dict(tree.state_dict())
    assert np.array_equal(other.tree, tree.tree)


# -- prioritized replay ------------------------------------------------------------------------
def filled_per(**spec: Any) -> PrioritizedReplay:
    """4 transitions (1 env) with priorities [1, 2, 3, 4] (alpha 1, epsilon 0.5)."""
    mem = make_memory(PrioritizedReplay, num_envs=1, max_size=4, batch_size=2, **spec)
    stream = EnvStream(1)
    for _ in range(4):
        stream.step(mem)
    mem.update_priorities(torch.arange(4), torch.tensor([0.5, -1.5, 2.5, 3.5]))
    return mem


def test_per_priorities_and_max_priority_for_new_transitions() -> None:
    mem = filled_per()
    assert mem.tree.get(np.arange(4)).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert mem.max_priority == 4.0
    EnvStream(1).step(mem)  # overwrites leaf 0 with the max priority
    assert mem.tree.get(np.arange(4)).tolist() == [4.0, 2.0, 3.0, 4.0]
    sqrt = make_memory(PrioritizedReplay, num_envs=1, alpha=0.5, epsilon=1.0)
    EnvStream(1).step(sqrt)
    sqrt.update_priorities(np.array([0]), np.array([[3.0]]))
    assert sqrt.tree.get(np.array([0])).tolist() == [2.0]  # (3 + 1) ** 0.5


def test_per_importance_sampling_weights() -> None:
    mem = filled_per(beta=0.5)
    # P = [0.1, 0.4], N = 4: w = [0.4, 1.6] ** -0.5 = [1.581, 0.791]; / max -> [1, 0.5]
    np.testing.assert_allclose(mem.is_weights(np.array([0, 3])), [1.0, 0.5], rtol=1e-6)
    mem.anneal(100)  # beta 1: w = 1 / [0.8, 1.2]; / max -> [1, 2/3]
    np.testing.assert_allclose(mem.is_weights(np.array([1, 2])), [1.0, 2 / 3], rtol=1e-6)
    batch = mem.sample(CPU)
    assert batch.weights.dtype == torch.float32 and batch.weights.shape == (2,)
    expected = mem.is_weights(batch.idxs.numpy())
    np.testing.assert_allclose(batch.weights.numpy(), expected)


def test_per_beta_anneals_linearly_to_exactly_one() -> None:
    mem = make_memory(PrioritizedReplay, beta=0.4, beta_end_step=1000)
    assert mem.beta == 0.4
    betas = []
    for frame in (250, 500, 999, 1000, 5000):
        mem.anneal(frame)
        betas.append(mem.beta)
    np.testing.assert_allclose(betas[:3], [0.55, 0.7, 0.4 + 0.6 * 0.999])
    assert betas[3] == 1.0 and betas[4] == 1.0


def test_per_stratified_sampling_covers_every_segment() -> None:
    """Equal priorities, batch = size: one draw per segment takes each leaf exactly once."""
    mem = make_memory(PrioritizedReplay, num_envs=2, max_size=8, batch_size=8)
    stream = EnvStream(2)
    for _ in range(4):
        stream.step(mem)
    for _ in range(5):
        assert sorted(mem.sample(CPU).idxs.tolist()) == list(range(8))


def test_per_samples_in_proportion_to_priority() -> None:
    mem = filled_per()
    counts = np.zeros(4)
    for _ in range(10_000):
        counts += np.bincount(mem.sample(CPU).idxs.numpy(), minlength=4)
    # std of each frequency <= 0.0036 over 20000 draws; 0.02 is over 5 std (and seeded)
    np.testing.assert_allclose(counts / counts.sum(), [0.1, 0.2, 0.3, 0.4], atol=0.02)


# -- replay storage ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
def test_wrap_around_and_episode_ends_give_true_successors(cls: type[Replay]) -> None:
    """max_size 6 with 2 envs (3 rows): after every add, everything sampled is one of the last 6
    transitions exactly as it happened, and every one of them gets sampled."""
    mem = make_memory(cls, num_envs=2, max_size=6, batch_size=4)
    stream = EnvStream(2)
    ends = {2: ([0], []), 3: ([], [1]), 5: ([0], [1]), 6: ([1], []), 9: ([], [0]), 10: ([0], [])}
    for t in range(14):
        stream.step(mem, *ends.get(t, ([], [])))
        assert mem.size == min(2 * (t + 1), 6)
        seen: set[int] = set()
        for _ in range(60):
            seen |= check_batch(mem.sample(CPU), stream.truth)
        assert seen == set(stream.order[-6:])


def test_episode_ends_with_vector_envs() -> None:
    mem = make_memory(num_envs=3, max_size=30, batch_size=3)
    stream = EnvStream(3)
    a0 = stream.step(mem, terminated=[1])
    a1 = stream.step(mem, truncated=[2])
    a2 = stream.step(mem, terminated=[0], truncated=[2])
    seen: set[int] = set()
    for _ in range(100):
        seen |= check_batch(mem.sample(CPU), stream.truth)
    assert seen == set(stream.order)
    # spelled out: env 1 terminated at step 0, its next obs is the final obs, not the reset obs
    _, next_obs, _, terminated, done = stream.truth[int(a0[1])]
    assert next_obs[0] < 0 and terminated and done
    _, next_obs, _, terminated, done = stream.truth[int(a1[2])]  # truncated: done, not terminated
    assert next_obs[0] < 0 and not terminated and done
    assert stream.truth[int(a2[1])][4] is False


def test_final_obs_ring_grows_after_wrapping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rare episode ends first (the ring wraps), then every step ends one (the ring grows while
    its head is mid-array): successors stay right throughout."""
    monkeypatch.setattr(replay, "INITIAL_FINAL_SLOTS", 4)
    mem = make_memory(num_envs=4, max_size=40, batch_size=8)
    stream = EnvStream(4)
    sizes = []
    for t in range(40):
        ends = [t % 4] if t < 20 and t % 3 == 0 else [0, 1, 2, 3] if t >= 20 else []
        stream.step(mem, truncated=ends)
        sizes.append(len(mem.finals.values))
        seen: set[int] = set()
        for _ in range(60):
            seen |= check_batch(mem.sample(CPU), stream.truth)
        assert seen == set(stream.order[-40:])
    assert sizes[19] == 4 and sizes[-1] == 40


def test_uint8_observations_stay_uint8() -> None:
    config = ReplayConfig(name="Replay", max_size=10, batch_size=2)
    mem = Replay(config, layout(2, (3, 3), np.uint8), 1, MAX_FRAME)
    obs = np.full((2, 3, 3), 200, dtype=np.uint8)
    ended = np.array([True, False])
    mem.add(Transition(obs, np.zeros(2, np.int64), np.zeros(2, np.float32), obs + 1, ended, ~ended))
    batch = mem.sample(CPU)
    assert batch.obs.dtype == torch.uint8 and batch.next_obs.dtype == torch.uint8
    assert batch.next_obs.tolist() == (obs[:2] + 1).tolist()
    arrays = [mem.data["obs"], mem.finals.values, mem.latest_next_obs]
    assert all(a.dtype == np.uint8 for a in arrays)


@pytest.mark.parametrize("num_envs", [1, 16])
def test_float_max_size_and_footprint(num_envs: int) -> None:
    mem = Replay(
        memory_config(Replay, max_size=1e6, batch_size=32), layout(num_envs, (4,)), 1, MAX_FRAME
    )
    assert mem.capacity == 1_000_000
    one_copy = 1_000_000 * (4 * 4 + 8 + 4 + 1 + 1)  # obs + action + reward + two flags
    assert mem.nbytes < 1.3 * one_copy


def test_use_cer_puts_the_newest_transitions_in_every_batch() -> None:
    for cls in (Replay, PrioritizedReplay):
        mem = make_memory(cls, num_envs=2, max_size=100, batch_size=4, use_cer=True)
        stream = EnvStream(2)
        for _ in range(30):
            newest = stream.step(mem)
            if mem.ready():
                assert mem.sample(CPU).actions[-2:].tolist() == newest.tolist()


def test_sampling_follows_the_global_seed() -> None:
    def draws(seed: int) -> list[list[int]]:
        torch.manual_seed(seed)
        mem = make_memory(max_size=50, batch_size=8)
        stream = EnvStream(2)
        for _ in range(20):
            stream.step(mem)
        return [mem.sample(CPU).actions.tolist() for _ in range(3)]

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)


# -- state -------------------------------------------------------------------------------------
def round_trip(state: dict[str, Any]) -> dict[str, Any]:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
def test_state_round_trip_reproduces_samples(cls: type[Replay]) -> None:
    torch.manual_seed(0)
    mem = make_memory(cls, num_envs=2, max_size=10, batch_size=4)
    stream = EnvStream(2)
    for t in range(8):
        stream.step(mem, terminated=[t % 2] if t % 3 == 0 else [])
    mem.sample(CPU)
    mem.anneal(30)
    mem.update_priorities(np.array([0, 3]), np.array([2.0, 5.0]))
    state = round_trip(mem.state_dict())
    torch.manual_seed(1)  # a different seed: the sampler's state must come from the checkpoint
    other = make_memory(cls, num_envs=2, max_size=10, batch_size=4)
    other.load_state_dict(state)
    other_stream = copy.deepcopy(stream)
    for t in range(6):
        if t % 2:
            stream.step(mem, terminated=[0])
            other_stream.step(other, terminated=[0])
        a, b = mem.sample(CPU), other.sample(CPU)
        for k, x, y in zip(Batch._fields, a, b, strict=True):
            assert (x is None) == (y is None), k
            assert x is None or torch.equal(x, y), k


def test_resume_with_restarted_episodes_keeps_newest_successors() -> None:
    """After loading, the next add may pass a reset obs (env not restored): the last stored
    transitions must keep their true successors."""
    mem = make_memory(num_envs=2, max_size=4, batch_size=4)
    stream = EnvStream(2)
    stream.step(mem)
    stream.step(mem, terminated=[1])
    other = make_memory(num_envs=2, max_size=4, batch_size=4)
    other.load_state_dict(round_trip(mem.state_dict()))
    stream.obs = stream._fresh(2)  # episodes restart: this obs does not follow the last one
    stream.step(other)
    seen: set[int] = set()
    for _ in range(50):
        seen |= check_batch(other.sample(CPU), stream.truth)
    assert seen == set(stream.order[-4:])


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "spec", "message"),
    [
        (Replay, {"batch_size": 7}, "agent.memory.batch_size: must be <= max_size (6), got 7"),
        (Replay, {"max_size": 10.5}, "agent.memory.max_size: expected int, got 10.5"),
        (Replay, {"max_size": None}, "agent.memory.max_size: required (int), missing"),
        (PrioritizedReplay, {"alpha": 1.5}, "agent.memory.alpha: must be in [0, 1], got 1.5"),
        (PrioritizedReplay, {"beta": -0.1}, "agent.memory.beta: must be in [0, 1], got -0.1"),
        (PrioritizedReplay, {"epsilon": 0}, "agent.memory.epsilon: must be > 0, got 0"),
        (PrioritizedReplay, {"beta_end_step": 0}, "agent.memory.beta_end_step: must be > 0"),
    ],
)
def test_bad_memory_spec(cls: type[Replay], spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as err:
        make_memory(cls, **spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_per_beta_without_end_step_reaches_one_at_max_frame() -> None:
    mem = make_memory(PrioritizedReplay, beta=0.4, beta_end_step=None)
    mem.anneal(MAX_FRAME // 2)
    assert mem.beta == pytest.approx(0.7)
    mem.anneal(MAX_FRAME)
    assert mem.beta == 1.0


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({"alpha": 1.5}, "agent.memory.alpha: must be in [0, 1], got 1.5"),
        ({"beta": -0.5}, "agent.memory.beta: must be in [0, 1], got -0.5"),
        ({"max_size": 100, "batch_size": 200}, "agent.memory.batch_size: must be <= max_size"),
    ],
)
def test_spec_validation_of_memory_values(memory: dict[str, Any], message: str) -> None:
    spec = make_spec("random")
    spec["agent"]["memory"] = {"name": "PrioritizedReplay", "alpha": 0.6, "epsilon": 1e-6} | memory
    with pytest.raises(SpecError) as err:
        spec_util.validate(spec)
    assert message in str(err.value)


def test_registered() -> None:
    assert MEMORIES["Replay"] is Replay and MEMORIES["PrioritizedReplay"] is PrioritizedReplay


# -- frame stacks ------------------------------------------------------------------------------
K = 4  # frames per obs, as Atari's
FRAME = (6, 6)  # small frames keep the tests fast; the layout does not depend on their size


def stack_layout(num_envs: int, frame_stack: int, frame: tuple[int, ...] = FRAME) -> Layout:
    """Layout of uint8 stacks of K frames: stored whole (frame_stack 1) or frame by frame (K)."""
    return Layout(num_envs, (K, *frame), np.dtype(np.uint8), (), np.dtype(np.int64), frame_stack)


class StackStream:
    """Vector-env steps whose obs are stacks of K random frames, newest last, each env's stack
    shifting by one new frame per step. Per env and step, at random: the episode goes on; a
    life is lost (terminated, and the stack goes on); a game over or time limit (the final obs
    goes on, the next obs restarts zero-padded); or what an env may also do: a restart whose
    older frames are not zeros (no episode end, or with one), a final obs that does not continue
    the obs. `restart()` gives every env a stack that continues nothing (a resume)."""

    def __init__(self, num_envs: int, seed: int = 0) -> None:
        self.n = num_envs
        self.rng = np.random.default_rng(seed)
        self.obs = self._padded(num_envs)

    def _frames(self, n: int, count: int = 1) -> np.ndarray:
        return self.rng.integers(1, 256, (n, count, *FRAME), dtype=np.uint8)

    def _padded(self, n: int) -> np.ndarray:
        obs = np.zeros((n, K, *FRAME), dtype=np.uint8)
        obs[:, -1:] = self._frames(n)
        return obs

    def restart(self) -> None:
        self.obs = self._frames(self.n, K)

    def step(self) -> Transition:
        n, u = self.n, self.rng.random(self.n)
        going_on = np.concatenate([self.obs[:, 1:], self._frames(n)], axis=1)
        life_lost, ended = u < 0.06, (u >= 0.06) & (u < 0.16)
        odd_restart, odd_final = (u >= 0.16) & (u < 0.2), (u >= 0.2) & (u < 0.23)
        truncated = ended & (self.rng.random(n) < 0.5)
        terminated = life_lost | (ended & ~truncated) | odd_final
        finals = going_on.copy()
        finals[odd_final] = self._frames(int(odd_final.sum()), K)
        following = going_on.copy()
        restarts = ended | odd_final
        following[restarts] = self._padded(int(restarts.sum()))
        following[odd_restart] = self._frames(int(odd_restart.sum()), K)
        following[odd_restart, 0] = 0  # padding that is partly zero is still kept
        actions = self.rng.integers(0, 6, n)
        rewards = self.rng.standard_normal(n).astype(np.float32)
        t = Transition(self.obs, actions, rewards, finals, terminated, truncated)
        self.obs = following
        return t


def assert_same_batches(a: Batch, b: Batch) -> None:
    for k, x, y in zip(Batch._fields, a, b, strict=True):
        assert (x is None) == (y is None), k
        assert x is None or (x.dtype == y.dtype and torch.equal(x, y)), k


def stack_memories(cls: type[Replay], num_envs: int, **spec: Any) -> tuple[Replay, Replay]:
    """A plain replay of whole stacks and a frame-stack one, with the same sampler state."""
    config = memory_config(cls, **spec)
    plain = cls(config, stack_layout(num_envs, 1), 1, MAX_FRAME)
    stacked = cls(config, stack_layout(num_envs, K), 1, MAX_FRAME)
    assert stacked.stacks is not None and "obs" not in stacked.data and plain.stacks is None
    return plain, stacked


def feed(mems: list[Replay], t: Transition) -> None:
    for mem in mems:
        mem.add(t)


def sample_all(mems: list[Replay], rng: np.random.Generator) -> list[Batch]:
    """One batch from each memory; PER priorities then updated the same way in each."""
    batches = [mem.sample(CPU) for mem in mems]
    if batches[0].idxs is not None:
        td_errors = torch.as_tensor(rng.standard_normal(len(batches[0].idxs)))
        for mem, batch in zip(mems, batches, strict=True):
            mem.update_priorities(batch.idxs, td_errors)
    return batches


@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
@pytest.mark.parametrize("use_cer", [False, True])
@pytest.mark.parametrize(("num_envs", "max_size"), [(3, 24), (4, 10), (2, 2)])
def test_frame_stacks_sample_what_whole_stacks_do(
    cls: type[Replay], use_cer: bool, num_envs: int, max_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same transitions (restarts, life losses, odd finals) in a replay of whole stacks and
    in one of frames sample the same batches, bit for bit, across many wraps of the capacity
    (even one row, fewer than K) and while both rings grow from 2 slots."""
    monkeypatch.setattr(replay, "INITIAL_FINAL_SLOTS", 2)
    monkeypatch.setattr(frame_stacks, "INITIAL_OLDER_SLOTS", 2)
    batch_size = min(8, max_size)
    mems = stack_memories(cls, num_envs, max_size=max_size, batch_size=batch_size, use_cer=use_cer)
    stream, rng = StackStream(num_envs), np.random.default_rng(1)
    for step in range(120):
        feed(mems, stream.step())
        if step == 60:
            stream.restart()  # an env that continues nothing, without an episode end
        if mems[0].ready():
            assert_same_batches(*sample_all(mems, rng))
    finals, older = len(mems[1].finals.values), len(mems[1].stacks.older.values)
    assert older > 2 and (finals > 2 or finals == mems[1].capacity)


@pytest.mark.parametrize("num_envs", [64, 128, 1024])
def test_frame_stacks_of_many_envs_rebuild_the_true_stacks(num_envs: int) -> None:
    """With 64 envs or more a stack's start row lies depth x num_envs cells back, beyond int8:
    the stacks that started 1 to 3 rows back (every env's first rows, each restart) still come
    back as they were and sampling does not raise."""
    mems = stack_memories(Replay, num_envs, max_size=6 * num_envs, batch_size=2 * num_envs)
    stream, rng = StackStream(num_envs), np.random.default_rng(1)
    for _ in range(10):
        feed(mems, stream.step())
        assert_same_batches(*sample_all(mems, rng))
    depth = mems[1].stacks.depth
    assert (depth == 2).any() and (depth < K - 1).any()  # stacks 2 rows past their start


def test_frame_stacks_of_floats_are_kept_bit_for_bit() -> None:
    """Float stacks (k = 2, one env): a restart padded with -0.0 is not zero padding, and a
    frame with a NaN still continues its stack; every batch has the bytes whole stacks give."""
    nan, config = float("nan"), memory_config(Replay, max_size=4, batch_size=4)
    mems = [
        Replay(config, Layout(1, (2, 3), np.dtype(np.float32), (), np.dtype(np.int64), k), 1, 1)
        for k in (1, 2)
    ]
    frames = np.array([[-0.0] * 3, [1, nan, 2], [3, 4, 5], [-0.0] * 3, [6, 7, 8], [9, 9, 9]])
    stacks = frames[[[0, 1], [1, 2], [3, 4], [4, 5]]].astype(np.float32)[:, None]
    no = np.zeros(1, dtype=np.bool_)
    for obs, next_obs in zip(stacks, [*stacks[1:], stacks[3]], strict=True):
        feed(
            mems, Transition(obs, np.zeros(1, np.int64), np.zeros(1, np.float32), next_obs, no, no)
        )
        for _ in range(4):
            plain, stacked = (m.sample(CPU) for m in mems)
            for x, y in zip(plain, stacked, strict=True):
                assert (x is None and y is None) or x.numpy().tobytes() == y.numpy().tobytes()
    assert mems[1].stacks.older.count == 2  # the first obs and the -0.0 restart


def test_frame_stacks_hold_a_quarter_of_the_memory() -> None:
    """Atari's 4 x 84 x 84 uint8 stacks, 16 envs, 5e4 transitions: the frame-stack replay's
    arrays (nbytes) are 0.2525 of the plain one's (1/4 plus the flags, the actions and the
    rings' first slots), and both are what replay_bytes says before they exist."""
    config = memory_config(Replay, max_size=50_000, batch_size=32)
    plain, stacked = (Replay(config, stack_layout(16, k, (84, 84)), 1, MAX_FRAME) for k in (1, K))
    assert plain.nbytes == replay_bytes(config, stack_layout(16, 1, (84, 84)))
    assert stacked.nbytes == replay_bytes(config, stack_layout(16, K, (84, 84)))
    assert stacked.nbytes / plain.nbytes == pytest.approx(0.2525, abs=5e-4)


@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
@pytest.mark.parametrize("frame_stack", [1, K])
def test_replay_bytes_is_what_a_replay_allocates(cls: type[Replay], frame_stack: int) -> None:
    for num_envs, max_size in ((1, 5), (3, 100), (16, 5000)):
        config = memory_config(cls, max_size=max_size, batch_size=4)
        layout = stack_layout(num_envs, frame_stack)
        assert cls(config, layout, 1, MAX_FRAME).nbytes == replay_bytes(config, layout)


@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
@pytest.mark.parametrize("use_cer", [False, True])
def test_frame_stacks_state_round_trip(cls: type[Replay], use_cer: bool) -> None:
    """Saved and loaded after wrapping, a frame-stack replay samples what the uninterrupted one
    does; where the env restarted its episodes at the resume, what a replay of whole stacks
    saved and loaded at the same point does (the newest row's successors kept)."""
    spec = {"max_size": 21, "batch_size": 6, "use_cer": use_cer}
    plain, stacked = stack_memories(cls, 3, **spec)
    stream, rng = StackStream(3), np.random.default_rng(1)
    for _ in range(17):
        feed([plain, stacked], stream.step())
        sample_all([plain, stacked], rng)
    # a checkpoint as saved: each load reads its own (a full replay takes its arrays over)
    plain_state, stacked_state = (io.BytesIO() for _ in range(2))
    torch.save(plain.state_dict(), plain_state)
    torch.save(stacked.state_dict(), stacked_state)
    torch.manual_seed(1)  # a different seed: the sampler's state must come from the checkpoint

    def loaded(saved: io.BytesIO, frame_stack: int) -> Replay:
        mem = cls(memory_config(cls, **spec), stack_layout(3, frame_stack), 1, MAX_FRAME)
        saved.seek(0)
        mem.load_state_dict(torch.load(saved, weights_only=True))
        return mem

    restarted, restarted_rng = copy.deepcopy(stream), copy.deepcopy(rng)
    resumed = loaded(stacked_state, K)
    for _ in range(12):
        feed([stacked, resumed], stream.step())
        assert_same_batches(*sample_all([stacked, resumed], rng))
    mems = [loaded(plain_state, 1), loaded(stacked_state, K)]
    restarted.restart()
    for _ in range(12):
        feed(mems, restarted.step())
        assert_same_batches(*sample_all(mems, restarted_rng))


@pytest.mark.parametrize("frame_stack", [1, K])
def test_a_replay_saved_when_every_env_had_just_ended_loads(frame_stack: int) -> None:
    """A checkpoint taken right after a step that ended every env's episode (a one-env Atari
    game over or life loss) resumes: the newest row has no open successor to keep, and the
    loaded replay samples what the saved one does."""
    spec = {"max_size": 12, "batch_size": 4}
    mem = Replay(memory_config(Replay, **spec), stack_layout(1, frame_stack), 1, MAX_FRAME)
    stream = StackStream(1)
    for _ in range(5):
        mem.add(stream.step())
    t = stream.step()
    mem.add(t._replace(terminateds=np.array([True]), truncateds=np.array([False])))
    saved = io.BytesIO()
    torch.save(mem.state_dict(), saved)
    saved.seek(0)
    resumed = Replay(memory_config(Replay, **spec), stack_layout(1, frame_stack), 1, MAX_FRAME)
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    assert_same_batches(mem.sample(CPU), resumed.sample(CPU))


@pytest.mark.parametrize("full", [False, True])
def test_a_full_replay_takes_its_loaded_arrays_over(full: bool) -> None:
    """A resume of a full replay keeps the checkpoint's arrays instead of copying them (a copy
    holds the largest array twice, 1.33 GiB more for dqn_atari's frames); one not yet full
    copies them into its own, which still has room for the rest."""
    spec = {"max_size": 21, "batch_size": 6}
    _, stacked = stack_memories(Replay, 3, **spec)
    stream = StackStream(3)
    for _ in range(17 if full else 4):  # 7 rows of 3 envs (+ 3 frame rows): 17 wraps
        feed([stacked], stream.step())
    state = round_trip(stacked.state_dict())
    resumed = Replay(memory_config(Replay, **spec), stack_layout(3, K), 1, MAX_FRAME)
    resumed.load_state_dict(state)
    loaded = [state["frame_stacks"]["frames"], *state["data"].values()]
    kept = [resumed.stacks.frames, *resumed.data.values()]
    assert [np.shares_memory(a.numpy(), b) for a, b in zip(loaded, kept, strict=True)] == [
        full
    ] * len(kept)
    for a, b in zip(loaded, kept, strict=True):
        assert np.array_equal(a.numpy(), b[: len(a)])


def test_a_loaded_array_that_is_not_contiguous_is_copied() -> None:
    """A full replay's checkpoint array in another memory layout (a checkpoint not written by
    this replay) is copied into the replay's own contiguous array, which the batches are
    gathered from, rather than taken over; the batches are the same."""
    spec = {"max_size": 12, "batch_size": 5}
    mem = Replay(memory_config(Replay, **spec), stack_layout(3, 1), 1, MAX_FRAME)
    stream = StackStream(3)
    for _ in range(9):  # 4 rows of 3 envs: full
        mem.add(stream.step())
    state = round_trip(mem.state_dict())
    obs = state["data"]["obs"]
    state["data"]["obs"] = obs.transpose(0, 1).contiguous().transpose(0, 1)  # same values
    assert not state["data"]["obs"].is_contiguous()
    resumed = Replay(memory_config(Replay, **spec), stack_layout(3, 1), 1, MAX_FRAME)
    resumed.load_state_dict(state)
    assert resumed.data["obs"].flags.c_contiguous
    assert_same_batches(mem.sample(CPU), resumed.sample(CPU))


# -- a replay that will not fit ----------------------------------------------------------------
class VirtualMemory(NamedTuple):
    available: int


DQN_FILE, DQN_NAME = "benchmark/dqn/dqn_cartpole.json", "dqn_cartpole"  # 4 envs, 4 sessions


def available(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    monkeypatch.setattr(psutil, "virtual_memory", lambda: VirtualMemory(n))


def test_fit_check_refuses_replays_beyond_available_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CartPole (4 float32), 1e6 transitions: 1e6 x 34 bytes (obs 16, action 8, reward 4, two
    flags, final slot 4) + 1024 final slots x 16 + 4 latest obs x 16 = 34,016,448 bytes."""
    spec = spec_util.load_spec(DQN_FILE, DQN_NAME, values={"agent.memory.max_size": 1_000_000}).spec
    assert replay_bytes(spec.agent.memory, spec_util.memory_layout(spec)) == 34_016_448
    available(monkeypatch, 50_000_000)
    spec_util.check_memory_fit(spec, 1)
    with pytest.raises(SpecError) as err:
        spec_util.check_memory_fit(spec, 4)
    assert str(err.value) == (
        "agent.memory.max_size: 4 sessions x 34.0 MB replay = 136.1 MB, more than the 50.0 MB "
        "available; lower max_size or meta.max_session"
    )
    available(monkeypatch, 30_000_000)
    with pytest.raises(
        SpecError, match=r"1 session x 34.0 MB replay = 34.0 MB, .*; lower max_size$"
    ):
        spec_util.check_memory_fit(spec, 1)


def test_fit_check_runs_before_training_not_in_check(
    monkeypatch: pytest.MonkeyPatch, in_tmp: Path
) -> None:
    available(monkeypatch, 50_000_000)
    big = ["-s", "agent.memory.max_size=1000000"]
    result = invoke(["run", DQN_FILE, DQN_NAME, "train", *big])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert result.stderr.strip() == (
        "error: agent.memory.max_size: 4 sessions x 34.0 MB replay = 136.1 MB, more than the "
        "50.0 MB available; lower max_size or meta.max_session"
    )
    assert not (in_tmp / "data").exists()
    assert invoke(["check", DQN_FILE, DQN_NAME, *big]).exit_code == 0


@pytest.mark.atari
def test_fit_check_counts_atari_replays_frame_by_frame() -> None:
    """ALE's 4 x 84 x 84 uint8 stacks: the layout validation builds stores them frame by frame."""
    spec = spec_util.load_spec("benchmark/dqn/dqn_atari.json", "dqn_atari", {"env": "ALE/Pong-v5"})
    layout = spec_util.memory_layout(spec.spec)
    assert (layout.obs_shape, layout.obs_dtype, layout.frame_stack) == ((4, 84, 84), np.uint8, 4)
    memory = spec.spec.agent.memory
    whole = replay_bytes(memory, dataclasses.replace(layout, frame_stack=1))
    assert replay_bytes(memory, layout) / whole == pytest.approx(0.2513, abs=5e-4)
