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

import os
import queue
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path

import psutil

from slm_lab.env import registry
from slm_lab.experiment import stop
from slm_lab.experiment.layout import RunLayout, prefix
from slm_lab.lib import logger as log_setup
from slm_lab.spec.schema import Spec

FORKSERVER_PRELOAD = ["slm_lab.experiment.session", "matplotlib.figure"]
POLL_S = 1.0  # how often the pool looks at its processes while it waits for messages
STOP_TIMEOUT_S = 30.0  # a session told to stop saves its state within this, or it is killed
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

# what a session's row handler gets: the session index, and the row's frame and total_reward_ma
RowHandler = Callable[[int, int, float], None]


@dataclass(frozen=True)
class SessionTask:
    """One session to run: which spec, run folder, trial and session, and how."""

    spec: Spec
    root: Path  # the run folder
    trial: int
    session: int
    dev: bool = False  # extra checks at every step and row
    resume: bool = False  # continue from the saved state, if there is one
    render: bool = False
    # whether a later train@ can continue the session from its saved state (a search's trial
    # reruns from the start instead)
    resumable: bool = True

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.root, self.spec.name)

    @property
    def prefix(self) -> str:
        return prefix(self.spec.name, self.trial, self.session)


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
            for t in self.tasks
        }
        for p in procs.values():
            p.start()
        try:
            return self.follow(messages, procs, on_row, fail_fast)
        finally:
            _end(procs, messages)

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
