"""Hyperparameter search, the driver: Ray Tune runs the trials, Optuna suggests their values,
ASHA stops the weak ones early. Only `search` mode imports Ray (ray_cluster), Tune and Optuna
(here and in search_trial).

A trial is a spec with the searched paths set (search_space.trial_spec), validated like a spec
file, then run as `train` runs it, `max_session` seeds in parallel, in its own run folder
`<search folder>/<name>_t<i>/`: search_trial.run_trial, in a Ray worker.

The search folder holds the trials' folders, the table of the trials that have ended (the
partial experiment table, rewritten as each one ends), Tune's working folder (`tune/`), `log/`
(the search log and Ray's own), and at the end the experiment table, its graph and the best
trial's spec.

A run folder is data, never code: `search@<folder>` continues a search from its plain files
only (the partial table, each trial's spec record), never from Tune's or Optuna's saved state,
which is pickled (unpickling runs whatever code the file names). Tune's folder is cleared and
never read back.
"""

import csv
import io as text_io
import itertools
import json
import math
import os
import re
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from ray import tune
from ray.tune.logger import JsonLoggerCallback
from ray.tune.schedulers import AsyncHyperBandScheduler
from ray.tune.search.optuna import OptunaSearch

from slm_lab.experiment import analysis, record, stop
from slm_lab.experiment.analysis import TRIAL_METRICS
from slm_lab.experiment.layout import KEEP_MODELS, RunLayout, validation_name
from slm_lab.experiment.ray_cluster import (
    WorkerStarts,
    concurrent_trials,
    route_ray_logs,
    worker_command,
)
from slm_lab.experiment.search_trial import (
    DONE,
    METRIC,
    MODE,
    TIME_ATTR,
    WORST,
    TrialFailed,
    dir_index,
    finite,
    run_trial,
)
from slm_lab.lib import io
from slm_lab.lib.logger import logger
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_space import LOG_DISTS, SearchParam, quantize
from slm_lab.spec.spec_util import SpecError

TOP_TRIALS = 5  # rows of the closing table
# randn draws through the normal's inverse CDF of a uniform in [EPS, 1 - EPS]: +-6.4 sd
NORMAL_QUANTILE_EPS = 1e-10
COMPLETED, STOPPED, ERRORED = "completed", "stopped early at frame", "errored:"
STUDY = "slm_lab"  # the Optuna study's name (one per searcher, in memory)
RESTART = "restart"  # the user attribute of an enqueued Optuna trial: the values to run it with
# a continued search's searcher is seeded with the search's seed plus this times the trials it
# already has, so that its first random draws are not the first ones of the search again
RESUME_SEED_STEP = 1_000_003


class SearchStopped(Exception):
    """The search was interrupted (Ctrl-C, SIGTERM: `signum`, None when Tune stopped on its
    own) before every trial ended. `trials` has the rows of the trials that had ended
    (trial_rows)."""

    def __init__(self, trials: list[dict[str, Any]], signum: int | None) -> None:
        super().__init__(f"{analysis.counted(len(trials), 'trial')} ended")
        self.trials, self.signum = trials, signum


class WorkersCannotStart(Exception):
    """No trial could start: Ray's workers die as they start."""


@dataclass(frozen=True)
class SearchSpace:
    """Optuna's define-by-run space: each searched path drawn from its distribution. Values that
    Optuna cannot draw directly, or draws with other weights than Ray Tune (normal, quantized,
    log-scale int, any JSON choice), are drawn through one it can, under the same name, and
    returned transformed; the returned value is what the trial gets."""

    params: tuple[SearchParam, ...]

    def __call__(self, trial: Any) -> dict[str, Any]:
        values = {p.path: draw(p, trial) for p in self.params}
        # a trial a continued search restarts: Optuna has its draws (enqueued), the values are
        # the ones it ran with, exactly (a normal's draw does not round-trip to the bit)
        return trial.user_attrs.get(RESTART, values)


