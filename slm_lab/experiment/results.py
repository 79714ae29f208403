"""The results page, docs/BENCHMARKS.md: its progress matrix, its per-env tables and plots, built
from the benchmark cells listed in docs/results/cells.yaml and the run folders beside it.

A cell is one spec on one env at one budget: `spec_file`, `spec_name` and the `options` it ran
with.
Its runs are run folders of `slm-lab run ... train` (one trial each), copied into docs/results/
without their checkpoints and named as the run folder was. A cell may also quote the scores of
earlier runs whose folders are not in the repo (`earlier`); the page shows those apart.

A run passes when its `total_reward_ma` (the mean over its sessions) is above the cell's target.
A cell is met when at least MET_RUNS runs of FULL_SESSIONS sessions each, on their own seeds,
all pass (two runs that pass, and a third that does not miss); a run that misses leaves it not
met; fewer runs, all passing, leave it open. Over all the sessions of a cell's runs the page
gives the interquartile mean and the 95% bootstrap confidence interval of the mean, stratified
by run (analysis.iqm, analysis.bootstrap_mean_ci), and a plot per env draws each cell's runs
pooled (`slm-lab plot --pool`).

`uv run python -m slm_lab.experiment.results` rewrites the page between its BEGIN and END lines
and the plots in docs/results/plots/; a test checks that the committed page and plots are what
the data gives. Torch-free.
"""

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
import yaml

from slm_lab import ROOT_DIR
from slm_lab.experiment import plot
from slm_lab.experiment.analysis import (
    CONFIDENCE,
    bootstrap_mean_ci,
    counted,
    iqm,
    read_csv,
    session_metrics,
    trial_frame_scale,
)
from slm_lab.experiment.layout import RunLayout, is_run_dir
from slm_lab.experiment.retro import run_name, sessions_of
from slm_lab.lib.config import Config, SpecError, did_you_mean, key, parse
from slm_lab.spec import spec_util

PAGE = ROOT_DIR / "docs" / "BENCHMARKS.md"
RESULTS_DIR = ROOT_DIR / "docs" / "results"
CELLS_FILE = "cells.yaml"
PLOTS_DIR = "plots"  # in the results folder
SPEC_ROOT = "slm_lab/spec/benchmark"  # a cell's spec_file is under it
BEGIN = "<!-- results: from here to the end line, written by `uv run python -m slm_lab.experiment.results` from docs/results/; edit the data, not this -->"
END = "<!-- results: end -->"
FULL_SESSIONS = 4  # a run that counts toward a cell being met has this many sessions or more
MET_RUNS = 3  # the runs, all passing, that make a cell met
MET, NOT_MET, OPEN, NO_RUN, NO_TARGET = "**met**", "not met", "open", "no run", "–"
EARLIER_MARK = "*"  # a progress-matrix entry that rests on earlier runs, data not in the repo


class ResultsError(SpecError):
    """The cell list or a run folder in it cannot give the page: one line for the user."""


@dataclass(frozen=True)
class Cell(Config):
    """One row of an env's table."""

    algorithm: str = key(required=True, doc="the algorithm as the page names it (PPO, A2C (GAE))")
    spec_file: str = key(required=True, doc=f"the spec file, under {SPEC_ROOT}/")
    spec_name: str = key(required=True, doc="the spec in it")
    frames: int = key(required=True, gt=0, doc="the budget the runs ran at (max_frame)")
    options: str = key(
        "", doc="the options of `slm-lab run` the runs ran with (-s env=..., -s max_frame=...)"
    )
    target: float | None = key(
        None, doc="a run passes when its total_reward_ma is above it; null: no target"
    )
    target_from: str | None = key(None, doc="whose number the target is, where not the project's")
    v5: float | None = key(
        None, doc="SLM Lab v5's published total_reward_ma of this algorithm on the env"
    )
    v5_frames: int | None = key(None, gt=0, doc="v5's budget, where it differs from `frames`")
    runs: list[str] = key([], doc="run folders in the results folder: the runs with data")
    earlier: list[float | str] = key(
        [], doc="total_reward_ma of earlier runs whose data is not in the repo"
    )
    earlier_sessions: int = key(FULL_SESSIONS, gt=0, doc="the sessions of each earlier run")

    def check(self, path: str) -> None:
        for i, score in enumerate(self.earlier):
            try:
                float(score)
            except ValueError:
                raise ResultsError(f"{path}.earlier[{i}]: {score!r} is not a number") from None


