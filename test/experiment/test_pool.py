"""The session pool: sessions in processes, their rows followed as they come; a session that
dies is reported with its exit code."""

import os
import signal
import time
from multiprocessing import get_context
from pathlib import Path

import pytest
from conftest import load, make_spec

from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.pool import SessionPool, _end
from slm_lab.experiment.task import SessionTask


@pytest.mark.subprocess
def test_a_session_killed_from_outside_is_reported_with_its_exit_code() -> None:
    """The OOM killer, say: the process sends no last message."""
    ctx = get_context("spawn")
    messages = ctx.Queue()
    proc = ctx.Process(target=os._exit, args=(3,))
    proc.start()
    pool = SessionPool([], "WARNING")
    assert pool.follow(messages, {0: proc}, None, fail_fast=False) == {}
    assert pool.errors == {0: "died (exit code 3)"}


@pytest.mark.subprocess
def test_sessions_run_in_their_own_processes_and_return_their_metrics(tmp_path: Path) -> None:
    spec = load({**make_spec("ppo", max_frame=200), "name": "p"})
    layout = RunLayout(tmp_path, "p")
    layout.make()
    tasks = [SessionTask(spec, tmp_path, 0, s) for s in range(2)]
    rows: list[tuple[int, int]] = []
    pool = SessionPool(tasks, "WARNING")
    results = pool.run(on_row=lambda s, frame, ma: rows.append((s, frame)))
    assert sorted(results) == [0, 1] and pool.errors == {}
    assert all(r["frame"] == 200 for r in results.values())
    assert sorted(rows) == [(s, f) for s in range(2) for f in (100, 200)]
    assert all(layout.session_metrics(0, s).exists() for s in range(2))


@pytest.mark.subprocess
def test_fail_fast_ends_at_the_first_error_and_the_rest_are_stopped() -> None:
    """A search trial fails as soon as one seed does: the pool stops waiting for the others,
    which get SIGTERM (a session saves and stops on it) and are gone when `_end` returns."""
    ctx = get_context("spawn")
    messages = ctx.Queue()
    busy = ctx.Process(target=time.sleep, args=(60,))
    busy.start()
    messages.put(("failed", 0, "ValueError: boom"))
    pool = SessionPool([], "WARNING")
    start = time.monotonic()
    assert pool.follow(messages, {0: busy, 1: busy}, None, fail_fast=True) == {}
    assert pool.errors == {0: "ValueError: boom"}
    _end({1: busy}, messages)
    assert time.monotonic() - start < 30 and busy.exitcode == -signal.SIGTERM
