"""A replay's side store: a FIFO ring of entries that belong to rows of the main store."""

from typing import Any

import numpy as np
import torch


class Ring:
    """Entries pushed in the order of the rows they belong to, so when a row is overwritten its
    entries are the ring's oldest and are released from its head. It doubles (up to
    `max_size`) when more entries are live than it holds, and then remaps the slots that the
    index arrays `owners` name (a slot >= 0; a negative value names none)."""

    def __init__(
        self,
        size: int,
        entry_shape: tuple[int, ...],
        dtype: np.dtype,
        max_size: int,
        owners: list[np.ndarray],
    ) -> None:
        self.values = np.zeros((min(size, max_size),) + entry_shape, dtype=dtype)
        self.head = 0  # slot of the oldest live entry
        self.count = 0
        self.max_size = max_size
        self.owners = owners

    def push(self, entries: np.ndarray) -> np.ndarray:
        """Append entries; their slots."""
        n = len(entries)
        if self.count + n > len(self.values):
            self._grow(self.count + n)
        slots = (self.head + self.count + np.arange(n)) % len(self.values)
        self.values[slots] = entries
        self.count += n
        return slots

    def release(self, n: int) -> None:
        """Free the `n` oldest entries."""
        self.head = (self.head + n) % len(self.values)
        self.count -= n

    def _grow(self, needed: int) -> None:
        size = len(self.values)
        new_size = min(max(2 * size, needed), self.max_size)
        new = np.zeros((new_size,) + self.values.shape[1:], dtype=self.values.dtype)
        new[: self.count] = self.values[(self.head + np.arange(self.count)) % size]
        for idx in self.owners:
            live = idx >= 0
            idx[live] = (idx[live] - self.head) % size
        self.values, self.head = new, 0

    def state_dict(self) -> dict[str, Any]:
        return {"values": torch.from_numpy(self.values), "head": self.head, "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.values = state["values"].numpy().copy()
        self.head, self.count = state["head"], state["count"]