@dataclass(frozen=True)
class EnvResults(Config):
    """An env's section: its table, notes and plot."""

    env: str = key(required=True, doc="the env id the runs ran (env.name in their spec records)")
    family: str = key(required=True, doc="its family, a row of the progress matrix")
    title: str | None = key(None, doc="the section's and the plot's title (default: env)")
    note: str = key("", doc="a paragraph under the table")
    earlier_plot: str | None = key(None, doc="a plot of earlier runs (docs/ path), shown apart")
    cells: list[Cell] = key(required=True, doc="its cells, in the table's order")

    @property
    def heading(self) -> str:
        return self.title or self.env


@dataclass(frozen=True)
class Cells(Config):
    """The cell list: the progress matrix's rows and columns, and each env's cells."""

    families: list[str] = key(required=True, doc="the progress matrix's rows, in order")
    algorithms: list[str] = key(required=True, doc="its columns, in order")
    envs: list[EnvResults] = key(required=True, doc="the envs' sections, in order")

    def check(self, path: str) -> None:
        for i, env in enumerate(self.envs):
            if env.family not in self.families:
                raise ResultsError(
                    f"envs[{i}].family: {env.family!r} is not in families ({', '.join(self.families)})"
                )
            seen = set()
            for j, cell in enumerate(env.cells):
                if (cell.spec_name, cell.frames) in seen:
                    raise ResultsError(
                        f"envs[{i}].cells[{j}]: {cell.spec_name} at {cell.frames} frames is listed twice for {env.heading}"
                    )
                seen.add((cell.spec_name, cell.frames))
                if cell.algorithm not in self.algorithms:
                    raise ResultsError(
                        f"envs[{i}].cells[{j}].algorithm: {cell.algorithm!r} is not in algorithms ({', '.join(self.algorithms)})"
                    )


@dataclass(frozen=True)
class Run:
    """A run folder of a cell: each session's total_reward_ma."""

    name: str
    scores: np.ndarray

    @property
    def total_reward_ma(self) -> float:
        return float(np.nanmean(self.scores))


