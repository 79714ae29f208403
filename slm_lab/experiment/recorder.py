"""Where a session's measurements go: one metrics row per checkpoint (the session CSV,
TensorBoard, the progress line), the evaluation rows, and session 0's episodes CSV.

The CSVs are kept open and appended to; on resume each is first rewritten from the rows the
saved state holds (the episodes CSV cut back to its size at the save), so a resumed run's files
end as an unbroken run's do.
"""

import math
import os
from pathlib import Path
from typing import Any

from slm_lab.agent.agent import Agent
from slm_lab.env.backend import EnvBackend, FinishedEpisodes
from slm_lab.env.clock import Clock
from slm_lab.experiment import analysis
from slm_lab.experiment.layout import RunLayout
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup
from slm_lab.lib.logger import logger

Row = dict[str, float]


class MetricsTracker:
    """Builds one metrics row per checkpoint (see the README, "Metrics") and keeps them."""

    MA_WINDOW = analysis.MA_WINDOW

    def __init__(self, clock: Clock, env: EnvBackend, agent: Agent) -> None:
        self.clock = clock
        self.env = env
        self.agent = agent
        self.rows: list[Row] = []
        self._last_frame = 0
        self._last_wall = 0.0

    def add_row(self) -> Row:
        clock = self.clock
        wall_t = clock.wall_t
        elapsed = wall_t - self._last_wall
        fps = (clock.frame - self._last_frame) / elapsed if elapsed > 0 else math.nan
        self._last_frame, self._last_wall = clock.frame, wall_t
        total_reward = self.env.total_reward
        recent = [r["total_reward"] for r in self.rows[-(self.MA_WINDOW - 1) :]] + [total_reward]
        recent = [r for r in recent if not math.isnan(r)]
        row = {
            "frame": clock.frame,
            "t": clock.t,
            "epi": clock.epi,
            "opt_step": clock.opt_step,
            "wall_t": wall_t,
            "fps": fps,
            "total_reward": total_reward,
            "total_reward_ma": sum(recent) / len(recent) if recent else math.nan,
            **self.agent.metrics(),
        }
        self.rows.append(row)
        return row

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [dict(r) for r in self.rows]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The rows so far; the next row's fps counts from here (the frames a stopped session
        ran after its last row took time that the resumed clock does not hold)."""
        self.rows = [dict(r) for r in state["rows"]]
        self._last_frame, self._last_wall = self.clock.frame, self.clock.wall_t


class RowsCsv:
    """A CSV file of rows, kept open while a session appends to them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: Any = None

    def append(self, rows: list[Row]) -> None:
        """Write the last of `rows`; the first call (re)writes the file from all of them (after
        a resume the file may hold rows past the state the session resumed from)."""
        if self.file is None:
            io.write_text(analysis.csv_text(rows), self.path)
            self.file = open(self.path, "a")  # noqa: SIM115  (kept open for the session)
            return
        self.file.write(analysis.csv_text(rows[-1:], header=False))
        self.file.flush()

    def close(self, rows: list[Row]) -> None:
        if self.file is None:  # resumed after the last row: none was appended
            io.write_text(analysis.csv_text(rows), self.path)
        else:
            self.file.close()

    def release(self) -> None:
        """Close the file as it is (a session that failed: its rows so far are written)."""
        if self.file is not None:
            self.file.close()