def draw(p: SearchParam, trial: Any) -> Any:
    name, a = p.path, p.args
    match p.dist:
        case "uniform":
            return trial.suggest_float(name, a[0], a[1])
        case "quniform":
            return quantize(trial.suggest_float(name, a[0], a[1]), a[2])
        case "loguniform":
            return trial.suggest_float(name, a[0], a[1], log=True)
        case "qloguniform":
            return quantize(trial.suggest_float(name, a[0], a[1], log=True), a[2])
        case "randn" | "qrandn":
            u = trial.suggest_float(name, NORMAL_QUANTILE_EPS, 1 - NORMAL_QUANTILE_EPS)
            x = statistics.NormalDist(a[0], a[1]).inv_cdf(u)
            return x if p.dist == "randn" else quantize(x, a[2])
        case "randint" | "qrandint":
            q, first, last = p.int_grid()
            return q * trial.suggest_int(name, first, last)
        case "lograndint" | "qlograndint":
            # as Ray Tune draws it: a float log-uniform in [first, last + 1), floored, so k has
            # the weight log((k + 1) / k) (Optuna's log ints round, weighting k differently);
            # the min: Optuna's float range includes its top
            q, first, last = p.int_grid()
            k = math.floor(trial.suggest_float(name, first, last + 1, log=True))
            return q * min(k, last)
        case "choice":
            return a[trial.suggest_categorical(name, list(range(len(a))))]
    raise ValueError(f"{p.key}: unknown distribution")  # parse() admits none other


def undraw(p: SearchParam, value: Any) -> Any:
    """What Optuna draws (draw) for a searched value, to tell a continued search's Optuna the
    trials that ended; clipped to the distribution's range (a quantized value may round past
    it). None for a value the distribution cannot give (a record that does not fit the space)."""
    a = p.args
    if p.dist == "choice":
        return next((i for i, option in enumerate(a) if option == value), None)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    match p.dist:
        case "uniform" | "quniform" | "loguniform" | "qloguniform":
            return min(max(float(value), a[0]), a[1])
        case "randn" | "qrandn":
            u = statistics.NormalDist(a[0], a[1]).cdf(value)
            return min(max(u, NORMAL_QUANTILE_EPS), 1 - NORMAL_QUANTILE_EPS)
    q, first, last = p.int_grid()
    k = min(max(round(value / q), first), last)
    return float(k) if p.dist in ("lograndint", "qlograndint") else k


def searcher(spec: Spec, plan: "Plan | None" = None) -> OptunaSearch:
    """Optuna's TPE over the spec's search space, seeded by meta.random_seed: the same search
    suggests the same trials. Continuing a search (`plan`), Optuna's study starts with the
    trials that ended (their values and metric: warm-started) and suggests first the ones it
    restarts, with the values they had."""
    space = SearchSpace(spec.search)
    if plan is None or not (plan.ended or plan.restarts):
        return OptunaSearch(space, METRIC, MODE, seed=spec.meta.random_seed)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name=STUDY, direction="maximize")
    for t in plan.ended:
        if (draws := optuna_draws(spec, t.values)) is None:
            continue  # values the space cannot give: the table keeps the trial, Optuna not
        params, distributions = draws
        errored = t.status.startswith(ERRORED)
        study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.FAIL if errored else optuna.trial.TrialState.COMPLETE,
                value=None if errored else finite(t.metric),
                params=params,
                distributions=distributions,
            )
        )
    for _, values in plan.restarts:
        draws = optuna_draws(spec, values)
        study.enqueue_trial(draws[0] if draws else {}, user_attrs={RESTART: values})
    seed = spec.meta.random_seed
    seed = (
        None if seed is None else seed + RESUME_SEED_STEP * (len(plan.ended) + len(plan.restarts))
    )
    return OptunaSearch(space, METRIC, MODE, study_name=STUDY, storage=storage, seed=seed)


