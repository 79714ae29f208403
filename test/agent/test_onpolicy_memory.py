"""On-policy memories: [T, N] batches in order; whole episodes per env, unfinished ones kept."""

import numpy as np
import torch

from slm_lab.agent.memory.onpolicy import OnPolicyBatchReplay, OnPolicyReplay

CPU = torch.device("cpu")
OBS_SHAPE = (2,)


def step_data(t: int, n: int) -> dict[str, np.ndarray]:
    """Step t of n envs; obs/actions/rewards encode (t, env) so order is checkable."""
    ids = np.array([10 * t + e for e in range(n)], dtype=np.float32)
    return {
        "obs": np.stack([ids, -ids], 1),
        "actions": ids.astype(np.int64),
        "rewards": ids,
        "next_obs": np.stack([ids + 10, -ids - 10], 1),
    }


def test_batch_replay_returns_time_major_batch_in_order() -> None:
    T, N = 4, 3
    mem = OnPolicyBatchReplay(T, N, OBS_SHAPE, np.float32, (), np.int64)
    terms = np.zeros((T, N), bool)
    truncs = np.zeros((T, N), bool)
    terms[1, 2] = True
    truncs[2, 0] = True
    for t in range(T):
        assert not mem.ready()
        d = step_data(t, N)
        mem.add(d["obs"], d["actions"], d["rewards"], d["next_obs"], terms[t], truncs[t])
    assert mem.ready()
    batch = mem.sample(CPU)
    assert batch["rewards"].shape == (T, N) and batch["obs"].shape == (T, N, 2)
    expected_ids = torch.tensor([[10.0 * t + e for e in range(N)] for t in range(T)])
    torch.testing.assert_close(batch["rewards"], expected_ids)
    torch.testing.assert_close(batch["obs"][..., 1], -expected_ids)
    torch.testing.assert_close(batch["next_obs"][..., 0], expected_ids + 10)
    assert batch["actions"].dtype == torch.int64
    assert batch["terminateds"].tolist() == terms.tolist()
    assert batch["dones"].tolist() == (terms | truncs).tolist()
    assert not mem.ready()  # starts over
    d = step_data(9, N)
    mem.add(d["obs"], d["actions"], d["rewards"], d["next_obs"], terms[0], truncs[0])
    assert mem.ptr == 1


def test_batch_replay_state_round_trip() -> None:
    mem = OnPolicyBatchReplay(3, 2, OBS_SHAPE, np.float32, (), np.int64)
    d = step_data(0, 2)
    mem.add(
        d["obs"],
        d["actions"],
        d["rewards"],
        d["next_obs"],
        np.array([False, True]),
        np.zeros(2, bool),
    )
    other = OnPolicyBatchReplay(3, 2, OBS_SHAPE, np.float32, (), np.int64)
    other.load_state_dict(mem.state_dict())
    assert other.ptr == 1
    for k in mem.data:
        np.testing.assert_array_equal(other.data[k], mem.data[k])


def test_episode_replay_returns_finished_episodes_contiguous_and_keeps_the_rest() -> None:
    # env 0 ends episodes after steps 1 and 4 (lengths 2, 3); env 1 ends one after step 2 (length 3)
    N = 2
    mem = OnPolicyReplay(2, N, OBS_SHAPE, np.float32, (), np.int64)
    ends = {(1, 0), (2, 1), (4, 0)}
    truncated = {(2, 1)}  # env 1's episode is cut by a time limit, the others terminate
    for t in range(5):
        dones = np.array([(t, e) in ends for e in range(N)])
        truncs = np.array([(t, e) in truncated for e in range(N)])
        d = step_data(t, N)
        mem.add(d["obs"], d["actions"], d["rewards"], d["next_obs"], dones & ~truncs, truncs)
        assert mem.ready() == (t == 2)  # 2 episodes finished at t=2; sampling empties the count
        if t == 2:
            batch = mem.sample(CPU)
            # env 0's episode (t=0,1), then env 1's (t=0,1,2); env 0's step t=2 waits
            assert batch["rewards"].shape == (5, 1)
            assert batch["rewards"][:, 0].tolist() == [0.0, 10.0, 1.0, 11.0, 21.0]
            assert batch["dones"][:, 0].tolist() == [False, True, False, False, True]
            assert batch["terminateds"][:, 0].tolist() == [False, True, False, False, False]
            assert batch["obs"][:, 0, 1].tolist() == [0.0, -10.0, -1.0, -11.0, -21.0]
            assert batch["actions"][:, 0].tolist() == [0, 10, 1, 11, 21]
    assert mem.ready() is False  # only 1 episode has finished since: env 0's t=2..4
    d = step_data(5, N)
    mem.add(
        d["obs"],
        d["actions"],
        d["rewards"],
        d["next_obs"],
        np.array([False, True]),
        np.zeros(2, bool),
    )
    batch = mem.sample(CPU)
    # env 0's episode t=2,3,4, then env 1's t=3,4,5
    assert batch["rewards"][:, 0].tolist() == [20.0, 30.0, 40.0, 31.0, 41.0, 51.0]
    assert batch["dones"][:, 0].tolist() == [False, False, True, False, False, True]
    # env 0's unfinished step t=5 remains, at the front of its row
    assert mem.ptr.tolist() == [1, 0] and mem.data["rewards"][0, 0] == 50.0


def test_episode_replay_grows_past_initial_capacity() -> None:
    mem = OnPolicyReplay(1, 1, OBS_SHAPE, np.float32, (), np.int64)
    steps = OnPolicyReplay.INITIAL_CAPACITY + 10
    for t in range(steps):
        d = step_data(t, 1)
        mem.add(
            d["obs"],
            d["actions"],
            d["rewards"],
            d["next_obs"],
            np.array([t == steps - 1]),
            np.zeros(1, bool),
        )
    batch = mem.sample(CPU)
    assert batch["rewards"].shape == (steps, 1)
    assert batch["rewards"][-1, 0].item() == 10.0 * (steps - 1)