class Recorder:
    """A session's rows and episodes, to files, TensorBoard and the console."""

    def __init__(
        self, layout: RunLayout, trial: int, session: int, clock: Clock, episodes: bool
    ) -> None:
        """`episodes`: write every finished episode to the episodes CSV (session 0 does)."""
        self.layout, self.trial, self.session, self.clock = layout, trial, session, clock
        self.csv = RowsCsv(layout.rows_csv(trial, session))
        self.eval_csv = RowsCsv(layout.rows_csv(trial, session, evaluation=True))
        self.episodes_path = layout.episodes_csv(trial, session) if episodes else None
        self.episodes_file: Any = None
        self.writer: Any = None  # TensorBoard's SummaryWriter, made at the first row
        # (frame, wall_t) of this process's first row: the ETA's pace is taken from there on, so
        # a resumed run's earlier pace (another day, other work beside it) and the loading and
        # warm-up of a start do not count; the first row itself goes by the whole run's
        self.pace_from: tuple[float, float] | None = None

    def start(self, episodes_bytes: int | None = None) -> None:
        """Open the episodes CSV: a new one (its header), or on resume the one there cut back
        to the `episodes_bytes` it had when the state was saved."""
        if self.episodes_path is None:
            return
        if episodes_bytes is None:
            io.write_text(analysis.EPISODES_HEADER, self.episodes_path)
        else:
            os.truncate(self.episodes_path, episodes_bytes)
        self.episodes_file = open(self.episodes_path, "a")  # noqa: SIM115  (kept open)

    def row(self, row: Row, rows: list[Row]) -> None:
        """A training row: the progress line, TensorBoard and the session CSV (`rows` all of
        them, the new one last)."""
        max_frame, origin = self.clock.max_frame, self.pace_from or (0.0, 0.0)
        if self.pace_from is None:
            self.pace_from = (row["frame"], row["wall_t"])
        line = analysis.progress_line(row, max_frame, origin=origin)
        width = log_setup.console_width()
        fitted = line if width is None else analysis.progress_line(row, max_frame, width, origin)
        logger.bind(console=fitted).info(line)
        writer = self.tb_writer()
        for k, v in row.items():
            if isinstance(v, int | float) and not math.isnan(v):
                writer.add_scalar(k, v, row["frame"])
        self.csv.append(rows)

    def eval_row(self, row: Row, rows: list[Row], episodes: int) -> None:
        logger.info(
            f"eval | frame:{row['frame']:,} | episodes:{episodes}"
            f" | total_reward:{row['total_reward']:.2f} | total_reward_ma:{row['total_reward_ma']:.2f}"
        )
        writer = self.tb_writer()
        for k in ("total_reward", "total_reward_ma"):
            writer.add_scalar(f"eval/{k}", row[k], row["frame"])
        self.eval_csv.append(rows)

    def episodes(self, finished: list[FinishedEpisodes]) -> None:
        """Append finished episodes (nothing when this session writes none)."""
        if self.episodes_file is not None and finished:
            self.episodes_file.write(analysis.episodes_csv_text(finished))
            self.episodes_file.flush()

    @property
    def episodes_bytes(self) -> int | None:
        """The episodes CSV's size now (what a saved state records), None without one."""
        return None if self.episodes_file is None else self.episodes_file.tell()

    def tb_writer(self) -> Any:
        if self.writer is None:
            # tensorboard loads at the first row, so the env starts stepping sooner
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.layout.tb_dir(self.trial, self.session)))
        return self.writer

    def analyze(self, rows: list[Row], baseline: float, suffix: str = "") -> dict[str, float]:
        """The session metrics and graph of `rows` (training's, or with EVAL_SUFFIX the
        evaluation's), written; returns the metrics."""
        return analysis.write_session_metrics(
            analysis.rows_table(rows), baseline, self.layout, self.trial, self.session, suffix
        )

    def close(self, rows: list[Row], eval_rows: list[Row] | None) -> None:
        if self.writer is not None:
            self.writer.close()
        self.csv.close(rows)
        if eval_rows is not None:
            self.eval_csv.close(eval_rows)
        if self.episodes_file is not None:
            self.episodes_file.close()

    def release(self) -> None:
        """Close the open files as they are, writing nothing more (a session that failed)."""
        if self.writer is not None:
            self.writer.close()
        self.csv.release()
        self.eval_csv.release()
        if self.episodes_file is not None:
            self.episodes_file.close()
