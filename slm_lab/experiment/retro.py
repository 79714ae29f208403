"""Retro analysis (`slm-lab retro RUN_DIR`): a run folder's metrics and graphs recomputed from
the CSVs it wrote, torch-free.

A run folder (train, dev, a search's trial, one pulled from the Hub) gets, for each session with
rows in `info/`, its session metrics and graph (and its evaluations' where it has an eval CSV),
then its trial's metrics and graphs over those sessions, as the run writes them at its end. A
search folder gets each trial folder's, then the metric columns of its experiment table (an
errored trial keeps none) and the experiment graph.

Rows written by an older version may lack columns: `total_reward_ma` is recomputed from
`total_reward` (the mean of the last MA_WINDOW rows' values, as a run computes it); without
`opt_step`, `training_efficiency` is NaN; a session without `frame` or `total_reward` is left
out. Each of these gets one line (`Retro.notes`). Metrics an older version did not compute (the
interquartile means and confidence intervals) are computed and written like the others; an
older experiment table gains their columns.
"""

import csv
import io as text_io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab.env.config import EnvConfig
from slm_lab.experiment import analysis
from slm_lab.experiment.analysis import MA_WINDOW, TRIAL_METRICS
from slm_lab.experiment.layout import (
    EVAL_SUFFIX,
    SPEC_SUFFIX,
    RunLayout,
    is_run_dir,
    is_search_dir,
    prefix,
    run_spec_path,
)
from slm_lab.lib import io
from slm_lab.lib.config import SpecError, parse
from slm_lab.spec import schema

REQUIRED = ("frame", "total_reward")  # the columns without which a session has no metrics
ERRORED = "errored"  # the status of a search trial that has no metrics (search.ERRORED)


@dataclass(frozen=True)
class TrialResult:
    """A trial's recomputed metrics (`eval_metrics` None without evaluations)."""

    layout: RunLayout
    trial: int
    metrics: dict[str, float]
    eval_metrics: dict[str, float] | None


@dataclass
class Retro:
    """One retro analysis; `notes` says what could not be computed as the run did, and where."""

    # what could not be computed as the run did -> the sessions (or trial folders) concerned
    missing: dict[str, list[str]] = field(default_factory=dict)

    def note(self, what: str, where: str) -> None:
        self.missing.setdefault(what, []).append(where)

    @property
    def notes(self) -> list[str]:
        return [f"{what}: {', '.join(where)}" for what, where in self.missing.items()]

    # -- a run folder ------------------------------------------------------------------------
    def run_folder(self, root: Path) -> list[TrialResult]:
        """Every trial of the run folder `root` with session rows (a run has trial 0, a
        search's trial folder its own index)."""
        layout = RunLayout(root, run_name(root))
        sessions = sessions_of(layout)
        if not sessions:
            raise SpecError(
                f"{root}: no session rows (info/{layout.name}_t<i>_s<j>_session_df.csv) to analyze"
            )
        return [
            result
            for trial in sorted(sessions)
            if (result := self.trial(layout, trial, sessions[trial])) is not None
        ]

    def trial(self, layout: RunLayout, trial: int, sessions: list[int]) -> TrialResult | None:
        baseline = analysis.baseline_of(env_of(layout, trial))
        metrics = self.metrics(layout, trial, sessions, baseline, "")
        if metrics is None:
            return None
        evaluated = [s for s in sessions if layout.rows_csv(trial, s, evaluation=True).exists()]
        eval_metrics = (
            self.metrics(layout, trial, evaluated, baseline, EVAL_SUFFIX) if evaluated else None
        )
        return TrialResult(layout, trial, metrics, eval_metrics)

    def metrics(
        self, layout: RunLayout, trial: int, sessions: list[int], baseline: float, suffix: str
    ) -> dict[str, float] | None:
        """The sessions' metrics and graphs, then the trial's over those that have rows to
        analyze; None when none has."""
        tables = []
        for s in sessions:
            path = layout.rows_csv(trial, s, evaluation=suffix == EVAL_SUFFIX)
            table = self.complete(analysis.read_csv(path), prefix(layout.name, trial, s) + suffix)
            if table is not None:
                analysis.write_session_metrics(table, baseline, layout, trial, s, suffix)
                tables.append(table)
        if not tables:
            return None
        return analysis.write_trial_tables(tables, baseline, layout, trial, suffix)

    def complete(self, table: dict[str, np.ndarray], session: str) -> dict[str, np.ndarray] | None:
        """The rows with what an older version did not write recomputed where it can be; None
        when they lack a column the metrics need."""
        if lacking := [c for c in REQUIRED if c not in table]:
            self.note(f"no {' or '.join(lacking)} column: left out", session)
            return None
        if "total_reward_ma" not in table:
            table = {**table, "total_reward_ma": moving_mean(table["total_reward"])}
            self.note("no total_reward_ma column: recomputed from total_reward", session)
        if "opt_step" not in table:
            self.note("no opt_step column: training_efficiency cannot be computed (NaN)", session)
        return table

    # -- a search folder ---------------------------------------------------------------------
    def search_folder(self, root: Path) -> list[TrialResult]:
        """Each trial folder's metrics, then the experiment table's metric columns and graph."""
        name = run_name(root)
        folder = re.compile(re.escape(name) + r"_t\d+")
        results = []
        for path in sorted(root.iterdir(), key=lambda p: trial_index(p.name)):
            if not (folder.fullmatch(path.name) and is_run_dir(path)):
                continue
            if sessions_of(RunLayout(path, name)):
                results += self.run_folder(path)
            else:  # a trial that errored before its first row
                self.note("no session rows: nothing to analyze", path.name)
        layout = RunLayout(root, name)
        for path in (layout.experiment_df, layout.partial_experiment_df):
            if path.exists():
                trials = update_table(path, {r.trial: r.metrics for r in results})
                if path == layout.experiment_df and trials:
                    plot_table(trials, layout.experiment_graph)
        return results