def optuna_draws(
    spec: Spec, values: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(Optuna's params, their distributions) behind a trial's searched values: undraw, then
    the search space run on them (a FixedTrial records the distributions as draw asks for
    them). None when a value does not fit its distribution."""
    params = {p.path: undraw(p, values.get(p.path)) for p in spec.search}
    if any(v is None for v in params.values()):
        return None
    fixed = optuna.trial.FixedTrial(params)
    SearchSpace(spec.search)(fixed)
    return params, fixed.distributions


# -- trials' folders -------------------------------------------------------------------------
@dataclass(frozen=True)
class TrialNames:
    """Tune's folder of each trial (trial_dirname_creator): t<i>, i the search's index of the
    trial. Tune creates the trials in the order the searcher suggests them (its experiment tag
    starts with the 1-based count): `indices` in that order (Plan.order)."""

    indices: tuple[int, ...]

    def __call__(self, trial: Any) -> str:
        return f"t{self.indices[int(trial.experiment_tag.split('_', 1)[0]) - 1]}"


def trial_index(trial: Any) -> int:
    return dir_index(trial.path)


# -- the search (the driver) -----------------------------------------------------------------
def status_text(result: dict[str, Any] | None, error: BaseException | str | None) -> str:
    """completed | stopped early at frame N | errored: <the error's last line>, from a trial's
    last result and its error."""
    if error is not None:
        return f"{ERRORED} {error_line(str(error))}"
    result = result or {}
    return COMPLETED if result.get(DONE) else f"{STOPPED} {result.get(TIME_ATTR, 0)}"


def error_line(text: str) -> str:
    """The line a user needs of a trial's error as Ray records it (a traceback): its last,
    without the exception's module path."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "unknown error"
    kind, sep, message = last.partition(": ")
    return message if sep and kind.rsplit(".", 1)[-1] == TrialFailed.__name__ else last


def value_text(value: Any) -> str:
    """A searched value on a progress line: a float to 4 significant digits (the experiment
    table and the trial's spec have it in full), anything else as the spec writes it."""
    return f"{value:.4g}" if isinstance(value, float) else analysis.json_label(value)


def metric_text(x: float) -> str:
    return "nan" if x == WORST or math.isnan(x) else f"{x:.4g}"


class Progress(tune.Callback):
    """One log line per trial event: started (with its values), a reported frame, stopped
    early, finished, errored."""

    def __init__(self, name: str) -> None:
        self.name = name

    def tag(self, trial: Any) -> str:
        return f"{self.name}_t{trial_index(trial)}"

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        values = " | ".join(f"{k}={value_text(v)}" for k, v in trial.config.items())
        logger.info(f"{self.tag(trial)} started | {values}")

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        logger.info(
            f"{self.tag(trial)} reported | frame:{result[TIME_ATTR]} | {METRIC}:{metric_text(result[METRIC])}"
        )

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        status = status_text(result, None)
        word = "finished" if status == COMPLETED else status
        logger.info(f"{self.tag(trial)} {word} | {METRIC}:{metric_text(result.get(METRIC, WORST))}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        logger.error(f"{self.tag(trial)} {ERRORED} {error_line(error_text(trial))}")


def error_text(trial: Any) -> str:
    """A trial's error as Ray wrote it (a traceback), from its local error file (the copy
    get_error() reads is not synced yet)."""
    return Path(trial.error_file).read_text() if trial.error_file else ""


@dataclass(frozen=True)
class Ended:
    """A trial that will not run again: its index, status (status_text), searched values, and
    (read back by a continued search, for Optuna) its total_reward_ma."""

    index: int
    status: str
    values: dict[str, Any]
    metric: float = math.nan


class Ledger(tune.Callback):
    """The trials that have ended, old and new, each written to the partial experiment table as
    it ends: what `search@` reads back, so a search stopped or killed at any point continues
    from plain files. A trial that ends unfinished while a stop is requested was cut short by
    it (its sessions got the signal too): not ended, a continued search restarts it. The table
    written while trials run has the metrics of the completed trials only (one stopped early may
    still be writing its last rows); the table of a stop or of the end has them all."""

    def __init__(self, spec: Spec, search_dir: Path, ended: tuple[Ended, ...]) -> None:
        self.spec, self.search_dir = spec, search_dir
        self.ended = {t.index: t for t in ended}

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.add(trial, status_text(trial.last_result, None))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.add(trial, status_text(None, error_text(trial)))

    def add(self, trial: Any, status: str) -> None:
        if status != COMPLETED and stop.REQUEST.signum is not None:
            return
        index = trial_index(trial)
        self.ended[index] = Ended(index, status, dict(trial.config))
        rows = trial_rows(self.spec, self.search_dir, self.trials(), live=True)
        io.write_text(
            table_text(rows, self.spec),
            RunLayout(self.search_dir, self.spec.name).partial_experiment_df,
        )

    def trials(self) -> list[Ended]:
        return sorted(self.ended.values(), key=lambda t: t.index)


class StartWatch(tune.Callback):
    """Ends the search (WorkersCannotStart) when Ray's workers die as they start before any
    trial has started: Ray starts another worker in place of each, which dies the same way, and
    Tune would wait for them forever. Reads the raylet's log (WorkerStarts) at each of Tune's
    steps."""

    def setup(self, **info: Any) -> None:
        self.started = False
        self.starts = WorkerStarts()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.started = True

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if self.started or (reason := self.starts.failure()) is None:
            return
        command = worker_command()
        started_as = f"they start as `{command}`; " if command else ""
        raise WorkersCannotStart(
            f"Ray's workers die as they start: {reason} ({started_as}Ray's log: {self.starts.log})"
        )


@dataclass(frozen=True)
class Summary:
    """What a finished search found: a row per trial (index, status, values, trial metrics) in
    index order, and the best completed trial's row and spec file (None when none completed)."""

    trials: list[dict[str, Any]]
    best: dict[str, Any] | None
    best_spec: Path | None


def run(
    spec: Spec, search_dir: Path, log_level: str, resume: bool, keep: int = KEEP_MODELS
) -> Summary:
    """Run the search of `spec` (its seed set) in `search_dir`, or resume its unfinished trials;
    the best `keep` trials keep their model files at the end (-1: every trial)."""
    search_dir = search_dir.resolve()
    layout = RunLayout(search_dir, spec.name)
    route_ray_logs(layout.ray_log)
    # Tune's per-trial CSV and TensorBoard files: the trial folders already hold the rows (its
    # JSON results stay, as plain records of what each trial reported)
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    # Ctrl-C and SIGTERM are handled as in a train run (stop.install): one request, however
    # many times it is delivered, ends the search through Tune's graceful stop
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, spec=spec, search_dir=str(search_dir), log_level=log_level),
        {"cpu": spec.meta.trial_cpus, "gpu": spec.meta.trial_gpus},
    )
    plan = (
        continued(spec, search_dir) if resume else Plan((), (), tuple(range(spec.meta.max_trial)))
    )
    if resume:  # Tune's folder of the earlier run: never read (pickles), a new Tuner writes it
        for path in layout.search_state.glob("*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    ledger = Ledger(spec, search_dir, plan.ended)
    scheduler = spec.meta.search_scheduler
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher(spec, plan),
            scheduler=None
            if scheduler is None
            else AsyncHyperBandScheduler(
                time_attr=TIME_ATTR,
                metric=METRIC,
                mode=MODE,
                max_t=spec.env.max_frame,
                grace_period=scheduler.grace_period,
                reduction_factor=scheduler.reduction_factor,
            ),
            num_samples=len(plan.order),
            # as many trials started at once as run at once: Tune's default for a searcher
            # is one pending trial, so each trial's worker booted only after the previous
            # one was up (about 12 s apart on 2 cores)
            max_concurrent_trials=concurrent_trials(spec),
            trial_dirname_creator=TrialNames(plan.order),
            reuse_actors=True,  # a trial's worker has Python, Ray Tune and its fork server up
        ),
        run_config=tune.RunConfig(
            name=layout.search_state.name,
            storage_path=str(search_dir),
            callbacks=[Progress(spec.name), ledger, JsonLoggerCallback(), StartWatch()],
            verbose=0,
        ),
    )
    handlers = stop.install(pass_on=False, give_up=True, on_request=stop.ask_tune_to_stop)
    try:
        if plan.order:  # none when a search was killed as it finished
            tuner.fit()
    except WorkersCannotStart:
        if not resume:  # no trial ran: nothing to resume
            shutil.rmtree(search_dir)
        raise
    finally:
        signum = stop.REQUEST.signum
        stop.restore(handlers)
    ended = ledger.trials()
    if len(ended) < spec.meta.max_trial:
        so_far = trial_rows(spec, search_dir, ended)
        io.write_text(table_text(so_far, spec), layout.partial_experiment_df)
        raise SearchStopped(so_far, signum)
    return finish(spec, search_dir, ended, keep)


