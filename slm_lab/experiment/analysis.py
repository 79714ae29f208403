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
How sure a trial's number is, for total_reward_ma and strength over its sessions' values x_j:
  <metric>_iqm = the interquartile mean: the mean of the x_j left when the floor(n/4) lowest
    and the floor(n/4) highest are dropped (rliable's IQM, scipy's trim_mean at 0.25)
  <metric>_ci_low, <metric>_ci_high = the 95% percentile bootstrap confidence interval of the
    mean of the x_j: BOOTSTRAP_RESAMPLES resamples of the sessions with replacement, drawn by a
    generator seeded with BOOTSTRAP_SEED (the same interval every time the metrics are computed);
    NaN for one session (nothing to resample)
Several runs of one spec (a benchmark cell) are resampled stratified by run, as rliable
stratifies by task: each resample draws each run's own number of sessions from that run.
"""

import csv
import json
import math
import shutil
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slm_lab.experiment.layout import EVAL_SUFFIX, RunLayout, prefix
from slm_lab.lib import io
from slm_lab.lib.logger import logger
from slm_lab.lib.util import counted
from slm_lab.spec import random_baseline

if TYPE_CHECKING:
    from slm_lab.env.backend import FinishedEpisodes
    from slm_lab.env.config import EnvConfig
    from slm_lab.spec.schema import Spec

Table = Mapping[str, Any]  # column name -> array-like (a dict of numpy arrays, or a DataFrame)

SESSION_METRICS = (
    "strength",
    "max_strength",
    "final_strength",
    "sample_efficiency",
    "training_efficiency",
    "stability",
)
# the trial metrics that get an interquartile mean and a confidence interval over the sessions
SPREAD_METRICS = ("total_reward_ma", "strength")
IQM_SUFFIX, CI_LOW_SUFFIX, CI_HIGH_SUFFIX = "_iqm", "_ci_low", "_ci_high"
TRIAL_METRICS = (
    "frame",
    "total_reward_ma",
    *SESSION_METRICS,
    "consistency",
    *(m + suffix for m in SPREAD_METRICS for suffix in (IQM_SUFFIX, CI_LOW_SUFFIX, CI_HIGH_SUFFIX)),
)
IQM_CUT = 0.25  # the share of the lowest and of the highest values the interquartile mean drops
CONFIDENCE = 0.95  # of the bootstrap confidence intervals
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20_250_601  # fixed: a confidence interval is the same every time it is computed
MA_WINDOW = 100  # total_reward_ma: mean of total_reward over this many checkpoint rows
COUNTER_COLUMNS = ("frame", "t", "epi", "opt_step")  # a row's integer counts
RETURN_COLUMNS = ("total_reward", "total_reward_ma")
CLOCK_COLUMNS = (*COUNTER_COLUMNS, "wall_t", "fps")  # not graphed over frames
# the columns a progress line too narrow for all keeps first; then the algorithm's, then the clock
PROGRESS_FIRST = ("frame", "total_reward_ma", "total_reward", "loss", "fps")
PROGRESS_SEP = " | "
LOG_SCALE_DECADES = 2  # a loss whose sizes span this many decades or more is graphed on a log scale
SMALL_SIZES = 0.1  # the share of a loss's smallest sizes that does not decide its span
ONE_COLUMN_PANELS = 4  # more panels than this under the returns go into two columns
PANEL_WIDTH, PANEL_HEIGHT = 8.0, 2.5  # inches
# a session's or trial's graph has fixed margins (inches): left for a panel's y label and tick
# labels of up to 8 characters (-150000, 0.00025), between panels for the x tick labels above
# and the y labels beside. matplotlib's tight_layout would measure every label first, a third
# of the time of drawing a session's graph
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 1.05, 0.2, 0.35, 0.55
GAP_BETWEEN_ROWS, GAP_BETWEEN_COLUMNS = 0.45, 1.15
# a line of one point draws nothing: a series with this many points or fewer marks each one, a
# longer one marks only its points without a neighbour (a lone value among NaN)
FEW_POINTS = 30
MARKER, MARKER_SIZE = "o", 4.0
# a value of another column (a loss, lr, entropy, ...) prints as .3g within [min, max), else .2e
PLAIN_RANGE = (1e-3, 1e3)


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


EPISODES_HEADER = "frame,episode,return,length\n"


def episodes_csv_text(episodes: Sequence["FinishedEpisodes"]) -> str:
    """Rows of the episodes CSV (after EPISODES_HEADER): one per episode, oldest first."""
    return "".join(
        f"{e.frame},{e.first_index + i},{r!r},{n}\n"
        for e in episodes
        for i, (r, n) in enumerate(zip(e.returns.tolist(), e.lengths.tolist(), strict=True))
    )


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
        # NaN for rows without opt_step (a run folder of an older version)
        "training_efficiency": _efficiency(s, column(table, "opt_step")[has])
        if "opt_step" in table
        else math.nan,
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


def trial_frame_scale(tables: Sequence[Table]) -> int:
    """What a trial's session frames are multiplied by to count the trial's frames: the workers
    of a Hogwild trial (its rows have `global_frame`) each run their share of the trial's
    frames, so a worker's frame f is the trial's frame f x workers when they keep pace; 1 for
    the sessions of any other trial, which each run all of them."""
    return len(tables) if any("global_frame" in t for t in tables) else 1


def nan_stats(values: np.ndarray, ddof: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: mean and std over the values that are not NaN (NaN where there are too few)."""
    with warnings.catch_warnings():  # all-NaN rows and rows of one value give NaN, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=1), np.nanstd(values, axis=1, ddof=ddof)


