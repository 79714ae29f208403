"""A disk that fills during a run: the run stops with one line naming the full disk and where,
leaves no half-written file, its last checkpoint loads, and `train@` resumes it, once there is
space again, to the rows of a run the disk never stopped."""

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import TIMING_COLUMNS, invoke, make_spec, read_session_df, run_dirs, write_spec_file

from slm_lab import load_agent
from slm_lab.experiment import checkpointer
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup

NAME = "ppo_disk"
FRAMES = 600
GOOD_SAVES = 3  # the state is written at the rows of frames 100, 200, 300; the 4th finds no space


def state_path(run_dir: Path) -> Path:
    return run_dir / "model" / f"{NAME}_t0_s0_ckpt-latest_state.pt"


def full_after(saves: int) -> Callable[[Path, Any], None]:
    """io.atomic_write, whose `saves`+1-th write of a training state runs out of space halfway
    (the write's first bytes are in the temp file when the disk fills)."""
    atomic_write, written = io.atomic_write, []

    def write(path: Path, write_to: Any) -> None:
        if path.name.endswith("_state.pt"):
            written.append(path)
            if len(written) > saves:

                def half_then_full(f: Any) -> None:
                    f.write(b"\x80\x02half a checkpoint")
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

                write_to = half_then_full
        atomic_write(path, write_to)

    return write


@pytest.mark.cli
def test_a_full_disk_stops_the_run_in_one_line_and_it_resumes_to_the_same_rows(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file = write_spec_file(
        in_tmp / "spec.json", {NAME: make_spec("ppo", max_frame=FRAMES, random_seed=123)}
    )
    monkeypatch.setattr(checkpointer, "SAVE_INTERVAL_S", 0.0)  # a checkpoint at every row
    unbroken = invoke(["run", str(spec_file), NAME, "dev"])
    assert unbroken.exit_code == 0, unbroken.stderr[-3000:]
    [dir_a] = run_dirs(Path("data"))

    with monkeypatch.context() as m:
        m.setattr(io, "atomic_write", full_after(GOOD_SAVES))
        full = invoke(["run", str(spec_file), NAME, "dev"])
    [dir_b] = set(run_dirs(Path("data"))) - {dir_a}
    # one line on the console: the disk is full, the file it could not write, how to go on
    assert full.exit_code == 1
    assert "Traceback" not in full.stdout + full.stderr
    [line] = [x for x in full.stderr.splitlines() if x.startswith("error: ")]
    assert line == (
        f"error: no session of {NAME} completed: the disk is full: no space left to write "
        f"{state_path(dir_b)}; free some space, then resume from the last checkpoint: "
        f"uv run slm-lab run train@{dir_b} (traceback in {dir_b / 'log'})"
    )
    # no temp file left; the last good checkpoint (frame 300) loads, weights only
    assert not [p for p in dir_b.rglob("*") if p.name.endswith(".tmp")]
    state = torch.load(state_path(dir_b), weights_only=True)
    assert state["clock"]["frame"] == 100 * GOOD_SAVES
    agent = load_agent(dir_b, "latest")
    assert agent.action_space.contains(agent.act(agent.observation_space.sample()))

    # space again: train@ continues from the checkpoint to the unbroken run's rows
    resumed = invoke(["run", f"train@{dir_b}"])
    assert resumed.exit_code == 0, resumed.stderr[-3000:]
    assert set(run_dirs(Path("data"))) == {dir_a, dir_b}
    rows_a, rows_b = read_session_df(dir_a), read_session_df(dir_b)
    assert rows_b["frame"].tolist() == list(range(100, FRAMES + 1, 100))
    pd.testing.assert_frame_equal(
        rows_a.drop(columns=TIMING_COLUMNS), rows_b.drop(columns=TIMING_COLUMNS)
    )
    episodes = f"info/{NAME}_t0_s0_episodes.csv"
    assert (dir_b / episodes).read_text() == (dir_a / episodes).read_text()
    assert torch.load(state_path(dir_b), weights_only=True)["clock"]["frame"] == FRAMES


DEV_FULL = Path("/dev/full")  # Linux: every write to it fails with ENOSPC


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full")
def test_a_log_file_on_a_full_disk_drops_its_lines_without_a_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A run's and a session's log files are written at every line: on a full disk they drop
    the lines (the console has them), where loguru printed a traceback for each, and another
    when the process exited."""
    log_setup.set_tag("")  # the format's tag, as a run sets it
    sink = log_setup.add_file(str(DEV_FULL))
    log_setup.logger.info("dropped")
    log_setup.remove(sink)
    out, err = capfd.readouterr()
    assert "Logging error" not in out + err and "Traceback" not in out + err


@pytest.mark.cli
def test_a_full_disk_as_a_run_starts_says_so_in_one_line_and_leaves_no_folder(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's own writes (the run's record, before any session starts) on a full disk: one
    line, exit 1, and no half-made run folder, where they raised a traceback."""
    spec_file = write_spec_file(in_tmp / "spec.json", {NAME: make_spec("ppo", max_frame=FRAMES)})

    def full(path: Path, write_to: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(io, "atomic_write", full)
    result = invoke(["run", str(spec_file), NAME, "dev"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stdout + result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: the disk is full: no space left to write ")
    assert line.endswith("_spec.json; free some space, then run again")
    assert run_dirs(Path("data")) == []