# -- continuing a search from its plain files ------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """The trials of a search to run: those that ended already (kept as they are), those it
    restarts from their first frame with the values they had (index, values), and the indices
    of the trials left to draw."""

    ended: tuple[Ended, ...]
    restarts: tuple[tuple[int, dict[str, Any]], ...]
    fresh: tuple[int, ...]

    @property
    def order(self) -> tuple[int, ...]:
        """The trials in the order Tune creates them: the restarted ones first (the searcher
        suggests them first), then the new ones."""
        return tuple(i for i, _ in self.restarts) + self.fresh


def continued(spec: Spec, search_dir: Path) -> Plan:
    """What a stopped or killed search has left to run, from its plain files only: the trials
    its partial table lists have ended (their metrics read from their folders); a trial folder
    it does not list, whose spec record has the searched values, is restarted; the indices
    after those, up to meta.max_trial trials in all, are drawn anew."""
    layout = RunLayout(search_dir, spec.name)
    listed = read_table(spec, layout.partial_experiment_df)
    try:
        rows = trial_rows(spec, search_dir, listed)
    except (OSError, ValueError) as e:  # a trial folder with files missing or unreadable
        raise SpecError(
            f"{search_dir}: a trial that {layout.partial_experiment_df.name} lists as ended cannot be read ({type(e).__name__}: {e}); start a new search"
        ) from None
    ended = tuple(
        Ended(t.index, t.status, t.values, row[METRIC]) for t, row in zip(listed, rows, strict=True)
    )
    done = {t.index for t in ended}
    restarts: list[tuple[int, dict[str, Any]]] = []
    for index in sorted(trial_folders(layout) - done):
        values = recorded_values(spec, layout.trial_dir(index))
        if values is not None and len(done) + len(restarts) < spec.meta.max_trial:
            restarts.append((index, values))
    taken = done | {i for i, _ in restarts}
    free = (i for i in itertools.count() if i not in taken)
    fresh = tuple(itertools.islice(free, max(spec.meta.max_trial - len(taken), 0)))
    return Plan(ended, tuple(restarts), fresh)


def read_table(spec: Spec, path: Path) -> list[Ended]:
    """The trials an experiment table (table_text) lists, in index order; none when there is
    no table. SpecError when it is not one of this search's tables."""
    if not path.exists():
        return []
    try:
        rows = list(csv.DictReader(text_io.StringIO(path.read_text())))
        ended = {
            int(row["trial"]): Ended(
                int(row["trial"]),
                row["status"],
                {p.path: json.loads(row[p.path]) for p in spec.search},
            )
            for row in rows
        }
    except (KeyError, TypeError, ValueError) as e:
        raise SpecError(
            f"{path}: not a table of this search's trials ({type(e).__name__}: {e}); restore it from the search, or start a new search"
        ) from None
    if bad := [t for t in ended.values() if t.index < 0 or not known_status(t.status)]:
        raise SpecError(
            f"{path}: trial {bad[0].index} has the status {bad[0].status!r}; a trial ends {COMPLETED}, {STOPPED} N or {ERRORED} <why>"
        )
    return sorted(ended.values(), key=lambda t: t.index)


