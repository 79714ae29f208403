"""Sessions in parallel processes: the one pool that `train` trials and search trials use.

Session processes start from a fork server that has the session module (torch, nets, envs)
and matplotlib loaded, so a session starts in milliseconds instead of importing them again.
A session watches the run's process (the process that made the pool: a trial's CLI process,
a search trial's Ray worker) and sends itself SIGTERM when it ends, however it ends: the session
then saves and stops, as on Ctrl-C, so no session outlives its run. (Its parent is the fork
server, whose end cannot tell: the fork server lives on while any session it started does.) A
session puts its messages on one queue: its metrics rows when the caller follows them, then its metrics, the frame a signal
stopped it at, or its error's last line.

This module imports no torch: the caller stays light, the fork server holds the heavy imports.
"""

import dataclasses
import os
import queue
import select
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing import get_context
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path

import psutil

from slm_lab.env import registry
from slm_lab.experiment import stop
from slm_lab.experiment.task import SessionTask, SharedNets
from slm_lab.lib import logger as log_setup

FORKSERVER_PRELOAD = ["slm_lab.experiment.session", "matplotlib.figure"]
POLL_S = 1.0  # how often the pool looks at its processes while it waits for messages
STOP_TIMEOUT_S = 30.0  # a session told to stop saves its state within this, or it is killed
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
HOGWILD_LAYOUT = "layout.json"  # experiment/hogwild.py's LAYOUT_FILE: the global nets are there

# what a session's row handler gets: the session index, and the row's frame and total_reward_ma
RowHandler = Callable[[int, int, float], None]


