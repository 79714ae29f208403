"""Runs through the CLI: smoke runs per algorithm x action space, determinism, resume, enjoy.

Each run is a few hundred frames with a checkpoint every 100; the working directory is a tmp
folder so `data/` is local to the test.
"""

import contextlib
import hashlib
import json
import math
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import (
    TIMING_COLUMNS,
    TWO_SESSIONS,
    ConsoleRun,
    assert_same_run_files,
    check_progress_lines,
    invoke,
    load,
    make_spec,
    read_session_df,
    run_dirs,
    write_spec_file,
)
from loguru import logger

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.net import net_util
from slm_lab.env.backend import FinishedEpisodes, play_episodes
from slm_lab.experiment import analysis, checkpointer, stop
from slm_lab.experiment import session as session_module
from slm_lab.experiment import task as task_module
from slm_lab.experiment.analysis import TRIAL_METRICS, format_metrics
from slm_lab.experiment.task import SessionTask
from slm_lab.lib.io import read_metrics

PNG_MAGIC = b"\x89PNG"
# vector-env steps x num_envs = 400 frames; rows at 100, 200, 300, 400
FRAMES = [100, 200, 300, 400]
# PPO: a batch is 32 steps x 2 envs = 64 frames -> 6 trainings x 2 epochs x 2 minibatches of 32
# A2C: training_frequency 16 steps x 2 envs = 32 frames -> 12 trainings of one step each
OPT_STEPS_AT_400 = {"random": 0, "ppo": 24, "a2c_gae": 12, "a2c_nstep": 12}
A2C_DIAGNOSTICS = ["policy_loss", "value_loss", "entropy", "explained_variance"]
PPO_DIAGNOSTICS = [*A2C_DIAGNOSTICS, "approx_kl", "clip_frac"]
DIAGNOSTICS = {
    "random": [],
    "reinforce": ["policy_loss", "entropy"],
    "a2c_gae": A2C_DIAGNOSTICS,
    "a2c_nstep": A2C_DIAGNOSTICS,
    "sil": A2C_DIAGNOSTICS,
    "ppo": PPO_DIAGNOSTICS,
    "ppo_sil": PPO_DIAGNOSTICS,
}


def trial_line(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("trial_metrics: ")]
    return line


def check_run_folder(run_dir: Path, name: str, sessions: int, max_frame: int) -> dict:
    """The files a finished run must have; returns its trial metrics."""
    record = json.loads((run_dir / f"{name}_spec.json").read_text())
    assert record["name"] == name and isinstance(record["meta"]["random_seed"], int)
    assert {"git_sha", "git_dirty", "versions", "vars", "mode", "command"} <= set(
        record["run_info"]
    )
    for s in range(sessions):
        pre = f"{name}_t0_s{s}"
        assert (run_dir / "info" / f"{pre}_session_df.csv").is_file()
        metrics = json.loads((run_dir / "info" / f"{pre}_session_metrics.json").read_text())
        assert metrics["frame"] == max_frame
        assert (run_dir / "graph" / f"{pre}_session_graph.png").read_bytes()[:4] == PNG_MAGIC
        model = torch.load(run_dir / "model" / f"{pre}_ckpt-latest_model.pt", weights_only=True)
        assert "nets" in model and "obs_rms" in model
        assert (run_dir / "model" / f"{pre}_ckpt-latest_state.pt").is_file()
    trial = read_metrics(run_dir / "info" / f"{name}_t0_trial_metrics.json")
    assert read_metrics(run_dir / f"{name}_t0_trial_metrics.json") == pytest.approx(
        trial, nan_ok=True
    )
    assert list(trial) == list(TRIAL_METRICS)
    assert trial["frame"] == max_frame
    assert (run_dir / "graph" / f"{name}_t0_trial_graph.png").read_bytes()[:4] == PNG_MAGIC
    assert (run_dir / f"{name}_t0_trial_graph.png").is_file()
    return trial


