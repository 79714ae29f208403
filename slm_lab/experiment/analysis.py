"""Session and trial metrics and graphs, computed as SLM Lab v5 computes them.

A session's rows are a table: column name -> array (`rows_table`, `read_csv`), so the metrics
need numpy only; matplotlib is imported by the graphs, at the end of a run.

With R_i the total_reward at checkpoint i = 0..N-1 (checkpoints before the first finished
episode have none and are left out) and B the random policy's mean return:
  s_i = R_i - B; strength = mean(s_i); max_strength = max(s_i); final_strength = s_{N-1}
  sample_efficiency = sum_i(s_i / frame_i) / sum_i(s_i)
  training_efficiency = sum_i(s_i / opt_step_i) / sum_i(s_i)
    (terms with opt_step_i = 0 leave the numerator only: 0 for a session that never trained)
  stability = 1 - | sum_{i=0}^{N-2} min(s_{i+1} - s_i, 0) / sum_{i=0}^{N-2} s_i |
    (the denominator leaves out the last checkpoint; NaN for one checkpoint)
  total_reward_ma = the last checkpoint's mean of total_reward over the last 100 checkpoints
A ratio whose denominator is 0 is NaN.
Trial: each session metric is its mean over the sessions that have it (a session's NaN is
skipped); frame is the first session's last frame (every session of a trial checkpoints at the
same frames); and, over the checkpoints all sessions have, with s_ij session j's strength
  consistency = 1 - 2 * sum_i std_j(s_ij) / sum_i mean_j(s_ij)
the std the sample std, both skipping a session without a return yet at checkpoint i (a
checkpoint with one return adds its mean and no std); NaN for one session.
"""

import csv
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab.lib import io

Table = Mapping[str, Any]  # column name -> array-like (a dict of numpy arrays, or a DataFrame)

SESSION_METRICS = (
    "strength",
    "max_strength",
    "final_strength",
    "sample_efficiency",
    "training_efficiency",
    "stability",
)
TRIAL_METRICS = ("frame", "total_reward_ma", *SESSION_METRICS, "consistency")
GRAPH_COLUMNS = ("loss", "entropy", "explore_var", "lr")  # the session graph's panels under returns


