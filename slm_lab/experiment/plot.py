"""Runs side by side: `slm-lab plot` draws the learning curves of several run folders in one
PNG, `slm-lab plot-list` lists the run folders there are to draw.

A curve is one trial's total_reward_ma (or, with `metric`, total_reward: the mean return of the
last 100 episodes, which the moving average trails) against frames: at each checkpoint frame,
the mean over the trial's sessions and their sample std (ddof 1, as SLM Lab v5's graphs and `consistency`
take it; a session without a return yet is left out). Two run folder formats are read:
- ours: `info/<name>_t<i>_s<j>_session_df.csv`, a row per checkpoint with its total_reward_ma,
  at the frames every session of the trial has;
- SLM Lab v5's, as its Hugging Face dataset publishes run folders:
  `info/<name>_t<i>_trial_metrics.json`, whose `local` (v5's `analysis.calc_trial_metrics`)
  holds `mean_returns`, each session's total_reward per checkpoint, and `frames`, the first
  session's checkpoint frames; total_reward_ma is their mean over the last MA_WINDOW
  checkpoints (v5's `viz.calc_sr_ma`, our total_reward_ma), the sessions cut to the shortest
  (v5's `util.calc_srs_mean_std`); total_reward is `mean_returns` itself.
A search gives a curve per trial: ours keeps each trial in a run folder of its own inside the
search folder, v5 keeps them all in one info/.

Several runs of one spec (a benchmark cell) can be pooled into one curve (`--pool`): at each
checkpoint frame they all have, the mean over all sessions of all their trials, with the 95%
bootstrap confidence interval of that mean, stratified by run (analysis.bootstrap_mean_ci), as
its band.

A curve's colour is its algorithm's (`ALGORITHM_COLORS`), the same in every graph; a second run
of the same algorithm in one graph gets a shade of it and another line style.

Only numpy and SLM Lab's torch-free modules load with it; matplotlib loads to draw.
"""

import json
import math
import re
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab.experiment import analysis
from slm_lab.experiment.analysis import (
    CONFIDENCE,
    MA_WINDOW,
    aligned,
    bootstrap_mean_ci,
    counted,
    nan_stats,
    point_markers,
)
from slm_lab.experiment.layout import is_run_dir, is_search_dir, run_spec_path
from slm_lab.lib import io

METRIC = "total_reward_ma"  # the default
METRICS = (METRIC, "total_reward")  # what a curve can show: columns of a session's rows
# ours: a session's rows; v5: a trial's metrics with its curves in `local` (ours: scalars only)
SESSION_DF = re.compile(r"_t(\d+)_s(\d+)_session_df\.csv$")
TRIAL_METRICS = re.compile(r"_t(\d+)_trial_metrics\.json$")
V5_LOCAL_KEYS = ("mean_returns", "frames")

# an algorithm's colour in every graph (the spec's agent.algorithm.name): families in one hue
ALGORITHM_COLORS = {
    "Random": "#7f7f7f",  # grey
    "Reinforce": "#bcbd22",  # olive
    "SARSA": "#8c564b",  # brown
    "VanillaDQN": "#17becf",  # cyan: value-based in cyan and green
    "DQN": "#1a9988",
    "DoubleDQN": "#2ca02c",
    "ActorCritic": "#1f77b4",  # blue: actor-critics in blue and purple
    "SIL": "#6baed6",
    "PPO": "#9467bd",
    "PPOSIL": "#e377c2",
    "SoftActorCritic": "#d62728",  # red: off-policy maximum entropy
    "CrossQ": "#ff7f0e",
}
# an algorithm not above (a v5 one, a user's): one of these, by a hash of its name
OTHER_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")
LINE_STYLES = ("-", "--", ":", "-.")
SHADE_STEP = 0.3  # how far each further run of an algorithm moves its colour to black or white
MAX_SHADE = 0.75
FIGURE_SIZE = (9.0, 5.5)  # inches
DPI = 120
BAND_ALPHA = 0.2
GRID_ALPHA = 0.3
FILE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")  # what else a title has becomes `_`


class PlotError(ValueError):
    """A folder or option `plot` cannot use: one line for the user."""


@dataclass(frozen=True)
class Curve:
    """One trial's metric over `sessions` sessions: mean and sample std per frame. A pooled
    curve (`read_pooled_curve`: `runs` trials together) has the confidence interval of its mean,
    `ci` (low, high per frame), which its band shows instead of the std."""

    label: str
    algorithm: str
    env: str
    sessions: int
    frames: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    runs: int = 1
    ci: tuple[np.ndarray, np.ndarray] | None = None

    def table(self) -> list[tuple[float, float, float]]:
        """(frame, mean, std) per checkpoint."""
        return list(zip(self.frames.tolist(), self.mean.tolist(), self.std.tolist(), strict=True))


