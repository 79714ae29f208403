"""One trial of a search, as a Ray worker runs it (Tune's trainable, `run_trial`).

The trial's `max_session` sessions run in the session pool (experiment/pool.py), whose fork
server has SLM Lab, torch and matplotlib loaded; the worker itself imports no torch (this
module and what it imports are torch-free), so a worker boots in the time Python, Ray and Tune
take. Each session publishes its metrics rows; once every seed has reached a reported frame the
trial reports the seeds' mean total_reward_ma at that frame to Tune, whose ASHA scheduler
(meta.search_scheduler) stops or continues the whole trial. A stopped trial's sessions get
SIGTERM and save and stop as on Ctrl-C.
"""

import math
import shutil
import sys
from pathlib import Path
from typing import Any

from ray import tune

from slm_lab.experiment import record
from slm_lab.experiment.analysis import write_trial
from slm_lab.experiment.layout import RunLayout, prefix
from slm_lab.experiment.pool import SessionPool
from slm_lab.experiment.task import SessionTask
from slm_lab.lib import logger as log_setup
from slm_lab.spec import spec_util
from slm_lab.spec.schema import Spec
from slm_lab.spec.spec_util import SpecError

METRIC, MODE, TIME_ATTR = "total_reward_ma", "max", "frame"
# what a trial reports while its metric is NaN (no finished episode yet): the lowest finite
# float, since ASHA and Optuna compare the values and NaN compares false with everything
WORST = -sys.float_info.max
# a trial reports at about every 1/PROGRESS_REPORTS of its frames and at ASHA's rungs, not at
# every checkpoint: each report costs the trial's worker and the driver (scheduler, searcher,
# state) more than a small trial's checkpoint costs its sessions
PROGRESS_REPORTS = 10
DONE = "trial_done"  # in a trial's last report: its sessions finished and its metrics are written


class TrialFailed(Exception):
    """A trial's spec did not validate, or one of its sessions raised or died; the message is
    the one line the experiment table shows."""


def dir_index(dirname: str | Path) -> int:
    """i of Tune's trial folder t<i> (a name or a path)."""
    return int(Path(dirname).name[1:])


def run_trial(config: dict[str, object], spec: Spec, search_dir: str, log_level: str) -> None:
    """Tune's trainable: one trial of the search, reporting as its seeds progress."""
    index = dir_index(tune.get_context().get_trial_dir())
    layout = RunLayout(Path(search_dir), spec.name).trial_dir(index)
    shutil.rmtree(layout.root, ignore_errors=True)  # a resumed search reruns it from the start
    layout.make()
    log_setup.setup(log_level, tag=prefix(spec.name, index))
    log_setup.add_file(str(layout.run_log), log_level)
    values = {p.path: config[p.path] for p in spec.search}
    try:
        trial = spec.trial(values)
        info = record.RunInfo("search", trial=index, search_dir=search_dir, values=values)
        record.write(layout, trial, info, index)
        spec_util.check_typed(trial)
    except SpecError as e:
        raise TrialFailed(str(e)) from None
    results = run_seeds(trial, layout, index, log_level)
    if stopped := [r["stopped_at"] for r in results.values() if "stopped_at" in r]:
        raise TrialFailed(f"stopped by a signal at frame {int(min(stopped))}")
    metrics, _ = write_trial(trial, layout, index, sorted(results))
    tune.report({TIME_ATTR: int(metrics["frame"]), METRIC: finite(metrics[METRIC]), DONE: True})


def finite(x: float) -> float:
    return WORST if math.isnan(x) else float(x)


def run_seeds(
    spec: Spec, layout: RunLayout, trial: int, log_level: str
) -> dict[int, dict[str, float]]:
    """The trial's sessions in the session pool; reports each checkpoint frame all of them
    reached (the last one is reported by the caller, with the trial's metrics). Returns each
    session's metrics; TrialFailed when one raised or died."""
    tasks = [
        SessionTask(spec, layout.root, trial, s, resumable=False)
        for s in range(spec.meta.max_session)
    ]
    pool = SessionPool(tasks, log_level)
    results = pool.run(Reporter(spec, len(tasks)), fail_fast=True)
    for s, reason in pool.errors.items():
        raise TrialFailed(f"{prefix(spec.name, trial, s)} {_failure(reason)}")
    return results


def _failure(reason: str) -> str:
    return reason if reason.startswith("died") else f"failed: {reason}"


class Reporter:
    """Follows the sessions' rows; reports a frame's mean total_reward_ma to Tune once every
    seed has reached it, at the frames `report_frames` names."""

    def __init__(self, spec: Spec, seeds: int) -> None:
        self.max_frame, self.seeds = spec.env.max_frame, seeds
        self.at_frame: dict[int, dict[int, float]] = {}  # frame -> session -> total_reward_ma
        self.due = report_frames(spec)  # what is left of them

    def __call__(self, session: int, frame: int, ma: float) -> None:
        seeds = self.at_frame.setdefault(frame, {})
        seeds[session] = ma
        if len(seeds) == self.seeds:
            del self.at_frame[frame]
            if self.due and self.due[0] <= frame < self.max_frame:
                self.due = [f for f in self.due if f > frame]
                tune.report({TIME_ATTR: frame, METRIC: finite(mean_of(seeds.values()))})


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


def mean_of(values: Any) -> float:
    """The mean of the values that are not NaN (a seed without a finished episode yet is left
    out); NaN when none is."""
    have = [v for v in values if not math.isnan(v)]
    return sum(have) / len(have) if have else math.nan