# -- reading -----------------------------------------------------------------------------
def load_cells(results_dir: Path = RESULTS_DIR) -> Cells:
    path = results_dir / CELLS_FILE
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ResultsError(f"{path}: cannot be read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ResultsError(f"{path}: not YAML ({e})") from None
    try:
        return parse(Cells, data, "")
    except SpecError as e:
        raise ResultsError(f"{path}: {e}") from None


def read_run(results_dir: Path, name: str, env: EnvResults, cell: Cell) -> Run:
    """The run folder `name` of `cell`; ResultsError when it is missing or not the cell's run."""
    root = results_dir / name
    where = f"{root} (a run of {cell.spec_name} on {env.env})"
    if not is_run_dir(root):
        raise ResultsError(
            f"{where}: not a run folder (its <spec_name>_spec.json and info/); copy the run folder there"
        )
    spec_name, _, env_name = plot.spec_fields(plot.read_spec(root), root)
    # a run of a template given -s env=... is named with the env's suffix (ppo_mujoco_hopper)
    names = (cell.spec_name, f"{cell.spec_name}_{spec_util.env_suffix(env.env)}")
    if spec_name not in names or env_name != env.env:
        raise ResultsError(f"{where}: it is a run of {spec_name} on {env_name}")
    trials = sessions_of(RunLayout(root, run_name(root)))
    if list(trials) != [0]:
        raise ResultsError(f"{where}: expected the session rows of one trial, t0")
    layout = RunLayout(root, run_name(root))
    tables = [read_csv(layout.rows_csv(0, s)) for s in trials[0]]
    # total_reward_ma needs no random baseline: session_metrics' strength is not used here
    scores = np.array([session_metrics(t, 0.0)["total_reward_ma"] for t in tables])
    frame = int(max(t["frame"][-1] for t in tables)) * trial_frame_scale(tables)
    if frame != cell.frames:
        raise ResultsError(
            f"{where}: it ended at frame {frame}, the cell's budget is {cell.frames}"
        )
    return Run(name, scores)


def check_specs(cells: Cells, results_dir: Path) -> None:
    """Every cell names a spec that exists: its file under SPEC_ROOT, its name in the file."""
    for i, env in enumerate(cells.envs):
        for j, cell in enumerate(env.cells):
            where = f"{results_dir / CELLS_FILE}: envs[{i}].cells[{j}]"
            try:
                names = spec_util.read_spec_file(f"{SPEC_ROOT}/{cell.spec_file}", template=True)
            except SpecError as e:
                raise ResultsError(f"{where}.spec_file: {e}") from None
            if cell.spec_name not in names:
                raise ResultsError(
                    f"{where}.spec_name: {cell.spec_name!r} is not in {cell.spec_file}{did_you_mean(cell.spec_name, names)}"
                )


def read_runs(results_dir: Path, cells: Cells) -> dict[tuple[str, str, int], list[Run]]:
    """(env, spec_name, frames) -> the cell's runs, in the cell list's order."""
    return {
        cell_id(env, cell): [read_run(results_dir, name, env, cell) for name in cell.runs]
        for env in cells.envs
        for cell in env.cells
    }


def cell_id(env: EnvResults, cell: Cell) -> tuple[str, str, int]:
    return env.heading, cell.spec_name, cell.frames


# -- verdicts ----------------------------------------------------------------------------
def passed(scores: list[float], target: float) -> int:
    return sum(score > target for score in scores)


def status(scores: list[float], sessions: list[int], target: float | None) -> str:
    """`MET` when at least MET_RUNS runs of FULL_SESSIONS sessions all pass, `NOT_MET` when a
    run misses, `OPEN` while fewer runs all pass, `NO_RUN` without runs; NO_TARGET without a
    target."""
    if target is None:
        return NO_TARGET
    if not scores:
        return NO_RUN
    if passed(scores, target) < len(scores):
        return NOT_MET
    full = sum(n >= FULL_SESSIONS for n in sessions)
    return MET if full >= MET_RUNS else OPEN


def run_status(runs: list[Run], cell: Cell) -> str:
    return status([r.total_reward_ma for r in runs], [len(r.scores) for r in runs], cell.target)


def earlier_scores(cell: Cell) -> list[float]:
    """The earlier runs' scores (a string is a score quoted with fewer decimals: `482`)."""
    return [float(score) for score in cell.earlier]


def earlier_status(cell: Cell) -> str:
    scores = earlier_scores(cell)
    return status(scores, [cell.earlier_sessions] * len(scores), cell.target)


# -- formatting --------------------------------------------------------------------------
def number(value: float) -> str:
    """A score: 2 decimals."""
    return f"{value:.2f}"


def quoted(value: float) -> str:
    """A number as a source gave it: its decimals up to 2, no trailing zeros (499, 6240.68)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def frames_text(frames: int) -> str:
    """`2e5`, `1e6`, `1.5e5`: a budget as specs and commands write it."""
    mantissa, exponent = f"{frames:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def target_text(cell: Cell) -> str:
    if cell.target is None:
        return NO_TARGET
    source = f" ({cell.target_from})" if cell.target_from else ""
    return f"> {quoted(cell.target)}{source}"


def v5_text(cell: Cell) -> str:
    if cell.v5 is None:
        return NO_TARGET
    budget = cell.v5_frames if cell.v5_frames is not None else cell.frames
    return quoted(cell.v5) + ("" if budget == cell.frames else f" at {frames_text(budget)}")


def passed_text(scores: list[float], target: float | None) -> str:
    return (
        NO_TARGET if target is None or not scores else f"{passed(scores, target)} of {len(scores)}"
    )


def spec_link(cell: Cell) -> str:
    return f"[{cell.spec_file}](../{SPEC_ROOT}/{cell.spec_file})"


def command(cell: Cell) -> str:
    """The command that makes a run of the cell."""
    options = f"{cell.options} " if cell.options else ""
    return f"uv run slm-lab run {options}{SPEC_ROOT}/{cell.spec_file} {cell.spec_name} train"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


# -- the plots ---------------------------------------------------------------------------
def plot_args(env: EnvResults, results_dir: Path, runs: dict) -> list[str]:
    """`slm-lab plot`'s arguments that draw the env's plot: a pooled curve per cell with data
    (folders as paths relative to the repo's root, where the command runs)."""
    args = ["plot", "--pool", "-t", env.heading, "-o", relative(results_dir / PLOTS_DIR)]
    for cell in env.cells:
        if runs[cell_id(env, cell)]:
            folders = ",".join(relative(results_dir / name) for name in cell.runs)
            args += ["-f", folders, "-l", curve_label(cell)]
    return args


def curve_label(cell: Cell) -> str:
    return f"{cell.algorithm} {cell.spec_name}"


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT_DIR)) if path.is_relative_to(ROOT_DIR) else str(path)


def plot_path(env: EnvResults, results_dir: Path) -> Path:
    return results_dir / PLOTS_DIR / plot.file_name(env.heading)


