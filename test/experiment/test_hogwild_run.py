"""Hogwild runs through the CLI a user types: Ctrl-C of a shipped A3C spec's train run and
`train@` resume every worker, losing and repeating no frame, episode or row, with the global
optimizer's step count going on; a short dev run of a v5 async SAC spec (GumbelSoftmax)."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import UV, invoke, read_session_df, run_dirs

from slm_lab import ROOT_DIR

A3C_FILE = "slm_lab/spec/benchmark/a3c/a3c_gae_cartpole.json"
A3C = "a3c_gae_cartpole"
WORKERS = 2
MAX_FRAME = 40_000  # the trial's: 20,000 frames a worker
LOG_FREQUENCY = (
    500  # set here: a multiple of the 4 envs' frames per vector step, so rows fall on it
)
STOP_AFTER_ROWS = 3  # Ctrl-C once every worker has written this many rows
TIMEOUT_S = 300


def uv_slm_lab(cwd: Path, *args: str) -> subprocess.Popen:
    """`uv run slm-lab ...` in its own process group, as a terminal's job."""
    return subprocess.Popen(
        [UV, "run", "--project", str(ROOT_DIR), "slm-lab", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )


def wait_for_rows(data: Path, rows: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        csvs = list(data.glob("*/info/*_session_df.csv"))
        if len(csvs) == WORKERS and all(len(p.read_text().splitlines()) > rows for p in csvs):
            return
        time.sleep(0.1)
    raise TimeoutError("the workers did not reach their checkpoints")


def global_steps(run_dir: Path) -> np.ndarray:
    """Every global optimizer's step count, per parameter, read from the trial's files."""
    directory = run_dir / "model" / f"{A3C}_t0_global"
    layout = json.loads((directory / "layout.json").read_text())
    files = {
        dtype: np.fromfile(directory / f"{dtype}.bin", dtype=dtype) for dtype in layout["sizes"]
    }
    return np.array(
        [
            files[dtype][offset]
            for o in layout["optims"]
            for s in o
            for dtype, offset, *_ in [s["step"]]
        ]
    )


def worker_opt_steps(run_dir: Path) -> int:
    """The workers' gradient steps, all together, from their saved clocks."""
    return sum(
        torch.load(run_dir / "model" / f"{A3C}_t0_s{s}_ckpt-latest_state.pt", weights_only=True)[
            "clock"
        ]["opt_step"]
        for s in range(WORKERS)
    )


def episodes(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "info" / f"{A3C}_t0_s0_episodes.csv")


@pytest.mark.cli
@pytest.mark.subprocess
def test_ctrl_c_and_train_at_resume_every_hogwild_worker(tmp_path: Path) -> None:
    run = uv_slm_lab(
        tmp_path,
        "run",
        str(ROOT_DIR / A3C_FILE),
        A3C,
        "train",
        "-s",
        f"env.max_frame={MAX_FRAME}",
        "-s",
        f"meta.log_frequency={LOG_FREQUENCY}",
        "--sessions",
        str(WORKERS),
    )
    wait_for_rows(tmp_path / "data", STOP_AFTER_ROWS)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=TIMEOUT_S)
    assert run.returncode == 130, err[-3000:]
    [run_dir] = run_dirs(tmp_path / "data")
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped at frame ") and last.endswith(
        f"every session saved; resume with: uv run slm-lab run train@{run_dir.relative_to(tmp_path)}"
    ), last
    per_worker = MAX_FRAME // WORKERS
    rows_before = [read_session_df(run_dir, s) for s in range(WORKERS)]
    # the trial's frame: its workers' frames together, each at or past its last row
    stopped_at = int(last.removeprefix("stopped at frame ").split()[0])
    rows_frames = sum(int(df["frame"].iloc[-1]) for df in rows_before)
    assert rows_frames <= stopped_at < rows_frames + WORKERS * LOG_FREQUENCY, last
    assert f"of {MAX_FRAME} (all {WORKERS} workers)" in last
    episodes_before = episodes(run_dir)  # worker 0 writes every episode, as session 0 does
    assert all(STOP_AFTER_ROWS <= len(df) < per_worker // LOG_FREQUENCY for df in rows_before)
    steps_before, opt_steps_before = global_steps(run_dir), worker_opt_steps(run_dir)
    assert (steps_before == opt_steps_before).all() and opt_steps_before > 0

    resumed = uv_slm_lab(tmp_path, "run", f"train@{run_dir.relative_to(tmp_path)}")
    out, err = resumed.communicate(timeout=TIMEOUT_S)
    assert resumed.returncode == 0, err[-3000:]
    assert "trial_metrics:" in out + err
    checkpoints = list(range(LOG_FREQUENCY, per_worker + 1, LOG_FREQUENCY))
    for s in range(WORKERS):
        df = read_session_df(run_dir, s)
        assert df["frame"].tolist() == checkpoints  # every row once
        before = rows_before[s]
        pd.testing.assert_frame_equal(df.iloc[: len(before)], before)  # kept as they were
        assert df["opt_step"].is_monotonic_increasing
        assert df["epi"].is_monotonic_increasing
    eps = episodes(run_dir)
    assert eps["episode"].tolist() == list(range(len(eps)))  # every episode once
    pd.testing.assert_frame_equal(eps.iloc[: len(episodes_before)], episodes_before)
    assert len(eps) > len(episodes_before) and eps["frame"].is_monotonic_increasing
    # the episodes finished by each row are the row's count
    df = read_session_df(run_dir, 0)
    assert [(eps["frame"] <= f).sum() for f in df["frame"]] == df["epi"].tolist()
    # the global optimizer went on from its step count: one step per worker's gradient step,
    # before the stop and after it
    opt_steps = worker_opt_steps(run_dir)
    assert opt_steps > opt_steps_before
    assert (global_steps(run_dir) == opt_steps).all()
    frames = np.fromfile(run_dir / "model" / f"{A3C}_t0_global" / "frames.bin", np.int64)
    assert frames.tolist() == [per_worker] * WORKERS  # the trial's frames: MAX_FRAME


@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.box2d
def test_v5_async_sac_lunar_dev_run_writes_trial_metrics(in_tmp: Path) -> None:
    """v5's async SAC on LunarLander (GumbelSoftmax actor, shared nets), a short dev run: one
    worker's rows with the global frames beside its own, trained, and the trial's metrics."""
    path = ROOT_DIR / "test" / "fixtures" / "v5_specs" / "async_sac_lunar.json"
    result = invoke(["run", str(path), "async_sac_lunar", "dev", "--max-frame", "1000"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == [1000]  # log_frequency 1000
    assert (df["global_frame"] == df["frame"]).all()  # one worker: the trial's frames are its own
    assert df["opt_step"].iloc[-1] > 0 and np.isfinite(df[["actor_loss", "alpha_loss"]]).all(None)
    metrics = json.loads((run_dir / "async_sac_lunar_t0_trial_metrics.json").read_text())
    assert metrics["frame"] == 1000 and np.isfinite(metrics["total_reward_ma"])