@dataclass(frozen=True)
class Style:
    color: str
    linestyle: str


@dataclass(frozen=True)
class RunEntry:
    """A folder `plot-list` shows."""

    name: str
    algorithm: str
    env: str
    trial_metrics: int  # the trials with trial metrics (a trial writes them when it ends)
    search: bool
    problem: str | None = None  # why its spec record cannot be read (the folder is listed still)


# -- colours ---------------------------------------------------------------------------------
def algorithm_color(algorithm: str) -> str:
    """The algorithm's colour, the same in every graph."""
    if algorithm in ALGORITHM_COLORS:
        return ALGORITHM_COLORS[algorithm]
    return OTHER_COLORS[zlib.crc32(algorithm.encode()) % len(OTHER_COLORS)]


def shade(color: str, amount: float) -> str:
    """`color` (#rrggbb) moved `amount` of the way to white (amount > 0) or black (< 0)."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + abs(amount) * (target - c)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def run_styles(algorithms: list[str]) -> list[Style]:
    """A style per curve: the first curve of an algorithm in its colour, solid; the k-th
    further one a shade of it (darker, lighter, darker still, ...) and the k-th line style."""
    seen: dict[str, int] = {}
    styles = []
    for algorithm in algorithms:
        k = seen.get(algorithm, 0)
        seen[algorithm] = k + 1
        amount = min(SHADE_STEP * math.ceil(k / 2), MAX_SHADE) * (-1 if k % 2 else 1)
        color = algorithm_color(algorithm)
        styles.append(
            Style(shade(color, amount) if k else color, LINE_STYLES[k % len(LINE_STYLES)])
        )
    return styles


# -- reading run folders ---------------------------------------------------------------------
def find_folder(folder: str, data_dir: Path) -> Path:
    """The run or search folder `folder` names: a path, else a folder in `data_dir`."""
    path = Path(folder)
    if not path.exists() and (data_dir / folder).exists():
        path = data_dir / folder
    if not path.is_dir():
        also = "" if path.is_absolute() else f" (nor {data_dir / folder})"
        raise PlotError(f"{folder}: no such folder{also}")
    if not (is_run_dir(path) or is_search_dir(path)):
        raise PlotError(
            f"{folder}: not a run folder (expected a folder made by slm-lab run, or an SLM Lab v5 run folder: <spec_name>_spec.json and info/)"
        )
    return path


def read_spec(folder: Path) -> dict[str, Any]:
    """The spec record of a run or search folder (ours or v5's; v4's agent and env are lists)."""
    path = run_spec_path(folder)
    spec = read_json(path)
    if not isinstance(spec, dict):
        raise PlotError(
            f"{path}: not a run's spec record (it needs name, agent.algorithm.name and env.name)"
        )
    for key in ("agent", "env"):
        if isinstance(spec.get(key), list) and spec[key]:
            spec[key] = spec[key][0]
    return spec


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: not JSON ({e})") from None
    except OSError as e:
        raise PlotError(f"{path}: cannot be read ({e.strerror})") from None


def spec_fields(spec: dict[str, Any], path: Path) -> tuple[str, str, str]:
    """(spec name, algorithm name, env name) of a spec record."""
    try:
        return spec["name"], spec["agent"]["algorithm"]["name"], spec["env"]["name"]
    except (KeyError, TypeError):
        raise PlotError(
            f"{path}: not a run's spec record (it needs name, agent.algorithm.name and env.name)"
        ) from None


def read_curves(folder: Path, label: str | None = None, metric: str = METRIC) -> list[Curve]:
    """The folder's curves of `metric`, one per trial in trial order, labelled `label` (default:
    the spec name), with ` t<i>` for a search's trials and where a folder holds several."""
    search = is_search_dir(folder)
    parts = sorted(p for p in folder.iterdir() if is_run_dir(p)) if search else [folder]
    trials = sorted((c for part in parts for c in _trial_curves(part, metric)), key=lambda c: c[0])
    if not trials:
        raise PlotError(
            f"{folder}: no curves: neither info/*_session_df.csv (SLM Lab) nor info/*_trial_metrics.json with `local` curves (SLM Lab v5)"
        )
    several = search or len(trials) > 1
    return [
        replace(curve, label=(label or curve.label) + (f" t{trial}" if several else ""))
        for trial, curve in trials
    ]