class SessionPool:
    """Runs `tasks` (one session each) in parallel processes."""

    def __init__(self, tasks: list[SessionTask], log_level: str) -> None:
        self.tasks = tasks
        self.log_level = log_level
        self.errors: dict[int, str] = {}  # session index -> its error's last line

    def run(
        self, on_row: RowHandler | None = None, fail_fast: bool = False
    ) -> dict[int, dict[str, float]]:
        """Each session's metrics ({"stopped_at": frame} for one a signal stopped); the ones
        that raised or died are in `errors`. `on_row` follows the sessions' rows as they come
        (it may raise to end the run); `fail_fast` ends the run at the first error. Sessions
        still running when it returns or raises get SIGTERM and save and stop."""
        threads = str(self.tasks[0].spec.meta.num_threads)
        for var in THREAD_VARS:
            os.environ[var] = threads
        ctx = get_context("forkserver")
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
        tasks = self.tasks
        if tasks[0].spec.meta.hogwild and tasks[0].placement.shared is None:
            tasks = self.share(ctx, tasks)
            if tasks is None:
                return {}
        messages = ctx.Queue()
        procs = {
            t.session: ctx.Process(
                target=_session_process,
                args=(
                    messages,
                    os.getpid(),
                    t,
                    self.log_level,
                    on_row is not None,
                    registry.FAMILIES,
                ),
                name=t.prefix,
            )
            for t in tasks
        }
        for p in procs.values():
            p.start()
        try:
            return self.follow(messages, procs, on_row, fail_fast)
        finally:
            _end(procs, messages)

    def share(self, ctx: BaseContext, tasks: list[SessionTask]) -> list[SessionTask] | None:
        """A Hogwild trial's tasks: each worker runs max_frame / workers frames on the trial's
        global nets, which a process of its own writes to the trial's folder first (a resumed
        trial's are there already). None, with every session's error, when that fails."""
        first, workers = tasks[0], len(tasks)
        spec = first.spec
        directory = first.layout.hogwild_dir(first.trial)
        if not (first.resume and hogwild_state_exists(directory)):
            p = ctx.Process(
                target=_create_process,
                args=(first, directory, workers, self.log_level, registry.FAMILIES),
                name=f"{first.prefix}_global",
            )
            p.start()
            p.join()
            if p.exitcode != 0:
                for t in tasks:
                    self.errors[t.session] = (
                        f"the global nets could not be made (exit code {p.exitcode}); see the run log"
                    )
                return None
        shared = SharedNets(str(directory), str(spec.meta.distributed), workers)
        worker_spec = spec.with_values({"env.max_frame": spec.env.max_frame // workers})
        return [
            dataclasses.replace(
                t,
                spec=worker_spec,
                placement=dataclasses.replace(t.placement, device="cpu", shared=shared),
            )
            for t in tasks
        ]

    def follow(
        self,
        messages: Queue,
        procs: dict[int, BaseProcess],
        on_row: RowHandler | None,
        fail_fast: bool,
    ) -> dict[int, dict[str, float]]:
        """The sessions' messages until each has ended (see `run`)."""
        results: dict[int, dict[str, float]] = {}
        dead_before: dict[int, int] = {}
        next_look = time.monotonic() + POLL_S
        while len(results) + len(self.errors) < len(procs):
            if fail_fast and self.errors:
                break
            if time.monotonic() >= next_look:
                # a process that exited without a last message (killed, out of memory), seen
                # on two looks in a row: an exiting process's last message may still be in the
                # pipe. Looked for on a timer, as the other sessions' rows keep coming.
                ended = set(results) | set(self.errors)
                dead = {
                    s: p.exitcode
                    for s, p in procs.items()
                    if s not in ended and p.exitcode is not None
                }
                for s, code in dead.items():
                    if s in dead_before:
                        self.errors[s] = f"died (exit code {code})"
                dead_before, next_look = dead, time.monotonic() + POLL_S
            try:
                kind, s, payload = messages.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if kind == "row":
                on_row(s, *payload)
            elif kind == "failed":
                self.errors[s] = payload
            else:
                results[s] = payload
        return results


def _session_process(
    messages: Queue,
    parent_pid: int,
    task: SessionTask,
    log_level: str,
    publish_rows: bool,
    families: list[registry.Family],
) -> None:
    """A session process: runs the session, putting ("row", session, (frame,
    total_reward_ma)) for each metrics row when `publish_rows`, then ("done", session, its
    metrics) or ("failed", session, its error's last line)."""
    # first: a group's Ctrl-C during the start is a stop request, not a KeyboardInterrupt
    stop.install(pass_on=False, give_up=False)  # the parent may pass a signal on twice
    end_with(parent_pid)
    log_setup.setup(log_level, tag=task.prefix)
    registry.FAMILIES[:] = families  # the ones the run's process registered too

    from slm_lab.experiment import session  # the fork server's: no import cost here

    s = task.session
    publish = None
    if publish_rows:

        def publish(row: dict[str, float]) -> None:
            messages.put(("row", s, (int(row["frame"]), float(row["total_reward_ma"]))))

    try:
        messages.put(("done", s, session.run(task, log_level, publish)))
    except session.SessionFailed as e:
        messages.put(("failed", s, str(e)))


def hogwild_state_exists(directory: Path) -> bool:
    return (directory / HOGWILD_LAYOUT).exists()


def _create_process(
    task: SessionTask,
    directory: Path,
    workers: int,
    log_level: str,
    families: list[registry.Family],
) -> None:
    """The process that makes a Hogwild trial's global nets (torch: the run's process stays
    without it)."""
    log_setup.setup(log_level, tag=f"{task.prefix}_global")
    registry.FAMILIES[:] = families
    from slm_lab.experiment import hogwild  # the fork server's: no import cost here

    hogwild.create_for(task, directory, workers)


def end_with(pid: int) -> None:
    """SIGTERM to this process (a session saves and stops on it) when process `pid` ends."""

    def watch() -> None:
        if hasattr(os, "pidfd_open"):  # Linux: woken by the kernel when `pid` ends
            try:
                select.select([os.pidfd_open(pid)], [], [])
            except ProcessLookupError:  # ended already
                pass
        else:
            while psutil.pid_exists(pid):
                time.sleep(POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name=f"end with {pid}").start()


def _end(procs: dict[int, BaseProcess], messages: Queue) -> None:
    """Stop the sessions still running (SIGTERM: each saves its state and stops, as on Ctrl-C),
    wait for every process to exit (reading the queue, so none blocks on a full pipe), and kill
    one that does not within STOP_TIMEOUT_S."""
    for p in procs.values():
        if p.exitcode is None:
            p.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in procs.values():
        while p.exitcode is None and time.monotonic() < deadline:
            _drain(messages)
            p.join(POLL_S)
        if p.exitcode is None:
            p.kill()
            p.join()
    _drain(messages)


def _drain(messages: Queue) -> None:
    while True:
        try:
            messages.get_nowait()
        except queue.Empty:
            return
