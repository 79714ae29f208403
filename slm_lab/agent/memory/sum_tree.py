"""A sum tree over `capacity` non-negative priorities: batched updates and prefix-sum search.

Layout: a flat float64 array of 2L nodes, L the smallest power of two >= capacity; node 1 is the
root, node i has children 2i and 2i+1, leaf j sits at node L + j (leaves past capacity stay 0).
Every update recomputes each touched parent from its two children, so a node always equals the
exact float sum of its children (no drift from adding deltas) and a rebuild from the leaves
reproduces the tree bit for bit.
"""

from typing import Any

import numpy as np
import torch


class SumTree:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.depth = max(capacity - 1, 0).bit_length()  # levels below the root
        self.num_leaves = 1 << self.depth
        self.tree = np.zeros(2 * self.num_leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def get(self, idxs: np.ndarray) -> np.ndarray:
        """The priorities of leaves `idxs`."""
        return self.tree[self.num_leaves + idxs]

    def update(self, idxs: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaves `idxs` to `priorities` (a repeated index keeps its last value)."""
        nodes = self.num_leaves + np.asarray(idxs, dtype=np.int64)
        self.tree[nodes] = priorities
        for _ in range(self.depth):
            nodes = nodes >> 1
            # a repeated parent is written twice with the same sum
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """For each u, the leaf j with sum(p[:j]) <= u < sum(p[:j+1]).

        A subtree with zero sum is never entered, so a u at or past the total (float rounding)
        lands on the last positive leaf instead of an empty one.
        """
        u = np.array(prefix_sums, dtype=np.float64)
        nodes = np.ones(len(u), dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self.tree[left]
            go_right = (u >= left_sum) & (self.tree[left + 1] > 0)
            u = np.where(go_right, u - left_sum, u)
            nodes = left + go_right
        return nodes - self.num_leaves

    def _rebuild(self) -> None:
        n = self.num_leaves
        while n > 1:
            n //= 2
            self.tree[n : 2 * n] = self.tree[2 * n : 4 * n : 2] + self.tree[2 * n + 1 : 4 * n : 2]

    def state_dict(self) -> dict[str, Any]:
        leaves = self.tree[self.num_leaves : self.num_leaves + self.capacity]
        return {"leaves": torch.from_numpy(leaves)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tree[:] = 0
        self.tree[self.num_leaves : self.num_leaves + self.capacity] = state["leaves"].numpy()
        self._rebuild()
