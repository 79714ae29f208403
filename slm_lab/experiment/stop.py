"""Ctrl-C (SIGINT) and SIGTERM stop a run between two env steps, after each session has saved
its full state at that step, so `train@<run folder>` continues it exactly.

The signal handler only records the request; a session's loop checks it once per step. A
trial's parent process passes the signal on to its session processes (a terminal's Ctrl-C
reaches them too, a `kill` of the parent does not); a second signal to the parent, or to a
one-session run, ends it at once without saving (its session processes, which end with it,
still save). A signal that arrives again within REPEAT_S of the first is the same request
delivered twice, not a second one: `timeout`, schedulers and uv signal the process group and
then forward the signal to the process they started.
"""

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal, as shells report it
REPEAT_S = 1.0  # a signal again within this of the first is the same stop request


class StopRequest:
    """The signal that asked the run to stop (None until one did), and when it came."""

    signum: int | None = None
    at: float = 0.0


REQUEST = StopRequest()


def install(
    pass_on: bool, give_up: bool, on_request: Callable[[], None] | None = None
) -> dict[int, Any]:
    """Handle SIGINT and SIGTERM: record the request; `pass_on` sends it to the session
    processes; `on_request` is called on it; `give_up` lets a second signal end the process at
    once. Returns the handlers it replaced (for `restore`)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if REQUEST.signum is None:
            REQUEST.signum, REQUEST.at = signum, time.monotonic()
            if pass_on:
                for child in multiprocessing.active_children():
                    os.kill(child.pid, signum)
            if on_request is not None:
                on_request()
        elif give_up and time.monotonic() - REQUEST.at > REPEAT_S:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return {sig: signal.signal(sig, handle) for sig in SIGNALS}


def ask_tune_to_stop() -> None:
    """Ray Tune's own way to end a search gracefully (it saves the experiment's state, and the
    trials that ran are stopped): SIGUSR1, which its run handles."""
    os.kill(os.getpid(), signal.SIGUSR1)


def restore(previous: dict[int, Callable | int | None]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    REQUEST.signum = None


class SessionStopped(Exception):
    """A session saved its state at `frame` and stopped, on request."""

    def __init__(self, frame: int) -> None:
        super().__init__(f"stopped at frame {frame}")
        self.frame = frame
