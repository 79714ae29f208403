"""Hyperparameter search, the driver: Ray Tune runs the trials, Optuna suggests their values,
ASHA stops the weak ones early. Only `search` mode imports Ray (ray_cluster), Tune and Optuna
(here and in search_trial).

A trial is a spec with the searched paths set (search_space.trial_spec), validated like a spec
file, then run as `train` runs it, `max_session` seeds in parallel, in its own run folder
`<search folder>/<name>_t<i>/`: search_trial.run_trial, in a Ray worker.

The search folder holds the trials' folders, Tune's experiment state (`tune/`, what
`search@<folder>` resumes), `log/` (the search log and Ray's own), and at the end the
experiment table, its graph and the best trial's spec.
"""

import csv
import io as text_io
import json
import math
import os
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    run_trial,
)
from slm_lab.lib import io
from slm_lab.lib.logger import logger
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_space import LOG_DISTS, SearchParam, quantize

TOP_TRIALS = 5  # rows of the closing table
# randn draws through the normal's inverse CDF of a uniform in [EPS, 1 - EPS]: +-6.4 sd
NORMAL_QUANTILE_EPS = 1e-10
# how often Tune records the experiment's state (Tune's default is every 10 s or more: a search
# killed in between resumed trials that had already finished)
TUNE_STATE_SAVE_S = 1
ENDED = ("TERMINATED", "ERROR")  # Tune's statuses of a trial that will not run again
COMPLETED, STOPPED, ERRORED = "completed", "stopped early at frame", "errored:"


class SearchStopped(Exception):
    """The search was interrupted (Ctrl-C, SIGTERM: `signum`, None when Tune stopped on its
    own) before every trial ended; Tune saved its state. `trials` has the rows of the trials
    that had ended (see trials_so_far)."""

    def __init__(self, trials: list[dict[str, Any]], signum: int | None) -> None:
        super().__init__(f"{len(trials)} trials ended")
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
        return {p.path: draw(p, trial) for p in self.params}


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


def searcher(spec: Spec) -> OptunaSearch:
    """Optuna's TPE over the spec's search space, seeded by meta.random_seed: the same search
    suggests the same trials."""
    return OptunaSearch(SearchSpace(spec.search), METRIC, MODE, seed=spec.meta.random_seed)


# -- trials' folders -------------------------------------------------------------------------
def trial_dirname(trial: Any) -> str:
    """Tune's folder of a trial: t<i>, i its 0-based creation order (Tune's experiment tag
    starts with the 1-based count)."""
    return f"t{int(trial.experiment_tag.split('_', 1)[0]) - 1}"


def trial_index(trial: Any) -> int:
    return dir_index(trial_dirname(trial))


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
        # the trial's local error file: the copy get_error() reads is not synced yet
        error = Path(trial.error_file).read_text() if trial.error_file else ""
        logger.error(f"{self.tag(trial)} {ERRORED} {error_line(error)}")


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
    # JSON results stay: the result grid reads them)
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    os.environ["TUNE_GLOBAL_CHECKPOINT_S"] = str(TUNE_STATE_SAVE_S)
    # Ctrl-C and SIGTERM are handled as in a train run (stop.install): one request, however
    # many times it is delivered, ends the search through Tune's graceful stop
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, spec=spec, search_dir=str(search_dir), log_level=log_level),
        {"cpu": spec.meta.trial_cpus, "gpu": spec.meta.trial_gpus},
    )
    if resume:
        tuner = tune.Tuner.restore(
            str(layout.search_state),
            trainable,
            resume_unfinished=True,  # restarted from their first frame
            resume_errored=False,  # an errored trial would fail the same way
            restart_errored=False,
        )
    else:
        scheduler = spec.meta.search_scheduler
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher(spec),
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
                num_samples=spec.meta.max_trial,
                # as many trials started at once as run at once: Tune's default for a searcher
                # is one pending trial, so each trial's worker booted only after the previous
                # one was up (about 12 s apart on 2 cores)
                max_concurrent_trials=concurrent_trials(spec),
                trial_dirname_creator=trial_dirname,
                reuse_actors=True,  # a trial's worker has Python, Ray Tune and its fork server up
            ),
            run_config=tune.RunConfig(
                name=layout.search_state.name,
                storage_path=str(search_dir),
                callbacks=[Progress(spec.name), JsonLoggerCallback(), StartWatch()],
                verbose=0,
            ),
        )
    handlers = stop.install(pass_on=False, give_up=True, on_request=stop.ask_tune_to_stop)
    try:
        grid = tuner.fit()
    except WorkersCannotStart:
        if not resume:  # no trial ran: nothing to resume
            shutil.rmtree(search_dir)
        raise
    finally:
        signum = stop.REQUEST.signum
        stop.restore(handlers)
    # the state Tune saved: after a Ctrl-C the trials it cut short are still running there (the
    # result grid says they terminated)
    saved = saved_trials(layout)
    if len(saved) < spec.meta.max_trial or any(t.status not in ENDED for t in saved):
        so_far = trials_so_far(spec, search_dir, saved)
        io.write_text(table_text(so_far, spec), layout.partial_experiment_df)
        raise SearchStopped(so_far, signum)
    return finish(spec, search_dir, [grid[i] for i in range(len(grid))], keep)


def saved_trials(layout: RunLayout) -> list[Any]:
    """The trials as Tune last saved them in `search_dir`."""
    return tune.ExperimentAnalysis(str(layout.search_state)).trials


def trials_so_far(spec: Spec, search_dir: Path, saved: list[Any]) -> list[dict[str, Any]]:
    """The experiment table's rows of the `saved` trials (saved_trials) that have ended: what a
    search stopped before its end has to show."""
    ended = [
        # the error as the search folder keeps it (Ray's error_file is in its session's temp
        # folder, gone after a resume), as the final table reads it
        (trial_index(t), t.last_result, t.get_pickled_error() or t.get_error(), t.config)
        for t in saved
        if t.status in ENDED
    ]
    return trial_rows(spec, search_dir, ended)


def trial_rows(
    spec: Spec,
    search_dir: Path,
    ended: list[tuple[int, dict[str, Any] | None, BaseException | str | None, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """A row per ended trial, (index, last result, error, searched values), in index order:
    its status, values and trial metrics."""
    paths = [p.path for p in spec.search]
    trials = []
    for index, result, error, config in sorted(ended, key=lambda t: t[0]):
        status = status_text(result, error)
        trials.append(
            {
                "trial": index,
                "status": status,
                **{p: config.get(p) for p in paths},
                **trial_metrics(
                    spec, RunLayout(search_dir, spec.name).trial_dir(index), index, status
                ),
            }
        )
    return trials


def finish(spec: Spec, search_dir: Path, results: list[Any], keep: int = KEEP_MODELS) -> Summary:
    """The experiment table and graph, the best trial's spec file, and model files kept for the
    best `keep` trials only (-1: every trial). The table is written last: it marks the search
    finished."""
    paths = [p.path for p in spec.search]
    trials = trial_rows(
        spec, search_dir, [(dir_index(r.path), r.metrics, r.error, r.config) for r in results]
    )
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


def trial_metrics(spec: Spec, trial_dir: RunLayout, index: int, status: str) -> dict[str, float]:
    """A trial's metrics: those it wrote when it completed; for a trial stopped early, those of
    the rows its sessions wrote (written to its folder too, with its graph); NaN otherwise."""
    if status == COMPLETED:
        return io.read_metrics(trial_dir.trial_metrics(index))
    sessions = [s for s in range(spec.meta.max_session) if trial_dir.rows_csv(index, s).exists()]
    if status.startswith(STOPPED) and sessions:
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