def known_status(status: str) -> bool:
    return status == COMPLETED or status.startswith((f"{STOPPED} ", f"{ERRORED} "))


def trial_folders(layout: RunLayout) -> set[int]:
    """The indices of the trial folders in a search folder."""
    name = re.compile(re.escape(layout.name) + r"_t(\d+)")
    return {
        int(m[1])
        for path in layout.root.iterdir()
        if path.is_dir() and (m := name.fullmatch(path.name))
    }


def recorded_values(spec: Spec, trial_dir: RunLayout) -> dict[str, Any] | None:
    """The searched values a trial's spec record holds; None when it has none (the trial was
    stopped before it wrote its record) or they are not this search's paths."""
    try:
        info = record.RunInfo.of(io.read_json(trial_dir.spec_record).get("run_info", {}))
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    values = info.values
    if not isinstance(values, dict) or set(values) != {p.path for p in spec.search}:
        return None
    return values


def trial_rows(
    spec: Spec, search_dir: Path, ended: list[Ended], live: bool = False
) -> list[dict[str, Any]]:
    """A row per ended trial, in index order: its status, values and trial metrics (`live`:
    while the search runs, see trial_metrics)."""
    layout = RunLayout(search_dir, spec.name)
    return [
        {
            "trial": t.index,
            "status": t.status,
            **{p.path: t.values.get(p.path) for p in spec.search},
            **trial_metrics(spec, layout.trial_dir(t.index), t.index, t.status, live),
        }
        for t in sorted(ended, key=lambda t: t.index)
    ]