# -- tables ----------------------------------------------------------------------------------
def rows_table(rows: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
    """Checkpoint rows (dicts) as columns; a value a row lacks is NaN."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return {c: np.array([row.get(c, math.nan) for row in rows], dtype=float) for c in columns}


def csv_text(rows: Sequence[Mapping[str, float]], header: bool = True) -> str:
    """Rows as CSV; NaN (a value not there yet: no finished episode, no training) is empty."""
    columns = list(rows[0]) if rows else []
    lines = [",".join(columns)] if header else []
    lines += [",".join(_csv_value(row.get(c, math.nan)) for c in columns) for row in rows]
    return "".join(line + "\n" for line in lines)


def _csv_value(v: float) -> str:
    return (
        ""
        if isinstance(v, float) and math.isnan(v)
        else repr(v)
        if isinstance(v, float)
        else str(v)
    )


def read_csv(path: Path) -> dict[str, np.ndarray]:
    """A session_df CSV as columns of floats (an empty cell is NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        c: np.array([float(r[c]) if r[c] != "" else math.nan for r in rows], dtype=float)
        for c in (rows[0] if rows else {})
    }


def column(table: Table, name: str) -> np.ndarray:
    return np.asarray(table[name], dtype=float)


# -- metrics ---------------------------------------------------------------------------------
def _ratio(num: float, den: float) -> float:
    return float(num / den) if den != 0 else math.nan


def _efficiency(s: np.ndarray, x: np.ndarray) -> float:
    """sum_i(s_i / x_i) / sum_i(s_i), the terms with x_i = 0 (infinite) dropped from the first sum."""
    keep = x > 0
    return _ratio((s[keep] / x[keep]).sum(), s.sum())


def session_metrics(table: Table, baseline: float) -> dict[str, float]:
    frames = column(table, "frame")
    returns = column(table, "total_reward")
    has = ~np.isnan(returns)
    if not has.any():
        return {
            "frame": float(frames[-1]),
            "total_reward_ma": math.nan,
            **dict.fromkeys(SESSION_METRICS, math.nan),
        }
    s = returns[has] - baseline
    drops = np.minimum(np.diff(s), 0).sum()
    return {
        "frame": float(frames[-1]),
        "total_reward_ma": float(column(table, "total_reward_ma")[has][-1]),
        "strength": float(s.mean()),
        "max_strength": float(s.max()),
        "final_strength": float(s[-1]),
        "sample_efficiency": _efficiency(s, frames[has]),
        "training_efficiency": _efficiency(s, column(table, "opt_step")[has]),
        "stability": 1 - abs(_ratio(drops, s[:-1].sum())),
    }


def aligned(tables: Sequence[Table], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(frames every session has, [frame, session] values of column `name` at those frames)."""
    frames = [column(t, "frame") for t in tables]
    common = frames[0]
    for f in frames[1:]:
        common = common[np.isin(common, f)]
    values = np.stack(
        [column(t, name)[np.searchsorted(f, common)] for t, f in zip(tables, frames, strict=True)],
        axis=1,
    )
    return common, values


def _nan_stats(values: np.ndarray, ddof: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: mean and std over the values that are not NaN (NaN where there are too few)."""
    with warnings.catch_warnings():  # all-NaN rows and rows of one value give NaN, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=1), np.nanstd(values, axis=1, ddof=ddof)


def consistency(tables: Sequence[Table], baseline: float) -> float:
    if len(tables) < 2:
        return math.nan
    _, returns = aligned(tables, "total_reward")
    # a session without a return yet is left out of that checkpoint's terms
    mean, std = _nan_stats(returns - baseline, ddof=1)
    return 1 - 2 * _ratio(np.nansum(std), np.nansum(mean))


def trial_metrics(tables: Sequence[Table], baseline: float) -> dict[str, float]:
    per_session = [session_metrics(t, baseline) for t in tables]
    means, _ = _nan_stats(
        np.array([[m[k] for m in per_session] for k in ("total_reward_ma", *SESSION_METRICS)]),
        ddof=0,
    )  # a session's NaN is skipped
    return {
        "frame": per_session[0]["frame"],
        **{k: float(v) for k, v in zip(("total_reward_ma", *SESSION_METRICS), means, strict=True)},
        "consistency": consistency(tables, baseline),
    }


def format_metrics(metrics: dict[str, float]) -> str:
    parts = []
    for k, v in metrics.items():
        parts.append(
            f"{k}:{v:.2e}"
            if k == "frame"
            else f"{k}:{v:.2f}"
            if abs(v) >= 0.01 or v == 0 or math.isnan(v)
            else f"{k}:{v:.2e}"
        )
    return " | ".join(parts)


# -- graphs ----------------------------------------------------------------------------------
def _figure(rows: int, height: float, sharex: bool = True) -> Any:
    """A headless figure (no pyplot, no display): matplotlib loads here, when a run ends."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, height))
    return fig, np.atleast_1d(fig.subplots(rows, 1, sharex=sharex))


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    io.atomic_write(path, lambda f: fig.savefig(f, format="png"))


def plot_session(table: Table, title: str, path: Path) -> None:
    cols = [c for c in GRAPH_COLUMNS if c in table and not np.isnan(column(table, c)).all()]
    fig, axes = _figure(1 + len(cols), 3 * (1 + len(cols)))
    frames = column(table, "frame")
    axes[0].plot(frames, column(table, "total_reward"), label="total_reward", alpha=0.5)
    axes[0].plot(frames, column(table, "total_reward_ma"), label="total_reward_ma")
    axes[0].legend()
    axes[0].set_title(title)
    for ax, c in zip(axes[1:], cols, strict=True):
        ax.plot(frames, column(table, c))
        ax.set_ylabel(c)
    axes[-1].set_xlabel("frame")
    _save(fig, path)


def plot_trial(tables: Sequence[Table], title: str, path: Path) -> None:
    fig, axes = _figure(2, 7)
    for ax, col in zip(axes, ("total_reward", "total_reward_ma"), strict=True):
        frames, values = aligned(tables, col)
        mean, std = _nan_stats(values, ddof=0)
        ax.plot(frames, mean, label=f"mean of {len(tables)} sessions")
        ax.fill_between(frames, mean - std, mean + std, alpha=0.25)
        ax.set_ylabel(col)
        ax.legend()
    axes[0].set_title(title)
    axes[-1].set_xlabel("frame")
    _save(fig, path)


def plot_experiment(
    trials: Sequence[Mapping[str, Any]], variables: Sequence[str], status_key: str, path: Path
) -> None:
    """A search's graph: one panel per searched variable, total_reward_ma of each trial against
    the variable's value, trials coloured by their status's first word (completed, stopped,
    errored: an errored trial has no metric to place). A variable whose values are not all
    numbers (a choice of lists, names, null) gets one tick per distinct value."""
    fig, axes = _figure(len(variables), 3 * len(variables), sharex=False)
    statuses = sorted({str(t[status_key]).split()[0] for t in trials})
    for ax, var in zip(axes, variables, strict=True):
        values = [t[var] for t in trials]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        labels = [] if numeric else list(dict.fromkeys(json_label(v) for v in values))
        for status in statuses:
            mine = [t for t in trials if str(t[status_key]).split()[0] == status]
            xs = [t[var] if numeric else labels.index(json_label(t[var])) for t in mine]
            ax.scatter(xs, [t["total_reward_ma"] for t in mine], label=status, alpha=0.8)
        if not numeric:
            ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel(var)
        ax.set_ylabel("total_reward_ma")
        ax.legend()
    _save(fig, path)


def json_label(value: Any) -> str:
    """A searched value as a spec writes it ([64, 64], null, "tanh")."""
    return json.dumps(value)
