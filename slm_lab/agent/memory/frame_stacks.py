"""A replay's observations when they are frame stacks (Atari): one frame stored per env and step.

An observation is a stack of k frames along its first axis, newest last, and while an episode
goes on, consecutive observations of one env overlap: obs_t[:-1] == obs_{t-1}[1:]. So the
replay keeps only each obs's newest frame, in `frames` [rows + k - 1, num_envs, *frame_shape],
a circular array of one row per `add` (k - 1 rows more than the replay's, so that the frames
before its oldest row are still there). `depth[f, e]` counts how many of the stack's older
frames are the newest frames of the rows just before (0 to k - 1): `add` compares every obs
with the env's previous one, and where obs[:-1] != previous[1:] (the first add, an episode's
reset, a resume whose env restarted) the stack starts over at depth 0. A stack that starts
over keeps its older frames apart: nothing when they are all zero (a reset's zero padding),
else a slot of the `older` ring (`start_older`). A rebuild takes frame k - 1 - i of a stack
from `frames` i rows back while i <= depth, and the rest from the start row's older frames.

A final observation (an episode's end) continues its transition's obs in any env that stacks
frames: the replay's final-obs ring keeps only its newest frame, and the rest is the obs
shifted by one. One that does not (whatever the env did) keeps its older frames in `older`
too (`final_older`). A frame row's `older` entries are released when the row is overwritten.
Every rebuild is one gather over the batch x the k positions (a frame's cell is its frame row x
num_envs + env), then the few positions before a stack's start; dtypes stay as stored.
"""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.memory.layout import INITIAL_OLDER_SLOTS
from slm_lab.agent.memory.ring import Ring

NONE = -1  # no slot: the frames come from elsewhere
ZEROS = -2  # a stack that starts over with its older frames all zero (no slot needed)


def bits(x: np.ndarray) -> np.ndarray:
    """`x` as unsigned ints of its width: compared bit for bit (-0.0 is not 0.0, NaN is NaN)."""
    return x.view(np.dtype(f"u{x.itemsize}"))


def take_or_copy(loaded: torch.Tensor, array: np.ndarray) -> np.ndarray:
    """`array` with the loaded rows in front: the loaded array itself when it fills `array`
    (a full replay's, from a checkpoint), so that the largest array is not held twice while the
    checkpoint is loaded (1.33 GiB more for `dqn_atari`'s frames); else `array`, copied into."""
    values = loaded.numpy()
    if (
        values.shape == array.shape
        and values.dtype == array.dtype
        and values.flags.writeable
        and values.flags.c_contiguous  # the replay reads its arrays through flat views
    ):
        return values
    array[: len(values)] = values
    return array