def _trial_curves(folder: Path, metric: str) -> list[tuple[int, Curve]]:
    """(trial index, curve) of each trial a run folder has rows of, labelled by its spec name."""
    name, algorithm, env = spec_fields(read_spec(folder), run_spec_path(folder))
    curves = []
    for trial, (frames, values) in _trial_tables(folder, metric).items():
        mean, std = nan_stats(values, ddof=1)
        curves.append((trial, Curve(name, algorithm, env, values.shape[1], frames, mean, std)))
    return curves


def read_pooled_curve(folders: list[Path], label: str | None = None, metric: str = METRIC) -> Curve:
    """One curve of the trials of several run folders of one algorithm on one env (a cell's
    runs): at each checkpoint frame they all have, the mean and sample std over all their
    sessions and the bootstrap confidence interval of the mean, stratified by trial. Labelled
    `label` (default: the first run's spec name)."""
    names, algorithms, envs, runs = [], set(), set(), []
    for folder in folders:
        if is_search_dir(folder):
            raise PlotError(f"{folder}: a search folder; --pool takes run folders of one spec")
        name, algorithm, env = spec_fields(read_spec(folder), run_spec_path(folder))
        trials = _trial_tables(folder, metric)
        if not trials:
            raise PlotError(
                f"{folder}: no curves: neither info/*_session_df.csv (SLM Lab) nor info/*_trial_metrics.json with `local` curves (SLM Lab v5)"
            )
        names.append(name)
        algorithms.add(algorithm)
        envs.add(env)
        runs += [trials[t] for t in sorted(trials)]
    for kind, found in (("algorithms", algorithms), ("envs", envs)):
        if len(found) > 1:
            raise PlotError(
                f"--pool: the runs are of different {kind} ({', '.join(sorted(found))}); pool the runs of one cell, one -f per cell"
            )
    common = runs[0][0]
    for frames, _ in runs[1:]:
        common = common[np.isin(common, frames)]
    strata = [values[np.isin(frames, common)].T for frames, values in runs]  # [session, frame]
    pooled = np.concatenate(strata)
    mean, std = nan_stats(pooled.T, ddof=1)
    return Curve(
        label or names[0],
        algorithms.pop(),
        envs.pop(),
        len(pooled),
        common,
        mean,
        std,
        runs=len(runs),
        ci=bootstrap_mean_ci(strata),
    )