def draw_plots(results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Each env's plot of its cells with data, as `slm-lab plot` with `plot_args` draws it; a
    plot of an env that has none is removed."""
    cells = load_cells(results_dir)
    runs = read_runs(results_dir, cells)
    drawn = []
    for env in cells.envs:
        curves = [
            plot.read_pooled_curve([results_dir / name for name in cell.runs], curve_label(cell))
            for cell in env.cells
            if runs[cell_id(env, cell)]
        ]
        if curves:
            path = plot_path(env, results_dir)
            plot.draw(curves, env.heading, path)
            drawn.append(path)
    for stale in set((results_dir / PLOTS_DIR).glob("*.png")) - set(drawn):
        stale.unlink()  # an env whose cells lost their data
    return drawn


# -- the page ----------------------------------------------------------------------------
def render(results_dir: Path = RESULTS_DIR, page: Path = PAGE) -> str:
    """The page's generated part, from BEGIN to END, links relative to `page`."""
    cells = load_cells(results_dir)
    check_specs(cells, results_dir)
    runs = read_runs(results_dir, cells)
    out = [BEGIN, "", "## Progress", "", *matrix(cells, runs), ""]
    for family in cells.families:
        envs = [env for env in cells.envs if env.family == family]
        if envs:
            out += [f"## {family}", ""]
        for env in envs:
            out += env_section(env, runs, results_dir, page)
    return "\n".join([*out, END])


def matrix(cells: Cells, runs: dict) -> list[str]:
    """Family x algorithm: how many of its cells with a target are met, `ran` where its cells
    have none, NO_TARGET where there is no cell."""
    rows = []
    for family in cells.families:
        row = [family]
        for algorithm in cells.algorithms:
            found = [
                (env, cell)
                for env in cells.envs
                if env.family == family
                for cell in env.cells
                if cell.algorithm == algorithm
            ]
            row.append(matrix_entry(found, runs))
        rows.append(row)
    legend = (
        "Each entry counts the cells of that algorithm and family with a target (a cell: one spec"
        " on one env at one budget) by status; `ran`: its cells have no target; "
        f"{NO_TARGET}: no cell. {EARLIER_MARK}: some of the statuses rest on earlier runs whose"
        " data is not in the repo."
    )
    return [*table(["family", *cells.algorithms], rows), "", legend]


def matrix_entry(found: list[tuple[EnvResults, Cell]], runs: dict) -> str:
    if not found:
        return NO_TARGET
    targeted = [(env, cell) for env, cell in found if cell.target is not None]
    if not targeted:
        return "ran"
    statuses, earlier = [], False
    for env, cell in targeted:
        mine = runs[cell_id(env, cell)]
        statuses.append(run_status(mine, cell) if mine else earlier_status(cell))
        earlier |= not mine and bool(cell.earlier)
    counts = [
        (sum(s == word for s in statuses), word.strip("*")) for word in (MET, OPEN, NOT_MET, NO_RUN)
    ]
    return ", ".join(f"{n} {word}" for n, word in counts if n) + (EARLIER_MARK if earlier else "")


def env_section(env: EnvResults, runs: dict, results_dir: Path, page: Path) -> list[str]:
    out = [f"### {env.heading}", ""]
    with_data = [cell for cell in env.cells if runs[cell_id(env, cell)]]
    with_earlier = [cell for cell in env.cells if cell.earlier]
    if with_data:
        out += [
            *table(
                [
                    "algorithm",
                    "target",
                    "status",
                    "total_reward_ma (each run)",
                    "IQM",
                    f"mean [{CONFIDENCE:.0%} CI]",
                    "runs passed",
                    "v5's score",
                    "spec file",
                    "spec name",
                    "frames",
                ],
                [data_row(cell, runs[cell_id(env, cell)], results_dir, page) for cell in with_data],
            ),
            "",
        ]
    if with_earlier:
        out += [
            "From earlier runs, data not in the repo:",
            "",
            *table(
                [
                    "algorithm",
                    "target",
                    "status",
                    "total_reward_ma (each run)",
                    "runs passed",
                    "v5's score",
                    "spec file",
                    "spec name",
                    "frames",
                ],
                [earlier_row(cell) for cell in with_earlier],
            ),
            "",
        ]
    if waiting := [cell for cell in env.cells if not (runs[cell_id(env, cell)] or cell.earlier)]:
        out += [
            "No run yet: " + ", ".join(f"{c.algorithm} (`{c.spec_name}`)" for c in waiting) + ".",
            "",
        ]
    if env.note:
        out += [" ".join(env.note.split()), ""]
    out += ["```bash", *(command(cell) for cell in env.cells), "```", ""]
    if with_data:
        png = plot_path(env, results_dir)
        out += [
            f"![{env.heading}]({link(png, page)})",
            "",
            "```bash",
            "uv run slm-lab " + shlex.join(plot_args(env, results_dir, runs)),
            "```",
            "",
        ]
    if env.earlier_plot:
        if not (page.parent / env.earlier_plot).is_file():
            raise ResultsError(
                f"{env.heading}: earlier_plot {env.earlier_plot} is not a file beside {page}"
            )
        out += [
            f"Earlier runs (data not in the repo): ![{env.heading}, earlier runs]({env.earlier_plot})",
            "",
        ]
    return out


def link(path: Path, page: Path) -> str:
    """`path` as a link from `page`."""
    return Path(os.path.relpath(path, page.parent)).as_posix()


def data_row(cell: Cell, runs: list[Run], results_dir: Path, page: Path) -> list[str]:
    scores = [r.total_reward_ma for r in runs]
    strata = [r.scores[~np.isnan(r.scores)] for r in runs]
    low, high = bootstrap_mean_ci(strata)
    pooled = np.concatenate(strata)
    ci = NO_TARGET if np.isnan(low) else f"[{number(low)}, {number(high)}]"
    each = ", ".join(
        f"[{number(r.total_reward_ma)}]({link(results_dir / r.name, page)})" for r in runs
    )
    return [
        cell.algorithm,
        target_text(cell),
        run_status(runs, cell),
        each,
        number(iqm(pooled)),
        f"{number(float(pooled.mean()))} {ci}",
        passed_text(scores, cell.target),
        v5_text(cell),
        spec_link(cell),
        cell.spec_name,
        f"{frames_text(cell.frames)} ({counted(len(runs), 'run')} x {sessions_text(runs)})",
    ]


def sessions_text(runs: list[Run]) -> str:
    sizes = sorted({len(r.scores) for r in runs})
    return "/".join(str(n) for n in sizes) + " sessions"


def earlier_row(cell: Cell) -> list[str]:
    return [
        cell.algorithm,
        target_text(cell),
        earlier_status(cell),
        ", ".join(score if isinstance(score, str) else number(score) for score in cell.earlier),
        passed_text(earlier_scores(cell), cell.target),
        v5_text(cell),
        spec_link(cell),
        cell.spec_name,
        f"{frames_text(cell.frames)} ({counted(len(cell.earlier), 'run')} x {counted(cell.earlier_sessions, 'session')})",
    ]


def replace_block(text: str, block: str, path: Path) -> str:
    """`text` with its part from the BEGIN line to the END line replaced by `block`."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ResultsError(f"{path}: no {BEGIN!r} line followed by a {END!r} line to write between")
    return text[:start] + block + text[end + len(END) :]


def generated_block(text: str, path: Path) -> str:
    """The part of a page from its BEGIN line to its END line."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ResultsError(f"{path}: no {BEGIN!r} line followed by a {END!r} line")
    return text[start : end + len(END)]


def write(results_dir: Path = RESULTS_DIR, page: Path = PAGE) -> list[Path]:
    """Rewrite the page's generated part and the plots; returns the plots."""
    text = replace_block(page.read_text(), render(results_dir, page), page)
    plots = draw_plots(results_dir)
    page.write_text(text)
    return plots


def copy_run(source: Path, results_dir: Path = RESULTS_DIR) -> Path:
    """Copy what the page needs of the run folder `source` into the results folder, under its
    own name: its spec records, its trial metrics and info/ (session rows and metrics); not its
    checkpoints, logs or graphs (retro draws the graphs again)."""
    if not is_run_dir(source):
        raise ResultsError(
            f"{source}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
        )
    target = results_dir / source.name
    if target.exists():
        raise ResultsError(f"{target}: already there; remove it first to copy {source} again")
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.name.endswith(("_spec.json", "_metrics.json")):
            shutil.copy(path, target / path.name)
    shutil.copytree(source / "info", target / "info")
    return target


def main(
    add: Annotated[
        list[Path] | None,
        typer.Option(
            help="a run folder (data/<run folder>) to copy into docs/results/ first; list it under its cell in cells.yaml, then run this again"
        ),
    ] = None,
) -> None:
    """Rewrite docs/BENCHMARKS.md's results and docs/results/plots/ from docs/results/."""
    try:
        for source in add or []:
            target = copy_run(source, RESULTS_DIR)
            typer.echo(f"copied {source} to {relative(target)}")
        if add:
            typer.echo(
                f"list the folder names under their cells' runs in {relative(RESULTS_DIR / CELLS_FILE)}, then run this again without --add"
            )
            return
        plots = write(RESULTS_DIR, PAGE)
    except (ResultsError, plot.PlotError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"wrote {relative(PAGE)} and {counted(len(plots), 'plot')} in {relative(RESULTS_DIR / PLOTS_DIR)}"
    )


if __name__ == "__main__":
    typer.run(main)