@pytest.mark.cli
@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize(
    "algo", ["random", "reinforce", "a2c_gae", "a2c_nstep", "ppo", "sil", "ppo_sil"]
)
def test_smoke_dev_run(algo: str, env_name: str, in_tmp: Path) -> None:
    name = f"{algo}_{env_name.split('-')[0].lower()}"
    # Pendulum episodes are 200 steps; a max_t of 50 lets episodes finish within the run
    spec = make_spec(algo, env_name, max_t=50 if env_name == "Pendulum-v1" else None)
    spec_file = write_spec_file(in_tmp / "spec.json", {name: spec})
    result = invoke(["run", str(spec_file), name, "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    assert run_dir.name.startswith(f"{name}_")
    trial = check_run_folder(run_dir, name, 1, 400)
    assert trial_line(result.stdout) == f"trial_metrics: {format_metrics(trial)}"
    assert trial_line(result.stdout).startswith("trial_metrics: frame:4.00e+02 | total_reward_ma:")
    assert math.isnan(trial["consistency"])  # one session

    df = read_session_df(run_dir)
    assert df["frame"].tolist() == FRAMES
    assert df["t"].tolist() == [f // 2 for f in FRAMES]
    assert df["total_reward"].notna().all()
    assert df["epi"].is_monotonic_increasing and df["epi"].iloc[-1] > 0
    if env_name == "Pendulum-v1":
        assert df["epi"].tolist() == [2, 4, 6, 8]  # 2 envs x episodes of 50 steps
        assert df["total_reward"].iloc[-1] < 0
    last = df.iloc[-1]
    if algo in OPT_STEPS_AT_400:
        assert last["opt_step"] == OPT_STEPS_AT_400[algo]
    else:
        assert last["opt_step"] > 0
    if algo in ("sil", "ppo_sil"):  # episodes ended, so the self-imitation replay trained
        assert math.isfinite(last["sil_loss"])
    if algo == "random":
        assert math.isnan(last["loss"])
    else:
        assert math.isfinite(last["loss"]) and last["lr"] == 1e-3
    assert all(math.isfinite(last[c]) for c in DIAGNOSTICS[algo])
    check_progress_lines(result.stderr, run_dir, f"{name}_t0_s0", df)


@pytest.mark.cli
@pytest.mark.subprocess
def test_train_two_sessions_through_console_script(two_session_run: ConsoleRun) -> None:
    """`slm-lab run ... train` in a fresh process: 2 sessions in parallel, seeds differ by session."""
    _, run_dir, proc = two_session_run
    name = TWO_SESSIONS
    assert "Traceback" not in proc.stderr
    trial = check_run_folder(run_dir, name, 2, 400)
    assert trial_line(proc.stdout) == f"trial_metrics: {format_metrics(trial)}"
    assert math.isfinite(trial["consistency"])
    df0, df1 = read_session_df(run_dir, 0), read_session_df(run_dir, 1)
    # session 0 writes the episodes CSV, the others do not
    assert [p.name for p in (run_dir / "info").glob("*_episodes.csv")] == [
        f"{name}_t0_s0_episodes.csv"
    ]
    assert df0["frame"].tolist() == df1["frame"].tolist() == FRAMES
    assert not df0["loss"].equals(df1["loss"])  # different seeds
    sessions = [
        json.loads((run_dir / "info" / f"{name}_t0_s{s}_session_metrics.json").read_text())
        for s in (0, 1)
    ]
    assert trial["strength"] == pytest.approx(
        (sessions[0]["strength"] + sessions[1]["strength"]) / 2
    )


# -- determinism, resume, enjoy on one small PPO CartPole spec --------------------------------
RUN_NAME = "ppo_resume"
RUN_FRAMES = 600
STOP_FRAME = 350  # interrupt after the checkpoint at 300, in the middle of a 64-frame batch


def frame_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=TIMING_COLUMNS)


class Interrupted(BaseException):
    """Stands in for a kill or Ctrl-C: the session stops between two steps, uncaught."""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def run_a(workdir: Path) -> tuple[Path, Path]:
    """A finished dev run: (spec file, run folder)."""
    spec_file = write_spec_file(
        workdir / "spec.json", {RUN_NAME: make_spec("ppo", max_frame=RUN_FRAMES, random_seed=123)}
    )
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), RUN_NAME, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        [run_dir] = set(run_dirs(Path("data"))) - before
    return spec_file, (workdir / run_dir).resolve()


def new_run(before: set[Path]) -> Path:
    [run_dir] = set(run_dirs(Path("data"))) - before
    return run_dir.resolve()


def episodes_csv(run_dir: Path) -> Path:
    return run_dir / "info" / f"{RUN_NAME}_t0_s0_episodes.csv"


@pytest.mark.cli
def test_episodes_csv_lists_every_finished_episode(run_a: tuple[Path, Path]) -> None:
    _, run_dir = run_a
    episodes = pd.read_csv(episodes_csv(run_dir))
    df = read_session_df(run_dir)
    assert list(episodes.columns) == ["frame", "episode", "return", "length"]
    assert episodes["episode"].tolist() == list(range(df["epi"].iloc[-1]))
    # at each checkpoint, the episodes finished by then are its epi, and total_reward is the
    # mean return of the last 100 of them
    for _, row in df.iterrows():
        finished = episodes[episodes["frame"] <= row["frame"]]
        assert len(finished) == row["epi"]
        assert finished["return"].tail(100).mean() == pytest.approx(row["total_reward"], rel=1e-12)
    assert (episodes["return"] == episodes["length"]).all()  # CartPole: a reward of 1 a step
    # 2 envs step together: an episode ends at an even frame; each env's episodes follow each
    # other, so those finished cover at most the run's frames
    assert (episodes["frame"] % 2 == 0).all() and episodes["frame"].is_monotonic_increasing
    assert (episodes["length"] <= episodes["frame"] / 2).all()
    assert episodes["length"].sum() <= RUN_FRAMES


@pytest.mark.cli
def test_same_seed_gives_same_rows(run_a: tuple[Path, Path], workdir: Path) -> None:
    spec_file, dir_a = run_a
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), RUN_NAME, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        dir_b = new_run(before)
    df_a, df_b = read_session_df(dir_a), read_session_df(dir_b)
    assert df_a["frame"].tolist() == list(range(100, RUN_FRAMES + 1, 100))
    pd.testing.assert_frame_equal(frame_rows(df_a), frame_rows(df_b))
    assert df_a["loss"].notna().all()