def sessions_of(layout: RunLayout) -> dict[int, list[int]]:
    """trial -> the sessions that have rows in the run folder's info/, in order."""
    pattern = re.compile(re.escape(layout.name) + r"_t(\d+)_s(\d+)_session_df\.csv")
    sessions: dict[int, list[int]] = {}
    for path in layout.info.iterdir():
        if match := pattern.fullmatch(path.name):
            sessions.setdefault(int(match[1]), []).append(int(match[2]))
    return {trial: sorted(found) for trial, found in sessions.items()}


def run_name(root: Path) -> str:
    """The spec name of a run (or search) folder, from its spec record's file name."""
    return run_spec_path(root).name.removesuffix(SPEC_SUFFIX)


def trial_index(dirname: str) -> int:
    """i of a trial folder <name>_t<i> (-1 for another name: sorted first, then skipped)."""
    match = re.search(r"_t(\d+)$", dirname)
    return int(match[1]) if match else -1


def env_of(layout: RunLayout, trial: int) -> EnvConfig:
    """The env section the trial ran (its own spec, else the run's record), which the random
    baseline depends on; only this section is read, so an older spec does not have to
    validate as a whole."""
    path = layout.trial_spec(trial)
    if not path.exists():
        path = layout.spec_record
    with schema.quiet():
        try:
            return parse(EnvConfig, io.read_json(path).get("env"), "env")
        except SpecError as e:
            raise SpecError(f"{path}: {e}") from None


def moving_mean(values: np.ndarray, window: int = MA_WINDOW) -> np.ndarray:
    """total_reward_ma as a run computes it: at each row, the mean of the values of the last
    `window` rows that have one (NaN where none has)."""
    out = np.full(len(values), math.nan)
    for i in range(len(values)):
        recent = [v for v in values[max(0, i - window + 1) : i + 1].tolist() if not math.isnan(v)]
        if recent:
            out[i] = sum(recent) / len(recent)
    return out


def update_table(path: Path, metrics: dict[int, dict[str, float]]) -> list[dict[str, Any]]:
    """Set the trial metric columns of an experiment table from `metrics` (trial index -> its
    metrics; an errored trial keeps its empty cells), adding at its end those an older table
    lacks; returns its rows, values decoded."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = list(reader.fieldnames or []), list(reader)
    columns += [k for k in TRIAL_METRICS if k not in columns]
    for row in rows:
        found = metrics.get(int(row["trial"]))
        if found is not None and not row["status"].startswith(ERRORED):
            row.update({k: metric_cell(found[k]) for k in TRIAL_METRICS})
    out = text_io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    io.write_text(out.getvalue(), path)
    return [decode_row(row) for row in rows]


def metric_cell(value: float) -> str:
    """A metric as the experiment table writes it: in full, NaN empty."""
    return "" if math.isnan(value) else repr(float(value))


def decode_row(row: dict[str, str]) -> dict[str, Any]:
    """An experiment table's row: metrics as floats (NaN for empty), searched values as the
    spec writes them (JSON)."""
    out: dict[str, Any] = {"trial": int(row["trial"]), "status": row["status"]}
    for k, v in row.items():
        if k in TRIAL_METRICS:
            out[k] = float(v) if v else math.nan
        elif k not in out:
            out[k] = json.loads(v)
    return out


def plot_table(trials: list[dict[str, Any]], path: Path) -> None:
    """The experiment graph of the table's rows (search.finish draws the same)."""
    variables = [k for k in trials[0] if k not in ("trial", "status", *TRIAL_METRICS)]
    plotted = [t for t in trials if not math.isnan(t["total_reward_ma"])]
    analysis.plot_experiment(plotted, variables, "status", path)


def run(root: Path) -> tuple[list[TrialResult], list[str]]:
    """Recompute the metrics and graphs of the run or search folder `root`; returns the trials'
    metrics and the notes on what could not be computed as the run did."""
    retro = Retro()
    if is_search_dir(root):
        results = retro.search_folder(root)
    elif is_run_dir(root):
        results = retro.run_folder(root)
    else:
        raise SpecError(
            f"{root}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/) nor a search folder"
        )
    return results, retro.notes
