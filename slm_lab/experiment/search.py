"""Hyperparameter search: Ray Tune runs the trials, Optuna suggests their values, ASHA stops the
weak ones early. Ray and Optuna are imported here only, so only `search` mode loads them.

A trial is a spec with the searched paths set (search_space.trial_spec), validated like a spec
file, then run as `train` runs it: `max_session` seeds in parallel processes, in its own run
folder `<search folder>/<name>_t<i>/`. Each session publishes its metrics rows on a queue; once
every seed has reached a checkpoint frame the trial reports the seeds' mean total_reward_ma at
that frame to Tune, whose ASHA scheduler (meta.search_scheduler) stops or continues the whole
trial. A stopped trial's sessions get SIGTERM and save and stop as on Ctrl-C.

The search folder holds the trials' folders, Tune's experiment state (`tune/`, what
`search@<folder>` resumes), `log/` (the search log and Ray's own), and at the end the
experiment table, its graph and the best trial's spec.
"""

import csv
import io as text_io
import json
import logging
import logging.handlers
import math
import os
import queue
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.logger import JsonLoggerCallback
from ray.tune.schedulers import AsyncHyperBandScheduler
from ray.tune.search.optuna import OptunaSearch

from slm_lab.experiment import analysis, control
from slm_lab.experiment.analysis import TRIAL_METRICS
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup
from slm_lab.lib.logger import logger
from slm_lab.lib.util import machine_cpus, machine_gpus
from slm_lab.spec import schema, search_space, spec_util
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_space import SearchParam, quantize
from slm_lab.spec.spec_util import SpecError

METRIC, MODE, TIME_ATTR = "total_reward_ma", "max", "frame"
# what a trial reports while its metric is NaN (no finished episode yet): the lowest finite
# float, since ASHA and Optuna compare the values and NaN compares false with everything
WORST = -sys.float_info.max
TUNE_DIR = io.SEARCH_STATE_DIR  # Tune's experiment state in the search folder: what resumes it
KEEP_MODELS = 3  # trials that keep their model files, by total_reward_ma
TOP_TRIALS = 5  # rows of the closing table
POLL_S = 1.0  # how often a trial looks at its session processes while it waits for rows
STOP_TIMEOUT_S = 30.0  # a stopped session saves its state within this, or it is killed
# randn draws through the normal's inverse CDF of a uniform in [EPS, 1 - EPS]: +-6.4 sd
NORMAL_QUANTILE_EPS = 1e-10
FORKSERVER_PRELOAD = ["slm_lab.experiment.control", "matplotlib.figure"]
# how often Tune records the experiment's state (Tune's default is every 10 s or more: a search
# killed in between resumed trials that had already finished)
TUNE_STATE_SAVE_S = 1
# a trial reports at about every 1/PROGRESS_REPORTS of its frames and at ASHA's rungs, not at
# every checkpoint: each report costs the trial's worker and the driver (scheduler, searcher,
# state) more than a small trial's checkpoint costs its sessions
PROGRESS_REPORTS = 10
DONE = "trial_done"  # in a trial's last report: its sessions finished and its metrics are written
ENDED = ("TERMINATED", "ERROR")  # Tune's statuses of a trial that will not run again
COMPLETED, STOPPED, ERRORED = "completed", "stopped early at frame", "errored:"


class SearchStopped(Exception):
    """The search was interrupted (Ctrl-C) before every trial ended; Tune saved its state."""


class TrialFailed(Exception):
    """A trial's spec did not validate, or one of its sessions raised or died; the message is
    the one line the experiment table shows."""