def continues(obs: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Per env, whether the stacks `obs` continue the stacks `previous` by one frame."""
    same = bits(obs[:, :-1]) == bits(previous[:, 1:])
    return same.reshape(len(obs), -1).all(1)


class FrameStacks:
    def __init__(
        self, rows: int, num_envs: int, obs_shape: tuple[int, ...], dtype: np.dtype
    ) -> None:
        self.k = k = obs_shape[0]
        frame_shape = obs_shape[1:]
        self.frame_rows = frame_rows = rows + k - 1
        cells = (frame_rows, num_envs)
        self.frames = np.zeros(cells + frame_shape, dtype=dtype)
        self.depth = np.zeros(cells, dtype=np.int8)
        self.start_older = np.full(cells, ZEROS, dtype=np.int32)  # unwritten rows: zeros
        self.final_older = np.full(cells, NONE, dtype=np.int32)
        self.older = Ring(
            INITIAL_OLDER_SLOTS,
            (k - 1,) + frame_shape,
            dtype,
            2 * frame_rows * num_envs,
            [self.start_older, self.final_older],
        )
        # a cell is frame row f and env e flattened, f * num_envs + e; the replay's transition
        # i (row * num_envs + env) has its obs's newest frame in cell `cell_of[i]`
        self.num_envs, self.num_cells = num_envs, frame_rows * num_envs
        self.cell_of = np.zeros(rows * num_envs, dtype=np.int32)
        self.previous = np.zeros((num_envs,) + obs_shape, dtype=dtype)  # the last add's obs
        self.head = 0  # the frame row the next add writes
        self.num_rows = 0
        self.back = np.arange(k - 1, -1, -1)  # rows back from a stack's newest frame
        self.back_cells = self.back * num_envs

    @property
    def nbytes(self) -> int:
        arrays = (self.frames, self.depth, self.start_older, self.final_older, self.older.values)
        return sum(a.nbytes for a in arrays + (self.cell_of, self.previous))

    def add(self, row: int, obs: np.ndarray) -> None:
        """Store the newest frames of `obs`, the replay's row `row`."""
        f = self.head
        if self.num_rows == self.frame_rows:  # frame row f is the oldest: release its entries
            self.older.release(
                int(np.count_nonzero(self.start_older[f] >= 0))
                + int(np.count_nonzero(self.final_older[f] >= 0))
            )
        self.final_older[f] = NONE
        if self.num_rows:
            cont = continues(obs, self.previous)
            depth = np.minimum(self.depth[f - 1] + 1, self.k - 1)  # f - 1 = -1 wraps
            self.depth[f] = np.where(cont, depth, 0)
        else:
            cont = np.zeros(len(obs), dtype=np.bool_)
            self.depth[f] = 0
        self.start_older[f] = NONE
        if not cont.all():
            starts = np.flatnonzero(~cont)
            older = obs[starts, :-1]
            padded = ~bits(older).reshape(len(starts), -1).any(1)
            self.start_older[f, starts[padded]] = ZEROS
            self.start_older[f, starts[~padded]] = self.older.push(older[~padded])
        self.frames[f] = obs[:, -1]
        self.previous[...] = obs
        e = self.num_envs
        self.cell_of[row * e : (row + 1) * e] = np.arange(f * e, (f + 1) * e)
        self.head = (f + 1) % self.frame_rows
        self.num_rows = min(self.num_rows + 1, self.frame_rows)

    def add_finals(self, ended: np.ndarray, finals: np.ndarray) -> np.ndarray:
        """The newest frames of the final obs `finals` of envs `ended` (a mask) of the newest
        row, for the final-obs ring; older frames that the row's obs cannot give are kept."""
        odd = ~continues(finals, self.previous[ended])
        if odd.any():
            f = (self.head - 1) % self.frame_rows
            self.final_older[f, np.flatnonzero(ended)[odd]] = self.older.push(finals[odd, :-1])
        return finals[:, -1]

    def stacks(self, idxs: np.ndarray) -> np.ndarray:
        """The obs of the replay's transitions `idxs`, [n, k, *frame_shape]."""
        cells = self.cell_of[idxs]
        # stored as int8 (0 to k - 1), but depth x num_envs cells exceeds int8 from 64 envs on
        depth = self.depth.reshape(-1)[cells].astype(np.intp)
        frames = self.frames.reshape((-1,) + self.frames.shape[2:])
        out = frames.take((cells[:, None] - self.back_cells) % self.num_cells, axis=0)
        short = self.back > depth[:, None]  # positions before the stack's start row
        if short.any():
            i, p = np.nonzero(short)
            start = (cells[i] - depth[i] * self.num_envs) % self.num_cells
            slots = self.start_older.reshape(-1)[start]
            stored = slots >= 0
            # position p of a stack that started depth rows back is position p + depth there
            out[i[stored], p[stored]] = self.older.values[
                slots[stored], p[stored] + depth[i[stored]]
            ]
            out[i[~stored], p[~stored]] = 0
        return out

    def final_stacks(self, idxs: np.ndarray, obs: np.ndarray, newest: np.ndarray) -> np.ndarray:
        """The final obs of the replay's transitions `idxs`, whose obs are `obs` and whose final
        obs's newest frames are `newest`."""
        out = np.concatenate([obs[:, 1:], newest[:, None]], axis=1)
        slots = self.final_older.reshape(-1)[self.cell_of[idxs]]
        odd = slots >= 0
        out[odd, :-1] = self.older.values[slots[odd]]
        return out

    def state_dict(self) -> dict[str, Any]:
        m = self.num_rows
        return {
            "frames": torch.from_numpy(self.frames[:m]),
            "depth": torch.from_numpy(self.depth[:m]),
            "start_older": torch.from_numpy(self.start_older[:m]),
            "final_older": torch.from_numpy(self.final_older[:m]),
            "older": self.older.state_dict(),
            "cell_of": torch.from_numpy(self.cell_of),
            "previous": torch.from_numpy(self.previous),
            "head": self.head,
            "num_rows": m,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        m = self.num_rows = state["num_rows"]
        self.head = state["head"]
        self.depth[m:], self.start_older[m:], self.final_older[m:] = 0, ZEROS, NONE
        self.frames = take_or_copy(state["frames"], self.frames)
        for name in ("depth", "start_older", "final_older"):
            getattr(self, name)[:m] = state[name].numpy()
        self.older.load_state_dict(state["older"])
        self.cell_of[:] = state["cell_of"].numpy()
        self.previous[...] = state["previous"].numpy()
