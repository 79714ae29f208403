"""On-policy memories: [T, N] batches in order; whole episodes per env, unfinished ones kept."""

import numpy as np
import torch

from slm_lab.agent.memory.base import Layout, Transition
from slm_lab.agent.memory.config import MemoryConfig
from slm_lab.agent.memory.onpolicy import OnPolicyBatchReplay, OnPolicyReplay

CPU = torch.device("cpu")
MAX_FRAME = 10_000  # on-policy memories have no schedule: any run length


def layout(num_envs: int) -> Layout:
    return Layout(num_envs, (2,), np.dtype(np.float32), (), np.dtype(np.int64))


def batch_replay(T: int, N: int) -> OnPolicyBatchReplay:
    return OnPolicyBatchReplay(MemoryConfig("OnPolicyBatchReplay"), layout(N), T, MAX_FRAME)


def episode_replay(training_frequency: int, N: int) -> OnPolicyReplay:
    config = MemoryConfig("OnPolicyReplay")
    return OnPolicyReplay(config, layout(N), training_frequency, MAX_FRAME)


def step_data(t: int, n: int, terminateds: np.ndarray, truncateds: np.ndarray) -> Transition:
    """Step t of n envs; obs/actions/rewards encode (t, env) so order is checkable."""
    ids = np.array([10 * t + e for e in range(n)], dtype=np.float32)
    return Transition(
        obs=np.stack([ids, -ids], 1),
        actions=ids.astype(np.int64),
        rewards=ids,
        next_obs=np.stack([ids + 10, -ids - 10], 1),
        terminateds=terminateds,
        truncateds=truncateds,
    )


def test_batch_replay_returns_time_major_batch_in_order() -> None:
    T, N = 4, 3
    mem = batch_replay(T, N)
    terms = np.zeros((T, N), bool)
    truncs = np.zeros((T, N), bool)
    terms[1, 2] = True
    truncs[2, 0] = True
    for t in range(T):
        assert not mem.ready()
        mem.add(step_data(t, N, terms[t], truncs[t]))
    assert mem.ready()
    batch = mem.sample(CPU)
    assert batch.rewards.shape == (T, N) and batch.obs.shape == (T, N, 2)
    expected_ids = torch.tensor([[10.0 * t + e for e in range(N)] for t in range(T)])
    torch.testing.assert_close(batch.rewards, expected_ids)
    torch.testing.assert_close(batch.obs[..., 1], -expected_ids)
    torch.testing.assert_close(batch.next_obs[..., 0], expected_ids + 10)
    assert batch.actions.dtype == torch.int64
    assert batch.terminateds.tolist() == terms.tolist()
    assert batch.dones.tolist() == (terms | truncs).tolist()
    assert not mem.ready()  # starts over
    mem.add(step_data(9, N, terms[0], truncs[0]))
    assert mem.ptr == 1


def test_batch_replay_state_round_trip() -> None:
    """A checkpoint holds the rows written since the last batch only (none right after one); a
    memory loaded from it hands over the same next batch as the one that kept going, and a
    checkpoint of the whole batch (as written before) loads as well."""
    T, N = 3, 2
    mem = batch_replay(T, N)
    no_ends = np.zeros(N, bool)
    for t in range(T):
        mem.add(step_data(t, N, np.array([False, t == 1]), no_ends))
    mem.sample(CPU)
    assert all(len(v) == 0 for v in mem.state_dict()["data"].values())
    mem.add(step_data(7, N, np.array([True, False]), no_ends))  # the rows after it are stale
    state = mem.state_dict()
    assert state["ptr"] == 1
    for v in state["data"].values():  # one row, and torch.save writes a tensor's whole storage
        assert len(v) == 1 and v.untyped_storage().nbytes() == v.numel() * v.element_size()
    whole = {"ptr": 1, "data": {k: torch.from_numpy(v.copy()) for k, v in mem.data.items()}}
    resumed = []
    for saved in (state, whole):
        other = batch_replay(T, N)
        other.load_state_dict(saved)
        resumed.append(other)
    for m in (mem, *resumed):
        for t in (8, 9):
            m.add(step_data(t, N, no_ends, no_ends))
    expected = mem.sample(CPU)
    for other in resumed:
        got = other.sample(CPU)
        for k in ("obs", "actions", "rewards", "next_obs", "terminateds", "dones"):
            torch.testing.assert_close(getattr(got, k), getattr(expected, k))