@dataclass(frozen=True)
class SearchSpace:
    """Optuna's define-by-run space: each searched path drawn from its distribution. Values that
    Optuna cannot draw directly (normal, quantized, any JSON choice) are drawn through one it
    can, under the same name, and returned transformed; the returned value is what the trial
    gets."""

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
        case "randint":
            return trial.suggest_int(name, a[0], a[1] - 1)
        case "qrandint":
            return a[2] * trial.suggest_int(name, math.ceil(a[0] / a[2]), a[1] // a[2])
        case "lograndint":
            return trial.suggest_int(name, a[0], a[1] - 1, log=True)
        case "qlograndint":
            return round(trial.suggest_int(name, a[0], a[1], log=True) / a[2]) * a[2]
        case "choice":
            return a[trial.suggest_categorical(name, list(range(len(a))))]
    raise ValueError(f"{p.key}: unknown distribution")  # parse() admits none other


def searcher(spec: Spec) -> OptunaSearch:
    """Optuna's TPE over the spec's search space, seeded by meta.random_seed: the same search
    suggests the same trials."""
    return OptunaSearch(SearchSpace(spec.search), METRIC, MODE, seed=spec.meta.random_seed)


# -- Ray -------------------------------------------------------------------------------------
# Ray's and Optuna's Python logs: held from the start, written to the search's log folder once
# it exists (route_ray_logs), never to the terminal
RAY_LOGS = logging.handlers.MemoryHandler(capacity=1, flushLevel=logging.DEBUG)
# py.warnings: Python warnings, as logging.captureWarnings routes them (Optuna warns, e.g., when
# a resumed trial reports a step again)
RAY_LOGGERS = ("ray", "optuna", "py.warnings")


def start_ray() -> bool:
    """Connect to the cluster RAY_ADDRESS names, else start Ray on this machine (no dashboard,
    workers' output kept off the terminal); True when this call started it. An already started
    Ray (a test's) is used as it is."""
    if RAY_LOGS.target is not None:  # the previous search's, in the same process
        RAY_LOGS.target.close()
        RAY_LOGS.setTarget(None)
    logging.captureWarnings(True)
    for name in RAY_LOGGERS:
        log = logging.getLogger(name)
        log.handlers = [RAY_LOGS]
        log.propagate = False
    if ray.is_initialized():
        return False
    common = {"log_to_driver": False, "logging_level": logging.INFO}
    if address := os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, **common)
    else:
        ray.init(
            num_cpus=machine_cpus(), num_gpus=machine_gpus(), include_dashboard=False, **common
        )
    return True


def stop_ray() -> None:
    ray.shutdown()


def check_cluster(spec: Spec) -> None:
    """The trial resources against the cluster's (SpecError), when RAY_ADDRESS names one."""
    if address := os.environ.get("RAY_ADDRESS"):
        have = ray.cluster_resources()
        where = f"the cluster at {address}"
        spec_util.check_trial_resources(spec.meta, have.get("CPU", 0), have.get("GPU", 0), where)


def concurrent_trials(spec: Spec) -> int:
    """How many trials of `spec` the cluster runs at once, by CPUs (and GPUs when a trial asks
    for some); at least 1 and at most max_trial."""
    have = ray.cluster_resources()
    fits = have.get("CPU", 1) / spec.meta.trial_cpus
    if spec.meta.trial_gpus > 0:
        fits = min(fits, have.get("GPU", 0) / spec.meta.trial_gpus)
    return max(1, min(spec.meta.max_trial, int(fits + 1e-9)))


def route_ray_logs(search_dir: Path) -> None:
    """Ray's, Tune's and Optuna's Python logs (those held so far, and the rest) to the search's
    log folder. Tune's console report is off (verbose 0, its legacy reporter, which honours it)."""
    RAY_LOGS.setTarget(logging.FileHandler(search_dir / "log" / "ray.log"))
    RAY_LOGS.flush()
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"


# -- one trial (in a Ray worker) -------------------------------------------------------------
def trial_dirname(trial: Any) -> str:
    """Tune's folder of a trial: t<i>, i its 0-based creation order (Tune's experiment tag
    starts with the 1-based count)."""
    return f"t{int(trial.experiment_tag.split('_', 1)[0]) - 1}"


def trial_index(trial: Any) -> int:
    return dir_index(trial_dirname(trial))


def dir_index(dirname: str | Path) -> int:
    """i of Tune's trial folder t<i> (a name or a path)."""
    return int(Path(dirname).name[1:])


