"""Ray for the search: started on this machine or joined on a cluster (RAY_ADDRESS), its logs
kept off the terminal, the cluster's resources, and why its workers fail to start. Imports no
Ray Tune, so a search can start Ray while Tune and Optuna import.
"""

import contextlib
import logging
import logging.handlers
import os
import re
import signal
from collections.abc import MutableMapping
from pathlib import Path

import psutil

from slm_lab.lib import util
from slm_lab.lib.util import machine_cpus, machine_gpus
from slm_lab.spec import spec_util
from slm_lab.spec.schema import Spec

# Ray's switch for its uv hook, read once, when Ray is imported
UV_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def keep_workers_on_this_python(environ: MutableMapping[str, str]) -> None:
    """Ray's workers on the cluster a search starts run the search's own Python and
    environment, however the search was started. Ray's uv hook, when it finds `uv run` among
    the driver's parent processes, starts each worker as that `uv run` command in a copy of
    the working directory, where uv makes an environment of its own (an empty one with
    --no-sync: the workers die before they register, and Tune waits for them forever). A
    cluster that RAY_ADDRESS names keeps Ray's choice, and a UV_HOOK the user set is kept."""
    if not environ.get("RAY_ADDRESS"):
        environ.setdefault(UV_HOOK, "0")


keep_workers_on_this_python(os.environ)

# Ray's setting for its workers' niceness: added to the niceness they inherit (15 unless set)
WORKER_NICENESS = "RAY_worker_niceness"


def keep_workers_at_this_priority(environ: MutableMapping[str, str]) -> None:
    """The trials' workers on the cluster a search starts run at the search's own niceness (they
    inherit it), as a `train` run's sessions do. Ray adds 15 to it, to keep its daemons
    responsive on a busy cluster; on a machine that other work keeps busy, that starves a
    search's sessions (a 100-frame CartPole trial took 3 minutes beside a training run on 2
    cores). `nice slm-lab run ... search` still runs them nice. A cluster that RAY_ADDRESS names
    keeps its own setting, and a WORKER_NICENESS the user set is kept."""
    if not environ.get("RAY_ADDRESS"):
        environ.setdefault(WORKER_NICENESS, "0")


import ray  # noqa: E402  (after UV_HOOK is set)

# Ray's and Optuna's Python logs: held from the start, written to the search's log folder once
# it exists (route_ray_logs), never to the terminal
RAY_LOGS = logging.handlers.MemoryHandler(capacity=1, flushLevel=logging.DEBUG)
# py.warnings: Python warnings, as logging.captureWarnings routes them (Optuna warns, e.g., when
# a resumed trial reports a step again)
RAY_LOGGERS = ("ray", "optuna", "py.warnings")


def start_ray(preload: str) -> bool:
    """Connect to the cluster RAY_ADDRESS names, else start Ray on this machine (no dashboard,
    workers on this Python, their output kept off the terminal); True when this call started
    it. An already started Ray (a test's) is used as it is. `preload`, a module, is imported in
    a thread meanwhile: Ray's start is mostly waiting for its own processes, the search's
    imports (Tune, Optuna) are work, so the two overlap. An import error shows when the caller
    imports the module."""
    if RAY_LOGS.target is not None:  # the previous search's, in the same process
        RAY_LOGS.target.close()
        RAY_LOGS.setTarget(None)
    logging.captureWarnings(True)
    hold_logs()
    loader = util.preload(preload)
    try:
        return init_ray()
    finally:
        loader.join()
        hold_logs()  # Optuna adds its own terminal handler when it is first imported


def hold_logs() -> None:
    for name in RAY_LOGGERS:
        log = logging.getLogger(name)
        log.handlers = [RAY_LOGS]
        log.propagate = False


def init_ray() -> bool:
    if ray.is_initialized():
        return False
    common = {"log_to_driver": False, "logging_level": logging.INFO}
    if address := os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, **common)
    else:
        # Ray's daemons (GCS, raylet) start in this process's group. A signal to the whole
        # group (`timeout`, a scheduler) must reach this driver, which stops the search
        # through them, and not kill them under it: they start with SIGTERM blocked, as Ray
        # starts them with SIGINT blocked.
        keep_workers_at_this_priority(os.environ)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            ray.init(
                num_cpus=machine_cpus(), num_gpus=machine_gpus(), include_dashboard=False, **common
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return True


def stop_ray() -> None:
    """Disconnect from Ray, and end the processes of a Ray this process started. Its daemons
    run with SIGTERM blocked (init_ray), so Ray's graceful stop (SIGTERM, then a second's wait
    before SIGKILL, daemon by daemon) waited out 4-5 s on every search: they get SIGKILL at
    once, as they would a second later, and so do the agents the raylet started (they outlive
    a raylet killed at once)."""
    node = getattr(ray._private.worker, "_global_node", None)  # Ray's own handle on what it started
    if node is None or os.environ.get("RAY_ADDRESS"):
        ray.shutdown()
        return
    spawned = []
    for _, daemon in node.live_processes():
        with contextlib.suppress(psutil.Error):
            spawned += psutil.Process(daemon.pid).children(recursive=True)
    kill_all = node.kill_all_processes
    node.kill_all_processes = lambda **kw: kill_all(**{**kw, "allow_graceful": False})
    ray.shutdown()
    for process in spawned:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(spawned, timeout=5)


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


def route_ray_logs(path: Path) -> None:
    """Ray's, Tune's and Optuna's Python logs (those held so far, and the rest) to `path`, in
    the search's log folder. Tune's console report is off (verbose 0, its legacy reporter, which honours it)."""
    RAY_LOGS.setTarget(logging.FileHandler(path))
    RAY_LOGS.flush()
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"


# A worker's output goes to its raylet's stderr log until the worker has registered. What a
# worker that could not start leaves there: Python's traceback (its exception line says why),
# Python's fatal error, uv's error; and the raylet's own line for a worker that did not register.
TRACEBACK = "Traceback (most recent call last):"
START_ERRORS = ("Fatal Python error:", "error:")
NOT_REGISTERED = re.compile(r"\(raylet\) \S+: (.* have not registered within the timeout\..*)")


def start_failure(text: str) -> str | None:
    """The line of a raylet's stderr `text` that says why a worker could not start (None when
    no worker failed, or its traceback is not written out yet)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(TRACEBACK):
            return next((x for x in lines[i + 1 :] if x and not x[0].isspace()), None)
        if line.startswith(START_ERRORS):
            return line
        if registered := NOT_REGISTERED.search(line):
            return registered.group(1)
    return None


class WorkerStarts:
    """The workers that die as they start on this machine, as its raylet logs them since this
    was made (the other nodes of a cluster log theirs on their own machines)."""

    def __init__(self) -> None:
        # Ray has no public API for its session's log folder
        logs = ray._private.worker.global_worker.node.get_logs_dir_path()
        self.log = Path(logs) / "raylet.err"
        self.start = self.read_to = self.log.stat().st_size

    def failure(self) -> str | None:
        """Why a worker could not start (start_failure), or None."""
        size = self.log.stat().st_size
        if size == self.read_to:
            return None
        self.read_to = size
        with self.log.open("rb") as f:
            f.seek(self.start)
            return start_failure(f.read(size - self.start).decode(errors="replace"))


def worker_command() -> str | None:
    """The command this job's workers start with, when it is not the cluster's Python (Ray's uv
    hook sets one)."""
    return ray.get_runtime_context().runtime_env.get("py_executable")