def finish(spec: Spec, search_dir: Path, ended: list[Ended], keep: int = KEEP_MODELS) -> Summary:
    """The experiment table and graph of the `ended` trials (every trial of the search), the
    best trial's spec file, and model files kept for the best `keep` trials only (-1: every
    trial). The table is written last: it marks the search finished."""
    paths = [p.path for p in spec.search]
    trials = trial_rows(spec, search_dir, ended)
    layout = RunLayout(search_dir, spec.name)
    analysis.plot_experiment(
        [t for t in trials if not math.isnan(t[METRIC])],
        paths,
        "status",
        layout.experiment_graph,
        [p.path for p in spec.search if p.dist in LOG_DISTS],
    )
    completed = [t for t in trials if t["status"] == COMPLETED and not math.isnan(t[METRIC])]
    best = max(completed, key=lambda t: t[METRIC], default=None)
    best_spec = None
    if best is not None:
        # to validate the best trial on new seeds: the seed left to be drawn (the trial's own
        # would replay seeds the search ran), named so that its run folder says what it is
        name = validation_name(spec.name, best["trial"])
        run = record.read_trial_spec(layout.trial_dir(best["trial"]), best["trial"])
        run = run.with_values({"name": name, "meta.random_seed": None})
        best_spec = layout.best_spec
        io.write_json({name: run.to_dict()}, best_spec)
    prune_models(layout, trials, keep)
    io.write_text(table_text(trials, spec), layout.experiment_df)
    layout.partial_experiment_df.unlink(missing_ok=True)  # an earlier stop's
    return Summary(trials, best, best_spec)


def kept_trials(trials: list[dict[str, Any]], keep: int) -> set[int]:
    """The indices of the trials that keep their model files: the best `keep` by
    total_reward_ma (of equal ones the lower index; a trial without the metric never), or every
    trial for -1."""
    if keep == -1:
        return {t["trial"] for t in trials}
    ranked = sorted(
        (t for t in trials if not math.isnan(t[METRIC])), key=lambda t: t[METRIC], reverse=True
    )
    return {t["trial"] for t in ranked[:keep]}


def prune_models(layout: RunLayout, trials: list[dict[str, Any]], keep: int) -> None:
    """Delete the model files of the trials that `kept_trials` leaves out."""
    kept = kept_trials(trials, keep)
    for t in trials:
        model_dir = layout.trial_dir(t["trial"]).model_dir
        if t["trial"] not in kept and model_dir.is_dir():
            for f in model_dir.iterdir():
                f.unlink()


def trial_metrics(
    spec: Spec, trial_dir: RunLayout, index: int, status: str, live: bool = False
) -> dict[str, float]:
    """A trial's metrics: those it wrote when it completed; for a trial stopped early, those of
    the rows its sessions wrote (written to its folder too, with its graph), unless `live` (its
    sessions may still be writing them); NaN otherwise."""
    if status == COMPLETED:
        return io.read_metrics(trial_dir.trial_metrics(index))
    sessions = [s for s in range(spec.meta.max_session) if trial_dir.rows_csv(index, s).exists()]
    if status.startswith(STOPPED) and sessions and not live:
        trial_spec = record.read_trial_spec(trial_dir, index)
        return analysis.write_trial_metrics(trial_spec, trial_dir, index, sessions)
    return dict.fromkeys(TRIAL_METRICS, math.nan)


def table_text(trials: list[dict[str, Any]], spec: Spec) -> str:
    """The experiment table as CSV: a searched value as the spec writes it (JSON), NaN empty."""
    out = text_io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    empty = ["trial", "status", *(p.path for p in spec.search), *TRIAL_METRICS]
    columns = list(trials[0]) if trials else empty
    writer.writerow(columns)
    for t in trials:
        writer.writerow([cell(t[c], c) for c in columns])
    return out.getvalue()


def cell(value: Any, column: str) -> str:
    if column in ("trial", "status"):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return ""
    return repr(value) if isinstance(value, float) else json.dumps(value)
