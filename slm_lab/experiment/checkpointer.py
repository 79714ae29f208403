"""A session's checkpoint files: the latest model and full training state, and the best model.

Each is written atomically (temp file + rename), at most every SAVE_INTERVAL_S seconds and at
the end: at log_frequency 500 a write per metrics row cost more than the training on small
nets. Resume restarts from the last write and replays deterministically, so the rows it
produces are the same.
"""

import time
from pathlib import Path
from typing import Any

from slm_lab.experiment.layout import RunLayout
from slm_lab.lib import io

SAVE_INTERVAL_S = 10.0  # write checkpoint files at most this often (and at the end)


class Checkpointer:
    def __init__(self, layout: RunLayout, trial: int, session: int) -> None:
        self.latest = layout.ckpt(trial, session, "latest")
        self.best = layout.ckpt(trial, session, "best")
        self.best_model: dict[str, Any] | None = None  # a snapshot of the best, not yet written
        self.last_save = time.monotonic()

    def keep_best(self, model: dict[str, Any]) -> None:
        """The model of a new best row: written with the next save."""
        self.best_model = model

    def due(self) -> bool:
        return time.monotonic() - self.last_save >= SAVE_INTERVAL_S

    def save(self, model: dict[str, Any], state: dict[str, Any]) -> None:
        """Write the best model (if it changed) and the latest model and full state."""
        if self.best_model is not None:
            io.save_torch(self.best_model, self.best[0])
            self.best_model = None
        io.save_torch(model, self.latest[0])
        io.save_torch(state, self.latest[1])
        self.last_save = time.monotonic()

    def load(self) -> dict[str, Any] | None:
        """The latest full state, None when none was saved."""
        return io.load_torch(self.latest[1]) if self.latest[1].exists() else None

    def model_path(self) -> Path:
        """The model to replay: the best one, else the latest."""
        return self.best[0] if self.best[0].exists() else self.latest[0]