def run_trial(
    config: dict[str, Any], spec: dict[str, Any], search_dir: str, log_level: str
) -> None:
    """Tune's trainable: one trial of the search, reporting as its seeds progress."""
    index = dir_index(tune.get_context().get_trial_dir())
    name = spec["name"]
    trial_dir = Path(search_dir) / f"{name}_t{index}"
    shutil.rmtree(trial_dir, ignore_errors=True)  # a resumed search reruns it from the start
    for sub in ("info", "graph", "log", "model"):
        (trial_dir / sub).mkdir(parents=True, exist_ok=True)
    log_setup.setup(log_level, tag=f"{name}_t{index}")
    log_setup.add_file(str(trial_dir / "log" / "run.log"), log_level)
    values = {p: config[p] for p in search_space.paths(spec)}
    run = search_space.trial_spec(spec, values)
    record = {
        **run,
        "run_info": {"mode": "search", "search_dir": search_dir, "trial": index, "values": values},
    }
    io.write_json(record, trial_dir / f"{name}_spec.json")
    io.write_json(run, trial_dir / f"{name}_t{index}_spec.json")
    try:
        loaded = spec_util.validate(run, name)
    except SpecError as e:
        raise TrialFailed(str(e)) from None
    results = run_seeds(loaded, trial_dir, index, log_level)
    if stopped := [r["stopped_at"] for r in results.values() if "stopped_at" in r]:
        raise TrialFailed(f"stopped by a signal at frame {int(min(stopped))}")
    metrics = control.Trial(loaded, trial_dir, index, log_level=log_level).analyze(sorted(results))
    tune.report({TIME_ATTR: int(metrics["frame"]), METRIC: finite(metrics[METRIC]), DONE: True})


def finite(x: float) -> float:
    return WORST if math.isnan(x) else float(x)


def run_seeds(
    spec: Spec, trial_dir: Path, trial: int, log_level: str
) -> dict[int, dict[str, float]]:
    """The trial's sessions in parallel processes; reports each checkpoint frame all of them
    reached (the last one is reported by the caller, with the trial's metrics). Returns each
    session's metrics; TrialFailed when one raised or died."""
    # a fork server with SLM Lab, torch and matplotlib loaded starts the sessions: a fresh
    # interpreter per session (spawn) took most of a small trial's time; it stays up for the
    # next trial this Ray worker runs
    ctx = get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    rows: queue.Queue = ctx.Queue()
    threads = spec.meta.num_threads
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    procs = {
        s: ctx.Process(
            target=control.publishing_session,
            args=(rows, os.getpid(), spec, str(trial_dir), trial, s, log_level),
            name=control.prefix(spec, trial, s),
        )
        for s in range(spec.meta.max_session)
    }
    for p in procs.values():
        p.start()
    try:
        return follow(rows, procs, spec, trial)
    finally:
        end_sessions(procs, rows)