def _trial_tables(folder: Path, metric: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Trial index -> (frames, [frame, session] metric) of a run folder, in whichever format it
    holds them."""
    info = folder / "info"
    ours: dict[int, list[Path]] = {}
    for path in sorted(info.glob("*_session_df.csv")):
        match = SESSION_DF.search(path.name)
        if match is not None:
            ours.setdefault(int(match[1]), []).append(path)
    if ours:
        return {trial: _our_trial(paths, metric) for trial, paths in ours.items()}
    v5 = {}
    for path in sorted(info.glob("*_trial_metrics.json")):
        match = TRIAL_METRICS.search(path.name)
        metrics = read_json(path) if match is not None else None
        if isinstance(metrics, dict) and "local" in metrics:
            v5[int(match[1])] = v5_trial(metrics["local"], path, metric)
    return v5


def _our_trial(paths: list[Path], metric: str) -> tuple[np.ndarray, np.ndarray]:
    tables = [analysis.read_csv(p) for p in paths]
    for path, table in zip(paths, tables, strict=True):
        if "frame" not in table or metric not in table:
            raise PlotError(f"{path}: no frame and {metric} columns")
    frames, values = aligned(tables, metric)
    return frames * analysis.trial_frame_scale(tables), values


def v5_trial(
    local: dict[str, Any], path: Path, metric: str = METRIC
) -> tuple[np.ndarray, np.ndarray]:
    """(frames, [frame, session] metric) of SLM Lab v5's trial metrics' `local`."""
    missing = [k for k in V5_LOCAL_KEYS if k not in local]
    if missing:
        raise PlotError(f"{path}: its `local` has no {', '.join(missing)}")
    returns = [np.asarray(r, dtype=float) for r in local["mean_returns"]]
    frames = np.asarray(local["frames"], dtype=float)
    n = min(len(frames), *(len(r) for r in returns))
    if metric == METRIC:
        return frames[:n], np.stack([moving_mean(r[:n], MA_WINDOW) for r in returns], axis=1)
    if metric == "total_reward":  # the returns themselves
        return frames[:n], np.stack([r[:n] for r in returns], axis=1)
    raise PlotError(f"--metric {metric}: give one of {', '.join(METRICS)}")


def moving_mean(values: np.ndarray, window: int) -> np.ndarray:
    """At each i, the mean of values[i-window+1 .. i] that are not NaN (NaN if none)."""
    known = ~np.isnan(values)
    sums = np.concatenate([[0.0], np.cumsum(np.where(known, values, 0.0))])
    counts = np.concatenate([[0], np.cumsum(known)])
    end = np.arange(1, len(values) + 1)
    start = np.maximum(end - window, 0)
    count = counts[end] - counts[start]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (sums[end] - sums[start]) / count, math.nan)


# -- the graph -------------------------------------------------------------------------------
def file_name(title: str) -> str:
    """The PNG's name for a title: `ALE/Pong-v5` -> `ALE_Pong-v5.png`."""
    stem = FILE_NAME_CHARS.sub("_", title).strip("._")
    if not stem:
        raise PlotError(f"--title {title!r}: no letter or digit to name the file by")
    return f"{stem}.png"


def default_title(curves: list[Curve], metric: str = METRIC) -> str:
    """The runs' env names (and the metric, where it is not the default)."""
    envs = ", ".join(dict.fromkeys(c.env for c in curves))
    return envs if metric == METRIC else f"{envs} {metric}"


def band(curve: Curve) -> tuple[np.ndarray, np.ndarray]:
    """The band a curve is drawn with: its confidence interval, else mean ± std."""
    return curve.ci if curve.ci is not None else (curve.mean - curve.std, curve.mean + curve.std)


def draw(curves: list[Curve], title: str, path: Path, metric: str = METRIC) -> None:
    """Every curve's mean with its band (±std, or a pooled curve's confidence interval), in one
    headless PNG (no pyplot, no display)."""
    fig = figure(curves, title, metric)
    io.atomic_write(path, lambda f: fig.savefig(f, format="png"))


def figure(curves: list[Curve], title: str, metric: str = METRIC) -> Any:
    """The graph `draw` saves: a curve of few points (one checkpoint) marks each point."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGURE_SIZE, dpi=DPI)
    ax = fig.subplots()
    for curve, style in zip(curves, run_styles([c.algorithm for c in curves]), strict=True):
        ax.plot(
            curve.frames,
            curve.mean,
            color=style.color,
            linestyle=style.linestyle,
            label=curve.label,
            **point_markers(curve.mean),
        )
        ax.fill_between(
            curve.frames,
            *band(curve),
            color=style.color,
            alpha=BAND_ALPHA,
            linewidth=0,
        )
    ax.set_title(title)
    ax.set_xlabel("frame")
    pooled = f"mean and {CONFIDENCE:.0%} CI over all sessions of the runs"
    ax.set_ylabel(
        f"{metric} ({pooled if curves[0].ci is not None else 'mean ± std over sessions'})"
    )
    ax.grid(alpha=GRID_ALPHA)
    ax.legend()
    fig.tight_layout()
    return fig


def curve_line(curve: Curve, metric: str = METRIC) -> str:
    """What the terminal says of a curve: its last point (± the std where sessions > 1; a
    pooled curve's confidence interval where it has one)."""
    spread = f" ± {curve.std[-1]:.2f}" if curve.sessions > 1 else ""
    if curve.ci is not None:
        low, high = curve.ci[0][-1], curve.ci[1][-1]
        spread = "" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]"
    runs = f"{counted(curve.runs, 'run')}, " if curve.ci is not None else ""
    return (
        f"{curve.label} ({curve.algorithm}, {curve.env}): {runs}{counted(curve.sessions, 'session')} | "
        f"frame:{curve.frames[-1]:.0f} | {metric}:{curve.mean[-1]:.2f}{spread}"
    )


# -- listing ---------------------------------------------------------------------------------
def list_runs(data_dir: Path) -> list[RunEntry]:
    """The run and search folders in `data_dir`, by name."""
    if not data_dir.is_dir():
        raise PlotError(f"{data_dir}: no such folder")
    entries = []
    for folder in sorted(data_dir.iterdir()):
        search = is_search_dir(folder)
        if not (search or is_run_dir(folder)):
            continue
        try:
            _, algorithm, env = spec_fields(read_spec(folder), run_spec_path(folder))
        except PlotError as e:
            entries.append(RunEntry(folder.name, "?", "?", 0, search, problem=str(e)))
            continue
        parts = [p for p in folder.iterdir() if is_run_dir(p)] if search else [folder]
        metrics = [
            m
            for p in parts
            for m in (p / "info").glob("*_trial_metrics.json")
            if TRIAL_METRICS.search(m.name)
        ]
        entries.append(RunEntry(folder.name, algorithm, env, len(metrics), search))
    return entries