def run_until_killed(spec_file: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dev run in the working directory, stopped at STOP_FRAME; returns its folder."""
    update = Algorithm.update  # every algorithm's update reaches it

    def update_until_killed(self: Algorithm, *args: object) -> None:
        if self.clock.frame >= STOP_FRAME:
            raise Interrupted
        update(self, *args)

    before = set(run_dirs(Path("data")))
    with monkeypatch.context() as m, pytest.raises(Interrupted):
        m.setattr(Algorithm, "update", update_until_killed)
        # write the state at every checkpoint (checkpoint files are otherwise rate-limited)
        m.setattr(checkpointer, "SAVE_INTERVAL_S", 0.0)
        invoke(["run", str(spec_file), name, "dev"])
    return new_run(before)


@pytest.mark.cli
def test_interrupted_run_resumes_to_the_same_data(
    run_a: tuple[Path, Path], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file, dir_a = run_a
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        dir_b = run_until_killed(spec_file, RUN_NAME, monkeypatch)
        partial = read_session_df(dir_b)
        assert partial["frame"].tolist() == [100, 200, 300]
        state = torch.load(
            next((dir_b / "model").glob("*_ckpt-latest_state.pt")), weights_only=True
        )
        assert state["clock"]["frame"] == 300
        assert not list((dir_b / "info").glob("*_session_metrics.json"))

        result = invoke(["run", str(spec_file), RUN_NAME, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
        assert set(run_dirs(Path("data"))) - before == {dir_b.relative_to(workdir)}  # no new folder
    pd.testing.assert_frame_equal(
        frame_rows(read_session_df(dir_a)), frame_rows(read_session_df(dir_b))
    )
    assert episodes_csv(dir_b).read_text() == episodes_csv(dir_a).read_text()
    metrics_a = read_metrics(next((dir_a / "info").glob("*_t0_trial_metrics.json")))
    metrics_b = read_metrics(next((dir_b / "info").glob("*_t0_trial_metrics.json")))
    assert metrics_b == pytest.approx(metrics_a, nan_ok=True)
    assert trial_line(result.stdout) == f"trial_metrics: {format_metrics(metrics_b)}"


@pytest.mark.cli
def test_a_shared_net_ppo_resumes_to_the_same_rows_to_the_bit(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PPO with a shared net trains on the log-probs and V(s) its acting computed; the
    checkpoint keeps those of the batch in progress (the stop falls mid-batch), so the resumed
    run's rows equal the unbroken run's exactly, not only to a tolerance."""
    spec = make_spec("ppo", max_frame=RUN_FRAMES, random_seed=123)
    spec["agent"]["net"]["shared"] = True
    spec_file = write_spec_file(workdir / "shared.json", {RUN_NAME: spec})
    batch_frames = spec["agent"]["algorithm"]["time_horizon"] * spec["env"]["num_envs"]
    assert (STOP_FRAME // 100 * 100) % batch_frames != 0  # the last checkpoint is mid-batch
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), RUN_NAME, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        dir_a = new_run(before)
        dir_b = run_until_killed(spec_file, RUN_NAME, monkeypatch)
        result = invoke(["run", str(spec_file), RUN_NAME, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
    pd.testing.assert_frame_equal(
        frame_rows(read_session_df(dir_a)), frame_rows(read_session_df(dir_b)), check_exact=True
    )


@pytest.mark.cli
def test_a_stop_between_rows_keeps_every_episode_and_resumes_to_the_same_files(
    run_a: tuple[Path, Path], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop request (Ctrl-C, SIGTERM) at STOP_FRAME, between the rows at 300 and 400: the
    session saves there, with the episodes that ended after the row at 300 written, and the
    resumed run ends with the files of the unbroken run."""
    spec_file, dir_a = run_a
    update = Algorithm.update

    def update_then_stop(self: Algorithm, *args: object) -> None:
        update(self, *args)
        if self.clock.frame == STOP_FRAME:
            stop.REQUEST.signum = signal.SIGTERM  # what the signal handler records

    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        with monkeypatch.context() as m:
            m.setattr(Algorithm, "update", update_then_stop)
            stopped = invoke(["run", str(spec_file), RUN_NAME, "dev"])
        assert stopped.exit_code == 143, stopped.stderr[-3000:]
        dir_b = new_run(before)
        episodes = pd.read_csv(episodes_csv(dir_b))
        assert episodes["frame"].max() > 300  # ended after the last row, before the stop
        assert read_session_df(dir_b)["frame"].iloc[-1] == 300
        resumed = invoke(["run", f"train@{dir_b}"])
        assert resumed.exit_code == 0, resumed.stderr[-3000:]
    assert_same_run_files(dir_a, dir_b)


@pytest.mark.cli
def test_resume_rewrites_the_episodes_written_after_the_last_save(
    run_a: tuple[Path, Path], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state is saved at 100 and 200 but not at 300 (the run dies before that write
    lands): the rows the checkpoint at 300 appended are cut on resume, and the replay from 200
    appends them again, once."""
    spec_file, dir_a = run_a
    update, save = Algorithm.update, session_module.Session.save

    def update_until_killed(self: Algorithm, *args: object) -> None:
        if self.clock.frame >= STOP_FRAME:
            raise Interrupted
        update(self, *args)

    def save_until_200(self: session_module.Session) -> None:
        if self.clock.frame <= 200:
            save(self)

    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        with monkeypatch.context() as m, pytest.raises(Interrupted):
            m.setattr(Algorithm, "update", update_until_killed)
            m.setattr(checkpointer, "SAVE_INTERVAL_S", 0.0)
            m.setattr(session_module.Session, "save", save_until_200)
            invoke(["run", str(spec_file), RUN_NAME, "dev"])
        dir_b = new_run(before)
        assert pd.read_csv(episodes_csv(dir_b))["frame"].max() > 200  # written after the save
        result = invoke(["run", str(spec_file), RUN_NAME, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
    assert episodes_csv(dir_b).read_text() == episodes_csv(dir_a).read_text()


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(folder)): (
            p.stat().st_mtime_ns,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.cli
def test_enjoy_writes_its_own_folder(run_a: tuple[Path, Path], workdir: Path) -> None:
    spec_file, dir_a = run_a
    before_files = snapshot(dir_a)
    with contextlib.chdir(workdir):
        before = set(Path("data").iterdir())
        result = invoke(["run", str(spec_file), RUN_NAME, f"enjoy@{dir_a}", "--episodes", "3"])
        assert result.exit_code == 0, result.stderr[-3000:]
        [enjoy_dir] = set(Path("data").iterdir()) - before
    assert enjoy_dir.name.startswith(f"{dir_a.name}_enjoy_")
    assert os.listdir(workdir / enjoy_dir) == ["enjoy_metrics.json"]
    out = json.loads((workdir / enjoy_dir / "enjoy_metrics.json").read_text())
    assert out["episodes"] == 3 and out["mean_return"] > 0
    assert out["checkpoint"].endswith(f"{RUN_NAME}_t0_s0_ckpt-best_model.pt")
    assert result.stdout.startswith(
        f"enjoy: 3 episodes | mean_return:{out['mean_return']:.2f} | std_return:"
    )
    assert snapshot(dir_a) == before_files


class UnevenEpisodes:
    """Sub-env i's episodes last i + 1 steps: the short ones end first. An episode's return is
    its length plus 10 x its index among its sub-env's episodes (0 for the first)."""

    def __init__(self, num_envs: int) -> None:
        self.info = SimpleNamespace(num_envs=num_envs)
        self.obs = np.zeros((num_envs, 1), dtype=np.float32)
        self.steps = np.zeros(num_envs, dtype=int)
        self.ended = np.zeros(num_envs, dtype=int)
        self.frame = 0
        self.finished: list[FinishedEpisodes] = []

    def step(self, actions: np.ndarray) -> None:
        self.steps += 1
        self.frame += len(self.steps)
        done = self.steps == np.arange(1, len(self.steps) + 1)
        if done.any():
            lengths = self.steps[done].copy()
            returns = lengths + 10.0 * self.ended[done]
            self.finished.append(
                FinishedEpisodes(self.frame, 0, returns, lengths, np.flatnonzero(done))
            )
            self.steps[done] = 0
            self.ended[done] += 1

    def pop_episodes(self) -> list[FinishedEpisodes]:
        finished, self.finished = self.finished, []
        return finished


def test_play_episodes_counts_each_sub_env_s_first_episodes_not_the_first_to_end() -> None:
    """enjoy's and evaluations' episodes: sub-env i its first (episodes + i) // num_envs."""
    returns, lengths = play_episodes(UnevenEpisodes(4), lambda obs: np.zeros(len(obs)), 6)
    # sub-envs 0 and 1 play 1 episode each, 2 and 3 their first 2 (returns 3, 13 and 4, 14);
    # the first 6 to end would be sub-env 0's first four and sub-env 1's first two
    assert sorted(returns.tolist()) == [1.0, 2.0, 3.0, 4.0, 13.0, 14.0]
    assert sorted(lengths.tolist()) == [1, 2, 3, 3, 4, 4]


# -- evaluation during training: run_a's spec with evaluations -------------------------------
EVAL_NAME = "ppo_eval"
EVAL_EPISODES = 3  # over 2 envs: 1 episode of the first, 2 of the second
EVAL_FREQUENCY = 250
EVAL_FRAMES = [250, 500, 600]  # every 250 frames and at the end
EVAL_COLUMNS = ["frame", "t", "epi", "opt_step", "wall_t", "total_reward", "total_reward_ma"]


def eval_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_t"])


def read_eval_df(run_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(run_dir / "info" / f"{name}_t0_s0_eval_df.csv")


@pytest.fixture(scope="module")
def run_eval(workdir: Path) -> tuple[Path, Path, str]:
    """run_a's spec with evaluations, finished: (spec file, run folder, stdout)."""
    spec = make_spec("ppo", max_frame=RUN_FRAMES, random_seed=123)
    spec["meta"].update(rigorous_eval=EVAL_EPISODES, eval_frequency=EVAL_FREQUENCY)
    spec_file = write_spec_file(workdir / "eval_spec.json", {EVAL_NAME: spec})
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), EVAL_NAME, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        run_dir = new_run(before)
    return spec_file, run_dir, result.stdout


@pytest.mark.cli
def test_evaluation_leaves_the_training_rows_as_they_are(
    run_a: tuple[Path, Path], run_eval: tuple[Path, Path, str]
) -> None:
    _, dir_a = run_a
    _, dir_e, _ = run_eval
    pd.testing.assert_frame_equal(
        frame_rows(read_session_df(dir_a)), frame_rows(read_session_df(dir_e))
    )
    # run_a's spec sets eval_frequency without rigorous_eval: no evaluation
    assert not [p for p in dir_a.rglob("*") if "eval" in p.name]


@pytest.mark.cli
def test_evaluation_rows_metrics_logs_and_graphs(run_eval: tuple[Path, Path, str]) -> None:
    spec_file, run_dir, stdout = run_eval
    df = read_eval_df(run_dir, EVAL_NAME)
    assert list(df.columns[: len(EVAL_COLUMNS)]) == EVAL_COLUMNS
    assert df["frame"].tolist() == EVAL_FRAMES
    assert df["t"].tolist() == [f // 2 for f in EVAL_FRAMES]
    # CartPole scores 1 a step: the returns of an evaluation's episodes sum to a whole number
    sums = df["total_reward"] * EVAL_EPISODES
    assert np.allclose(sums, sums.round()) and (sums >= EVAL_EPISODES).all()
    assert df["total_reward_ma"].tolist() == pytest.approx(df["total_reward"].expanding().mean())
    # where a training row falls at the same frame, the clock and the agent's metrics agree
    train = read_session_df(run_dir).set_index("frame")
    for col in ("epi", "opt_step", "loss", "lr", "entropy"):
        assert (
            df.set_index("frame").loc[[500, 600], col].tolist()
            == train.loc[[500, 600], col].tolist()
        )

    baseline = analysis.baseline_of(load(json.loads(spec_file.read_text())[EVAL_NAME]).env)
    table = analysis.read_csv(run_dir / "info" / f"{EVAL_NAME}_t0_s0_eval_df.csv")
    info = run_dir / "info"
    session = read_metrics(info / f"{EVAL_NAME}_t0_s0_session_metrics_eval.json")
    assert session == pytest.approx(analysis.session_metrics(table, baseline), nan_ok=True)
    trial = read_metrics(info / f"{EVAL_NAME}_t0_trial_metrics_eval.json")
    assert trial == pytest.approx(analysis.trial_metrics([table], baseline), nan_ok=True)
    assert read_metrics(run_dir / f"{EVAL_NAME}_t0_trial_metrics_eval.json") == (
        pytest.approx(trial, nan_ok=True)
    )
    assert f"trial_metrics_eval: {format_metrics(trial)}" in stdout.splitlines()
    for graph in (
        f"graph/{EVAL_NAME}_t0_s0_session_graph_eval.png",
        f"graph/{EVAL_NAME}_t0_trial_graph_eval.png",
        f"{EVAL_NAME}_t0_trial_graph_eval.png",
    ):
        assert (run_dir / graph).read_bytes()[:4] == PNG_MAGIC

    log = (run_dir / "log" / f"{EVAL_NAME}_t0_s0.log").read_text()
    assert [
        line.split(" | eval | ", 1)[1] for line in log.splitlines() if " | eval | " in line
    ] == [
        f"frame:{f:,} | episodes:{EVAL_EPISODES} | total_reward:{r:.2f} | total_reward_ma:{ma:.2f}"
        for f, r, ma in zip(EVAL_FRAMES, df["total_reward"], df["total_reward_ma"], strict=True)
    ]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "log" / "tb" / f"{EVAL_NAME}_t0_s0"))
    events.Reload()
    for key in ("total_reward", "total_reward_ma"):
        scalars = events.Scalars(f"eval/{key}")
        assert [e.step for e in scalars] == EVAL_FRAMES
        assert [e.value for e in scalars] == pytest.approx(df[key].tolist(), rel=1e-6)


@pytest.mark.cli
def test_interrupted_run_with_evaluation_resumes_to_the_same_eval_rows(
    run_eval: tuple[Path, Path, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file, dir_a, _ = run_eval
    with contextlib.chdir(workdir):
        dir_b = run_until_killed(spec_file, EVAL_NAME, monkeypatch)
        assert read_eval_df(dir_b, EVAL_NAME)["frame"].tolist() == [250]
        state = torch.load(
            next((dir_b / "model").glob("*_ckpt-latest_state.pt")), weights_only=True
        )
        assert state["clock"]["frame"] == 300
        assert [r["frame"] for r in state["evaluation"]["rows"]] == [250]
        result = invoke(["run", str(spec_file), EVAL_NAME, f"train@{dir_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
    pd.testing.assert_frame_equal(
        eval_rows(read_eval_df(dir_a, EVAL_NAME)), eval_rows(read_eval_df(dir_b, EVAL_NAME))
    )
    pd.testing.assert_frame_equal(
        frame_rows(read_session_df(dir_a)), frame_rows(read_session_df(dir_b))
    )
    name = f"{EVAL_NAME}_t0_trial_metrics_eval.json"
    assert json.loads((dir_b / name).read_text()) == pytest.approx(
        json.loads((dir_a / name).read_text()), nan_ok=True
    )


@pytest.mark.cli
def test_random_evaluates_every_log_frequency_by_default(in_tmp: Path) -> None:
    """eval_frequency null: an evaluation at each checkpoint. Random acts by sampling the action
    space: the training env's draws stay the same."""
    with_eval, without = make_spec("random"), make_spec("random")
    with_eval["meta"].update(rigorous_eval=2, eval_frequency=None)
    without["meta"]["rigorous_eval"] = 0
    spec_file = write_spec_file(in_tmp / "spec.json", {"with": with_eval, "without": without})
    dirs = {}
    for name in ("with", "without"):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), name, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        dirs[name] = new_run(before)
    assert read_eval_df(dirs["with"], "with")["frame"].tolist() == FRAMES
    assert not list((dirs["without"] / "info").glob("*eval*"))
    pd.testing.assert_frame_equal(
        frame_rows(read_session_df(dirs["with"])), frame_rows(read_session_df(dirs["without"]))
    )


def test_session_seeds_give_disjoint_env_seeds() -> None:
    """Sub-env i is seeded seed + i: sessions' seed ranges must not overlap."""
    from slm_lab.experiment.task import session_seed

    num_envs = 16
    seeds = [session_seed(42, trial, s) for trial in range(3) for s in range(8)]
    env_seeds = [seed + i for seed in seeds for i in range(num_envs)]
    assert len(set(env_seeds)) == len(env_seeds)
    assert session_seed(42, 0, 1) == session_seed(42, 0, 1)  # deterministic


def test_session_flushes_denormals(tmp_path: Path) -> None:
    """A session process flushes denormal floats to zero (they make CPU arithmetic slow)."""
    torch.set_flush_denormal(False)  # an earlier in-process session may have turned it on
    denormal = torch.tensor([1e-39])
    assert (denormal * 1.0).item() != 0.0
    try:
        session_module.Session(
            SessionTask(load({**make_spec("ppo"), "name": "ppo"}), tmp_path, 0, 0)
        )
        assert (denormal * 1.0).item() == 0.0
    finally:
        torch.set_flush_denormal(False)


def test_session_logs_a_line_before_building_its_env_and_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="INFO")
    logged_before_build: list[list[str]] = []
    build = session_module.build

    def recording_build(*args: object, **kwargs: object) -> object:
        logged_before_build.append(list(messages))
        return build(*args, **kwargs)

    monkeypatch.setattr(session_module, "build", recording_build)
    try:
        session_module.Session(
            SessionTask(load({**make_spec("ppo"), "name": "ppo"}), tmp_path, 0, 0)
        )
    finally:
        logger.remove(sink)
    seed = task_module.session_seed(42, 0, 0)
    assert logged_before_build == [[f"building env CartPole-v1 x2 and agent PPO (seed {seed})"]]


@pytest.mark.parametrize(("session", "lines"), [(0, 1), (1, 0)])
def test_session_0_logs_how_its_envs_step(tmp_path: Path, session: int, lines: int) -> None:
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="INFO")
    try:
        spec = load({**make_spec("ppo"), "name": "ppo"})
        session_module.Session(SessionTask(spec, tmp_path, 0, session)).env.close()
    finally:
        logger.remove(sink)
    vector_lines = [m for m in messages if m.startswith("vector env: ")]
    assert len(vector_lines) == lines
    # CartPole's step is far too cheap for async, whatever the cores
    assert all(m.startswith("vector env: sync (auto: ") for m in vector_lines)


@pytest.mark.parametrize(("native", "level"), [(True, "INFO"), (False, "WARNING")])
def test_session_0_says_its_precision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool, level: str
) -> None:
    """bf16-mixed is said once at start: INFO where the device has native bfloat16, a WARNING
    that it is emulated elsewhere; float32 says nothing."""
    monkeypatch.setattr(net_util, "bf16_native", lambda device: native)
    records: list[tuple[str, str]] = []
    sink = logger.add(lambda m: records.append((m.record["level"].name, m.record["message"])))
    try:
        for precision in ("float32", "bf16-mixed"):
            spec = make_spec("ppo")
            spec["agent"]["net"]["precision"] = precision
            for session in (0, 1):
                task = SessionTask(load({**spec, "name": "ppo"}), tmp_path, 0, session)
                session_module.Session(task).env.close()
    finally:
        logger.remove(sink)
    [(said_level, line)] = [r for r in records if "bf16-mixed" in r[1]]
    assert said_level == level
    assert line.startswith(
        "precision bf16-mixed: native bfloat16 on cpu"
        if native
        else "precision bf16-mixed: this cpu has no native bfloat16"
    )