def report_frames(spec: Spec) -> list[int]:
    """The frames below max_frame at which a trial reports (the first checkpoint at or after
    each): every 1/PROGRESS_REPORTS of max_frame and, with a scheduler, each of ASHA's rungs
    (grace_period x reduction_factor^k), so that ASHA compares the trials at its own frames."""
    max_frame = spec.env.max_frame
    frames = {max_frame * i // PROGRESS_REPORTS for i in range(1, PROGRESS_REPORTS)}
    if (scheduler := spec.meta.search_scheduler) is not None:
        rung = scheduler.grace_period
        while rung < max_frame:
            frames.add(rung)
            rung *= scheduler.reduction_factor
    return sorted(frames)


def follow(
    rows: queue.Queue, procs: dict[int, Any], spec: Spec, trial: int
) -> dict[int, dict[str, float]]:
    at_frame: dict[int, dict[int, float]] = {}  # frame -> session -> total_reward_ma
    due = report_frames(spec)  # what is left of them
    results: dict[int, dict[str, float]] = {}
    dead_before: dict[int, int] = {}
    while len(results) < len(procs):
        try:
            kind, s, payload = rows.get(timeout=POLL_S)
        except queue.Empty:
            # a process that exited without a last message (killed, out of memory); seen on two
            # polls in a row, since an exiting process's last message may still be in the pipe
            dead = {
                s: p.exitcode
                for s, p in procs.items()
                if s not in results and p.exitcode is not None
            }
            for s, code in dead.items():
                if s in dead_before:
                    raise TrialFailed(
                        f"{control.prefix(spec, trial, s)} died (exit code {code})"
                    ) from None
            dead_before = dead
            continue
        if kind == "row":
            frame, ma = payload
            seeds = at_frame.setdefault(frame, {})
            seeds[s] = ma
            if len(seeds) == len(procs):
                del at_frame[frame]
                if due and due[0] <= frame < spec.env.max_frame:
                    due = [f for f in due if f > frame]
                    tune.report({TIME_ATTR: frame, METRIC: finite(mean_of(seeds.values()))})
        elif kind == "failed":
            raise TrialFailed(f"{control.prefix(spec, trial, s)} failed: {payload}")
        else:
            results[s] = payload
    return results


def mean_of(values: Any) -> float:
    """The mean of the values that are not NaN (a seed without a finished episode yet is left
    out); NaN when none is."""
    have = [v for v in values if not math.isnan(v)]
    return sum(have) / len(have) if have else math.nan


def end_sessions(procs: dict[int, Any], rows: queue.Queue) -> None:
    """Stop the sessions still running (SIGTERM: each saves its state and stops, as on Ctrl-C),
    wait for every process to exit (reading the queue, so none blocks on a full pipe), and kill
    one that does not within STOP_TIMEOUT_S."""
    for p in procs.values():
        if p.exitcode is None:
            p.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in procs.values():
        while p.exitcode is None and time.monotonic() < deadline:
            drain(rows)
            p.join(POLL_S)
        if p.exitcode is None:
            p.kill()
            p.join()
    drain(rows)


def drain(rows: queue.Queue) -> None:
    while True:
        try:
            rows.get_nowait()
        except queue.Empty:
            return


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


@dataclass(frozen=True)
class Summary:
    """What a finished search found: a row per trial (index, status, values, trial metrics) in
    index order, and the best completed trial's row and spec file (None when none completed)."""

    trials: list[dict[str, Any]]
    best: dict[str, Any] | None
    best_spec: Path | None


def run(spec: dict[str, Any], search_dir: Path, log_level: str, resume: bool) -> Summary:
    """Run the search of `spec` (its seed set) in `search_dir`, or resume its unfinished trials."""
    loaded = schema.load(spec, spec["name"])
    search_dir = search_dir.resolve()
    route_ray_logs(search_dir)
    # Tune's per-trial CSV and TensorBoard files: the trial folders already hold the rows (its
    # JSON results stay: the result grid reads them)
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    os.environ["TUNE_GLOBAL_CHECKPOINT_S"] = str(TUNE_STATE_SAVE_S)
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, spec=spec, search_dir=str(search_dir), log_level=log_level),
        {"cpu": loaded.meta.trial_cpus, "gpu": loaded.meta.trial_gpus},
    )
    if resume:
        tuner = tune.Tuner.restore(
            str(search_dir / TUNE_DIR),
            trainable,
            resume_unfinished=True,  # restarted from their first frame
            resume_errored=False,  # an errored trial would fail the same way
            restart_errored=False,
        )
    else:
        scheduler = loaded.meta.search_scheduler
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher(loaded),
                scheduler=None
                if scheduler is None
                else AsyncHyperBandScheduler(
                    time_attr=TIME_ATTR,
                    metric=METRIC,
                    mode=MODE,
                    max_t=loaded.env.max_frame,
                    grace_period=scheduler.grace_period,
                    reduction_factor=scheduler.reduction_factor,
                ),
                num_samples=loaded.meta.max_trial,
                # as many trials started at once as run at once: Tune's default for a searcher
                # is one pending trial, so each trial's worker booted only after the previous
                # one was up (about 12 s apart on 2 cores)
                max_concurrent_trials=concurrent_trials(loaded),
                trial_dirname_creator=trial_dirname,
                reuse_actors=True,  # a trial's worker has Python, torch and SLM Lab loaded
            ),
            run_config=tune.RunConfig(
                name=TUNE_DIR,
                storage_path=str(search_dir),
                callbacks=[Progress(loaded.name), JsonLoggerCallback()],
                verbose=0,
            ),
        )
    grid = tuner.fit()
    # the state Tune saved: after a Ctrl-C the trials it cut short are still running there (the
    # result grid says they terminated)
    saved = tune.ExperimentAnalysis(str(search_dir / TUNE_DIR)).trials
    if len(saved) < loaded.meta.max_trial or any(t.status not in ENDED for t in saved):
        raise SearchStopped()
    return finish(loaded, search_dir, [grid[i] for i in range(len(grid))])