def test_episode_replay_returns_finished_episodes_contiguous_and_keeps_the_rest() -> None:
    # env 0 ends episodes after steps 1 and 4 (lengths 2, 3); env 1 ends one after step 2 (length 3)
    N = 2
    mem = episode_replay(2, N)
    ends = {(1, 0), (2, 1), (4, 0)}
    truncated = {(2, 1)}  # env 1's episode is cut by a time limit, the others terminate
    for t in range(5):
        dones = np.array([(t, e) in ends for e in range(N)])
        truncs = np.array([(t, e) in truncated for e in range(N)])
        mem.add(step_data(t, N, dones & ~truncs, truncs))
        assert mem.ready() == (t == 2)  # 2 episodes finished at t=2; sampling empties the count
        if t == 2:
            batch = mem.sample(CPU)
            # env 0's episode (t=0,1), then env 1's (t=0,1,2); env 0's step t=2 waits
            assert batch.rewards.shape == (5, 1)
            assert batch.rewards[:, 0].tolist() == [0.0, 10.0, 1.0, 11.0, 21.0]
            assert batch.dones[:, 0].tolist() == [False, True, False, False, True]
            assert batch.terminateds[:, 0].tolist() == [False, True, False, False, False]
            assert batch.obs[:, 0, 1].tolist() == [0.0, -10.0, -1.0, -11.0, -21.0]
            assert batch.actions[:, 0].tolist() == [0, 10, 1, 11, 21]
    assert mem.ready() is False  # only 1 episode has finished since: env 0's t=2..4
    mem.add(step_data(5, N, np.array([False, True]), np.zeros(2, bool)))
    batch = mem.sample(CPU)
    # env 0's episode t=2,3,4, then env 1's t=3,4,5
    assert batch.rewards[:, 0].tolist() == [20.0, 30.0, 40.0, 31.0, 41.0, 51.0]
    assert batch.dones[:, 0].tolist() == [False, False, True, False, False, True]
    # env 0's unfinished step t=5 remains, at the front of its row
    assert mem.ptr.tolist() == [1, 0] and mem.data["rewards"][0, 0] == 50.0


def test_episode_replay_grows_past_initial_capacity() -> None:
    mem = episode_replay(1, 1)
    steps = OnPolicyReplay.INITIAL_CAPACITY + 10
    for t in range(steps):
        mem.add(step_data(t, 1, np.array([t == steps - 1]), np.zeros(1, bool)))
    batch = mem.sample(CPU)
    assert batch.rewards.shape == (steps, 1)
    assert batch.rewards[-1, 0].item() == 10.0 * (steps - 1)


def test_episode_replay_state_holds_the_written_steps_and_resumes_the_same() -> None:
    """A checkpoint holds each env's steps up to the longest pointer, not the whole capacity; a
    memory loaded from it (or from a whole-capacity one, as written before) samples the same."""
    N = 2
    mem = episode_replay(1, N)
    no_ends = np.zeros(N, bool)
    mem.add(step_data(0, N, np.array([True, False]), no_ends))
    mem.sample(CPU)  # env 0's episode leaves; env 1's first step moves to the front
    for t in (1, 2):
        mem.add(step_data(t, N, no_ends, no_ends))
    assert mem.ptr.tolist() == [2, 3]
    state = mem.state_dict()
    assert all(v.shape[:2] == (N, 3) for v in state["data"].values())
    whole = dict(state, data={k: torch.from_numpy(v.copy()) for k, v in mem.data.items()})
    resumed = []
    for saved in (state, whole):
        other = episode_replay(1, N)
        other.load_state_dict(saved)
        assert other.data["rewards"].shape == (N, OnPolicyReplay.INITIAL_CAPACITY)
        resumed.append(other)
    for m in (mem, *resumed):
        m.add(step_data(3, N, np.array([False, True]), no_ends))
        assert m.ready()
    expected = mem.sample(CPU)
    assert expected.rewards[:, 0].tolist() == [1.0, 11.0, 21.0, 31.0]  # env 1's t=0..3
    for other in resumed:
        got = other.sample(CPU)
        torch.testing.assert_close(got.rewards, expected.rewards)
        torch.testing.assert_close(got.obs, expected.obs)
        assert got.dones.tolist() == expected.dones.tolist()
        assert other.ptr.tolist() == mem.ptr.tolist()
