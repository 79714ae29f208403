"""One trial of a search, as a Ray worker runs it (Tune's trainable, `run_trial`).

The trial's `max_session` sessions run in processes started by a fork server that has SLM Lab,
torch and matplotlib loaded; the worker itself imports no torch (this module and what it
imports are torch-free, the sessions' entry point is search_session's), so a worker boots in
the time Python, Ray and Tune take. Each session
publishes its metrics rows on a queue; once every seed has reached a reported frame the trial
reports the seeds' mean total_reward_ma at that frame to Tune, whose ASHA scheduler
(meta.search_scheduler) stops or continues the whole trial. A stopped trial's sessions get
SIGTERM and save and stop as on Ctrl-C.
"""

import math
import os
import queue
import shutil
import sys
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ray import tune

from slm_lab.experiment import analysis, search_session
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup
from slm_lab.spec import search_space, spec_util
from slm_lab.spec.schema import Spec
from slm_lab.spec.spec_util import SpecError

METRIC, MODE, TIME_ATTR = "total_reward_ma", "max", "frame"
# what a trial reports while its metric is NaN (no finished episode yet): the lowest finite
# float, since ASHA and Optuna compare the values and NaN compares false with everything
WORST = -sys.float_info.max
POLL_S = 1.0  # how often a trial looks at its session processes while it waits for rows
STOP_TIMEOUT_S = 30.0  # a stopped session saves its state within this, or it is killed
FORKSERVER_PRELOAD = ["slm_lab.experiment.control", "matplotlib.figure"]
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
    metrics, _ = analysis.write_trial(loaded, trial_dir, index, sorted(results))
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
            target=search_session.run,
            args=(rows, os.getpid(), spec, str(trial_dir), trial, s, log_level),
            name=analysis.prefix(spec, trial, s),
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
                        f"{analysis.prefix(spec, trial, s)} died (exit code {code})"
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
            raise TrialFailed(f"{analysis.prefix(spec, trial, s)} failed: {payload}")
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