def finish(spec: Spec, search_dir: Path, results: list[Any]) -> Summary:
    """The experiment table and graph, the best trial's spec file, and model files kept for the
    best KEEP_MODELS trials only. The table is written last: it marks the search finished."""
    paths = [p.path for p in spec.search]
    trials = []
    for index, result in sorted((dir_index(r.path), r) for r in results):
        status = status_text(result.metrics, result.error)
        trials.append(
            {
                "trial": index,
                "status": status,
                **{p: result.config.get(p) for p in paths},
                **trial_metrics(spec, search_dir / f"{spec.name}_t{index}", index, status),
            }
        )
    analysis.plot_experiment(
        [t for t in trials if not math.isnan(t[METRIC])],
        paths,
        "status",
        search_dir / f"{spec.name}_experiment_graph.png",
    )
    completed = [t for t in trials if t["status"] == COMPLETED and not math.isnan(t[METRIC])]
    best = max(completed, key=lambda t: t[METRIC], default=None)
    best_spec = None
    if best is not None:
        trial_dir = search_dir / f"{spec.name}_t{best['trial']}"
        run = io.read_json(trial_dir / f"{spec.name}_t{best['trial']}_spec.json")
        best_spec = search_dir / f"{spec.name}_best_spec.json"
        io.write_json({spec.name: run}, best_spec)
    ranked = sorted(
        (t for t in trials if not math.isnan(t[METRIC])), key=lambda t: t[METRIC], reverse=True
    )
    keep = {t["trial"] for t in ranked[:KEEP_MODELS]}
    for t in trials:
        model_dir = search_dir / f"{spec.name}_t{t['trial']}" / "model"
        if t["trial"] not in keep and model_dir.is_dir():
            for f in model_dir.iterdir():
                f.unlink()
    io.write_text(table_text(trials), search_dir / io.EXPERIMENT_DF)
    return Summary(trials, best, best_spec)


def trial_metrics(spec: Spec, trial_dir: Path, index: int, status: str) -> dict[str, float]:
    """A trial's metrics: those it wrote when it completed; for a trial stopped early, those of
    the rows its sessions wrote (written to its folder too, with its graph); NaN otherwise."""
    pre = control.prefix(spec, index)
    if status == COMPLETED:
        return io.read_json(trial_dir / "info" / f"{pre}_trial_metrics.json")
    sessions = [
        s
        for s in range(spec.meta.max_session)
        if (trial_dir / "info" / f"{control.prefix(spec, index, s)}_session_df.csv").exists()
    ]
    if status.startswith(STOPPED) and sessions:
        trial_spec = schema.load(io.read_json(trial_dir / f"{pre}_spec.json"), spec.name)
        return control.Trial(trial_spec, trial_dir, index).write_metrics(sessions, "session_df", "")
    return dict.fromkeys(TRIAL_METRICS, math.nan)


def table_text(trials: list[dict[str, Any]]) -> str:
    """The experiment table as CSV: a searched value as the spec writes it (JSON), NaN empty."""
    out = text_io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    columns = list(trials[0]) if trials else ["trial", "status"]
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