def consistency(tables: Sequence[Table], baseline: float) -> float:
    if len(tables) < 2:
        return math.nan
    _, returns = aligned(tables, "total_reward")
    # a session without a return yet is left out of that checkpoint's terms
    mean, std = nan_stats(returns - baseline, ddof=1)
    return 1 - 2 * _ratio(np.nansum(std), np.nansum(mean))


def iqm(values: np.ndarray) -> float:
    """The interquartile mean of the values that are not NaN: their mean once the floor(n/4)
    lowest and the floor(n/4) highest are dropped (NaN if none)."""
    values = np.sort(values[~np.isnan(values)])
    if values.size == 0:
        return math.nan
    cut = int(IQM_CUT * values.size)
    return float(values[cut : values.size - cut].mean())


def bootstrap_mean_ci(
    strata: Sequence[np.ndarray],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap confidence interval of the mean of the values in `strata`
    (arrays of [value] or [value, point]: runs, each of its sessions), stratified: a resample
    draws from each stratum, with replacement, as many values as it has. A NaN (a session
    without a value at a point) is left out of that point's means. (low, high), of the shape of
    a point; NaN where no stratum has two values (a resample could not vary)."""
    rng = np.random.default_rng(seed)
    point = strata[0].shape[1:]
    sums = np.zeros((resamples, *point))
    counts = np.zeros((resamples, *point))
    varies = np.zeros(point, dtype=bool)
    for values in strata:
        known = ~np.isnan(values)
        varies |= known.sum(axis=0) > 1
        n = len(values)
        # how often each value is drawn, per resample: the same draws at every point
        draws = rng.integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
        times = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
        sums += np.tensordot(times, np.where(known, values, 0.0), axes=1)
        counts += np.tensordot(times, known.astype(float), axes=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts  # a resample that drew no value at a point: NaN, left out
    tail = 100 * (1 - confidence) / 2
    with warnings.catch_warnings():  # a point with no value at all gives NaN, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(means, [tail, 100 - tail], axis=0)
    return np.where(varies, low, math.nan), np.where(varies, high, math.nan)


def spread_metrics(name: str, strata: Sequence[np.ndarray]) -> dict[str, float]:
    """`name`'s interquartile mean and the confidence interval of its mean over the sessions'
    values of `strata` (one array of session values per run)."""
    low, high = bootstrap_mean_ci(strata)
    return {
        name + IQM_SUFFIX: iqm(np.concatenate(strata)),
        name + CI_LOW_SUFFIX: float(low),
        name + CI_HIGH_SUFFIX: float(high),
    }


def trial_metrics(tables: Sequence[Table], baseline: float) -> dict[str, float]:
    per_session = [session_metrics(t, baseline) for t in tables]
    values = {
        k: np.array([m[k] for m in per_session]) for k in ("total_reward_ma", *SESSION_METRICS)
    }
    means, _ = nan_stats(np.array(list(values.values())), ddof=0)  # a session's NaN is skipped
    metrics = {
        "frame": per_session[0]["frame"],
        **{k: float(v) for k, v in zip(values, means, strict=True)},
        "consistency": consistency(tables, baseline),
    }
    for name in SPREAD_METRICS:
        metrics |= spread_metrics(name, [values[name]])
    return metrics


def baseline_of(env: "EnvConfig") -> float:
    """The random policy's mean return on the env as the spec sets it up."""
    return random_baseline.get(env.name, env.kwargs, env.max_t, env.action_repeat)


def write_trial(
    spec: "Spec", layout: RunLayout, trial: int, sessions: Sequence[int]
) -> tuple[dict[str, float], dict[str, float] | None]:
    """The trial metrics (and graph) of the sessions' training rows, and with evaluations
    (meta.eval_every) those of their evaluation rows too (None without)."""
    eval_metrics = None
    if spec.meta.eval_every is not None:
        eval_metrics = write_trial_metrics(spec, layout, trial, sessions, evaluation=True)
        logger.info(
            f"{prefix(spec.name, trial)} trial_metrics{EVAL_SUFFIX}: {format_metrics(eval_metrics)}"
        )
    return write_trial_metrics(spec, layout, trial, sessions), eval_metrics


def write_session_metrics(
    table: Table, baseline: float, layout: RunLayout, trial: int, session: int, suffix: str = ""
) -> dict[str, float]:
    """A session's metrics and graph of its rows (training's, or with EVAL_SUFFIX the
    evaluations'), in info/ and graph/; returns the metrics."""
    metrics = session_metrics(table, baseline)
    io.write_json(metrics, layout.session_metrics(trial, session, suffix))
    title = prefix(layout.name, trial, session) + suffix
    plot_session(table, title, layout.session_graph(trial, session, suffix))
    return metrics


def write_trial_metrics(
    spec: "Spec",
    layout: RunLayout,
    trial: int,
    sessions: Sequence[int],
    evaluation: bool = False,
) -> dict[str, float]:
    """Trial metrics and graph over the sessions' row CSVs (training's, or the evaluations'),
    in info/ and graph/ and copied to the run folder."""
    suffix = EVAL_SUFFIX if evaluation else ""
    tables = [read_csv(layout.rows_csv(trial, s, evaluation)) for s in sessions]
    return write_trial_tables(tables, baseline_of(spec.env), layout, trial, suffix)


def write_trial_tables(
    tables: Sequence[Table], baseline: float, layout: RunLayout, trial: int, suffix: str = ""
) -> dict[str, float]:
    """Trial metrics and graph of the sessions' rows, in info/ and graph/ and copied to the
    run folder; returns the metrics."""
    metrics = trial_metrics(tables, baseline)
    metrics_path = layout.trial_metrics(trial, suffix)
    io.write_json(metrics, metrics_path)
    graph_path = layout.trial_graph(trial, suffix)
    plot_trial(tables, prefix(layout.name, trial) + suffix, graph_path)
    shutil.copy(metrics_path, layout.root / metrics_path.name)
    shutil.copy(graph_path, layout.root / graph_path.name)
    return metrics


def format_metrics(metrics: dict[str, float]) -> str:
    """`k:v | ...`; a confidence interval's two bounds as one item, `<metric>_ci:[low, high]`
    (`<metric>_ci:nan` without one)."""
    parts = []
    for k, v in metrics.items():
        if k.endswith(CI_HIGH_SUFFIX) and k.removesuffix(CI_HIGH_SUFFIX) + CI_LOW_SUFFIX in metrics:
            continue
        if k.endswith(CI_LOW_SUFFIX):
            name = k.removesuffix(CI_LOW_SUFFIX)
            high = metrics.get(name + CI_HIGH_SUFFIX, math.nan)
            bounds = "nan" if math.isnan(v) else f"[{format_number(v)}, {format_number(high)}]"
            parts.append(f"{name}_ci:{bounds}")
        else:
            parts.append(f"{k}:{v:.2e}" if k == "frame" else f"{k}:{format_number(v)}")
    return " | ".join(parts)


def format_number(v: float) -> str:
    """A metric in the trial_metrics line: 2 decimals, or 3 significant digits when that
    would show less than 0.01."""
    return f"{v:.2f}" if abs(v) >= 0.01 or v == 0 or math.isnan(v) else f"{v:.2e}"


def format_duration(seconds: float) -> str:
    """`45s`, `1m05s`, `2h03m`."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def format_value(column: str, v: float) -> str:
    """A row value as the progress line prints it, by the kind of column."""
    if column in COUNTER_COLUMNS:
        return f"{int(v):,}"
    if column == "fps":
        return f"{v:,.0f}"
    if column == "wall_t":
        return format_duration(v)
    if column in RETURN_COLUMNS:
        return f"{v:.2f}"
    lo, hi = PLAIN_RANGE
    return f"{v:.3g}" if v == 0 or lo <= abs(v) < hi else f"{v:.2e}"


def progress_line(
    row: Mapping[str, float],
    max_frame: int,
    width: int | None = None,
    origin: tuple[float, float] = (0.0, 0.0),
) -> str:
    """A checkpoint row as one log line, `12% eta 1m05s | frame:12,000 | ...`: every column
    but those without a value (NaN); the ETA is at the frames per second since `origin`, a
    (frame, wall_t) the run passed. Within
    `width` characters, the columns that fit, taken by `progress_priority` until one does not,
    in the row's order."""
    frame, wall_t = row["frame"], row["wall_t"]
    frame0, wall0 = origin
    eta = (wall_t - wall0) * (max_frame - frame) / (frame - frame0)
    head = f"{100 * int(frame) // max_frame}% eta {format_duration(eta)}"
    items = {k: f"{k}:{format_value(k, v)}" for k, v in row.items() if not math.isnan(v)}
    if width is not None:
        kept, length = set(), len(head)
        for k in progress_priority(list(items)):
            length += len(PROGRESS_SEP) + len(items[k])
            if length > width:
                break
            kept.add(k)
        items = {k: item for k, item in items.items() if k in kept}
    return PROGRESS_SEP.join([head, *items.values()])


def progress_priority(columns: list[str]) -> list[str]:
    """`columns` in the order a narrow progress line keeps them: PROGRESS_FIRST, the algorithm's
    (in the row's order), then the other clock columns."""
    first = [c for c in PROGRESS_FIRST if c in columns]
    rest = [c for c in columns if c not in first]
    return (
        first
        + [c for c in rest if c not in CLOCK_COLUMNS]
        + [c for c in rest if c in CLOCK_COLUMNS]
    )


# -- graphs ----------------------------------------------------------------------------------
def _figure(width: float, height: float) -> Any:
    """A headless figure (no pyplot, no display): matplotlib loads here, when a run ends."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _save(fig: Any, path: Path) -> None:
    """Write `fig` as a PNG at `path`, laid out by matplotlib's tight_layout."""
    fig.tight_layout()
    _write_png(fig, path)


def _save_panels(fig: Any, path: Path) -> None:
    """Write `fig`, a grid of panels, as a PNG at `path`, with the fixed margins (MARGIN_*,
    GAP_*) in inches, whatever the figure's size."""
    rows, cols = fig.axes[0].get_subplotspec().get_gridspec().get_geometry()
    width, height = fig.get_size_inches()
    inner_w = width - MARGIN_LEFT - MARGIN_RIGHT
    inner_h = height - MARGIN_TOP - MARGIN_BOTTOM
    panel_w = (inner_w - (cols - 1) * GAP_BETWEEN_COLUMNS) / cols
    panel_h = (inner_h - (rows - 1) * GAP_BETWEEN_ROWS) / rows
    fig.subplots_adjust(
        left=MARGIN_LEFT / width,
        right=1 - MARGIN_RIGHT / width,
        top=1 - MARGIN_TOP / height,
        bottom=MARGIN_BOTTOM / height,
        wspace=GAP_BETWEEN_COLUMNS / panel_w,
        hspace=GAP_BETWEEN_ROWS / panel_h,
    )
    _write_png(fig, path)


def _write_png(fig: Any, path: Path) -> None:
    io.atomic_write(path, lambda f: fig.savefig(f, format="png"))


def point_markers(values: np.ndarray) -> dict[str, Any]:
    """The `plot` keywords that mark a series' points where a line alone would not show them:
    every point of a short series (one point: a line of none), else each point whose neighbours
    are NaN. None where every point sits on a line (a long series)."""
    known = ~np.isnan(np.asarray(values, dtype=float))
    if known.sum() <= FEW_POINTS:
        marked = known
    else:
        before = np.concatenate([[False], known[:-1]])
        after = np.concatenate([known[1:], [False]])
        marked = known & ~before & ~after
    if not marked.any():
        return {}
    return {"marker": MARKER, "markersize": MARKER_SIZE, "markevery": marked.tolist()}


def small_size(values: np.ndarray) -> float:
    """The size |v| the lowest SMALL_SIZES of the nonzero values' sizes are under (NaN if
    none): the bottom of a loss's range, which a few values near zero (a loss crossing zero)
    do not pull down."""
    sizes = np.abs(values[(values != 0) & ~np.isnan(values)])
    return float(np.quantile(sizes, SMALL_SIZES, method="lower")) if sizes.size else math.nan


def loss_scale(values: np.ndarray) -> str:
    """The y scale of a loss panel: `log` when the values are positive and span
    LOG_SCALE_DECADES decades or more from `small_size` to the largest (a loss falling from
    100 to 0.5 is a flat line at 0 on a linear scale), `symlog` when their sizes span as much
    but some are <= 0 (log cannot show them; linear under `small_size`), else `linear`. NaN
    (not measured yet) is left out."""
    values = values[~np.isnan(values)]
    lo = small_size(values)
    if math.isnan(lo) or np.abs(values).max() < lo * 10**LOG_SCALE_DECADES:
        return "linear"
    return "log" if (values > 0).all() else "symlog"


def session_panels(table: Table) -> list[tuple[str, str]]:
    """The session graph's panels under the returns, as (column, y scale): every column but
    the clock and the returns that has values and changes (a constant, such as an unscheduled
    lr, says nothing over frames). A loss's scale is `loss_scale`'s, the others' linear."""
    panels = []
    for c in table:
        values = column(table, c)
        values = values[~np.isnan(values)]
        if c in CLOCK_COLUMNS or c in RETURN_COLUMNS or values.size == 0:
            continue
        if values.min() == values.max():
            continue
        panels.append((c, loss_scale(values) if c.endswith("loss") else "linear"))
    return panels


def plot_session(table: Table, title: str, path: Path) -> None:
    """The returns across the top, then a panel per `session_panels` column: one column of
    panels, or two when there are more than ONE_COLUMN_PANELS."""
    panels = session_panels(table)
    cols = 1 if len(panels) <= ONE_COLUMN_PANELS else 2
    rows = 1 + math.ceil(len(panels) / cols)
    fig = _figure(PANEL_WIDTH * cols, PANEL_HEIGHT * rows)
    grid = fig.add_gridspec(rows, cols)
    frames = column(table, "frame")
    top = fig.add_subplot(grid[0, :])
    for c, alpha in (("total_reward", 0.5), ("total_reward_ma", 1.0)):
        values = column(table, c)
        top.plot(frames, values, label=c, alpha=alpha, **point_markers(values))
    top.legend()
    top.set_title(title)
    for i, (c, scale) in enumerate(panels):
        ax = fig.add_subplot(grid[1 + i // cols, i % cols], sharex=top)
        values = column(table, c)
        ax.plot(frames, values, **point_markers(values))
        ax.set_ylabel(c)
        if scale == "symlog":
            ax.set_yscale(scale, linthresh=small_size(values))
        elif scale == "log":
            ax.set_yscale(scale)
        if i + cols >= len(panels):  # the lowest panel of its column
            ax.set_xlabel("frame")
    if not panels:
        top.set_xlabel("frame")
    _save_panels(fig, path)


def plot_trial(tables: Sequence[Table], title: str, path: Path) -> None:
    """total_reward and total_reward_ma over frames: the mean over the sessions, with a band of
    their sample std (none for one session), as `slm-lab plot` draws a trial."""
    fig = _figure(PANEL_WIDTH, 7)
    axes = fig.subplots(2, 1, sharex=True)
    for ax, col in zip(axes, ("total_reward", "total_reward_ma"), strict=True):
        frames, values = aligned(tables, col)
        mean, std = nan_stats(values, ddof=1)
        ax.plot(
            frames,
            mean,
            label=f"mean ± std over {counted(len(tables), 'session')}",
            **point_markers(mean),
        )
        ax.fill_between(frames, mean - std, mean + std, alpha=0.25)
        ax.set_ylabel(col)
        ax.legend()
    axes[0].set_title(title)
    axes[-1].set_xlabel("frame")
    _save_panels(fig, path)


def plot_experiment(
    trials: Sequence[Mapping[str, Any]],
    variables: Sequence[str],
    status_key: str,
    path: Path,
    log_variables: Collection[str] = (),
) -> None:
    """A search's graph: one panel per searched variable, total_reward_ma of each trial against
    the variable's value, trials coloured by their status's first word (completed, stopped,
    errored: an errored trial has no metric to place). A variable whose values are not all
    numbers (a choice of lists, names, null) gets one tick per distinct value; one drawn from a
    log distribution (`log_variables`: loguniform, lograndint, ...) a log axis."""
    fig = _figure(PANEL_WIDTH, 3 * len(variables))
    axes = np.atleast_1d(fig.subplots(len(variables), 1))
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
        elif var in log_variables:
            ax.set_xscale("log")
        ax.set_xlabel(var)
        ax.set_ylabel("total_reward_ma")
        ax.legend()
    _save(fig, path)


def json_label(value: Any) -> str:
    """A searched value as a spec writes it ([64, 64], null, "tanh")."""
    return json.dumps(value)
