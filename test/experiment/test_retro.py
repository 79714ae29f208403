"""`slm-lab retro RUN_DIR`: the metrics and graphs of a finished run recomputed from its CSVs
equal what the run wrote; a run folder of an older version (columns missing), a search folder,
evaluation rows and bad input. Each test works on a copy of the shared two-session run."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TWO_SESSIONS, ConsoleRun, invoke

from slm_lab.experiment import analysis
from slm_lab.experiment.analysis import TRIAL_METRICS, format_metrics
from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.retro import env_of
from slm_lab.lib.io import read_metrics

PNG_MAGIC = b"\x89PNG"
NAME = TWO_SESSIONS
pytestmark = [pytest.mark.cli, pytest.mark.subprocess]  # the shared run is the console script's


def written(run_dir: Path) -> dict[str, Path]:
    """What retro rewrites: the metrics JSON files and graphs, by path in the run folder."""
    return {
        str(p.relative_to(run_dir)): p
        for p in run_dir.rglob("*")
        if p.suffix == ".png" or p.name.endswith("metrics.json") or "_metrics_" in p.name
    }


def stripped_copy(run: ConsoleRun, to: Path) -> tuple[Path, dict[str, Path]]:
    """A copy of the run with its metrics, graphs, logs and models deleted: its spec record and
    CSVs only. Returns it and the original's metrics and graphs."""
    copy = shutil.copytree(run.run_dir, to)
    originals = written(run.run_dir)
    assert len(originals) == 8  # 2 sessions' metrics and graphs, the trial's twice
    for path in written(copy).values():
        path.unlink()
    shutil.rmtree(copy / "log")
    shutil.rmtree(copy / "model")
    return copy, originals


def test_retro_rewrites_the_metrics_and_graphs_a_run_wrote(
    two_session_run: ConsoleRun, tmp_path: Path
) -> None:
    run_dir, originals = stripped_copy(two_session_run, tmp_path / "run")
    result = invoke(["retro", str(run_dir)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # nothing it could not compute
    remade = written(run_dir)
    assert remade.keys() == originals.keys()
    for name, path in remade.items():
        if name.endswith(".json"):
            assert path.read_text() == originals[name].read_text(), name  # the same numbers
        else:
            assert path.read_bytes()[:4] == PNG_MAGIC, name
    [trial_line] = [
        line for line in two_session_run.proc.stdout.splitlines() if "trial_metrics" in line
    ]
    assert result.stdout.splitlines() == [trial_line, f"metrics and graphs rewritten in {run_dir}"]


def test_retro_of_an_older_runs_rows_computes_what_it_can(
    two_session_run: ConsoleRun, tmp_path: Path
) -> None:
    """Rows without total_reward_ma and opt_step (as an older version might have written):
    total_reward_ma is recomputed, training_efficiency is NaN, each said in one line; a session
    without total_reward is left out and the trial's metrics are session 0's."""
    run_dir, originals = stripped_copy(two_session_run, tmp_path / "run")
    layout = RunLayout(run_dir, NAME)
    for s, dropped in ((0, ["total_reward_ma", "opt_step"]), (1, ["total_reward"])):
        path = layout.rows_csv(0, s)
        pd.read_csv(path).drop(columns=dropped).to_csv(path, index=False)
    result = invoke(["retro", str(run_dir)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"retro: no total_reward_ma column: recomputed from total_reward: {NAME}_t0_s0",
        f"retro: no opt_step column: training_efficiency cannot be computed (NaN): {NAME}_t0_s0",
        f"retro: no total_reward column: left out: {NAME}_t0_s1",
    ]
    session = read_metrics(layout.session_metrics(0, 0))
    original = read_metrics(originals[f"info/{NAME}_t0_s0_session_metrics.json"])
    assert math.isnan(session.pop("training_efficiency"))
    original.pop("training_efficiency")
    assert session == original  # total_reward_ma recomputed to the same value
    assert not layout.session_metrics(0, 1).exists()
    trial = read_metrics(layout.trial_metrics(0))
    assert list(trial) == list(TRIAL_METRICS)
    assert trial["strength"] == session["strength"] and math.isnan(trial["consistency"])


def test_retro_of_evaluation_rows(two_session_run: ConsoleRun, tmp_path: Path) -> None:
    """A session's eval CSV gets its session and trial metrics and graphs with the _eval suffix."""
    run_dir, _ = stripped_copy(two_session_run, tmp_path / "run")
    layout = RunLayout(run_dir, NAME)
    shutil.copy(layout.rows_csv(0, 0), layout.rows_csv(0, 0, evaluation=True))
    result = invoke(["retro", str(run_dir)])
    assert result.exit_code == 0, result.stderr
    table = analysis.read_csv(layout.rows_csv(0, 0, evaluation=True))
    expected = analysis.session_metrics(
        table, analysis.baseline_of(env_of(RunLayout(run_dir, NAME), 0))
    )
    assert read_metrics(layout.session_metrics(0, 0, "_eval")) == expected
    trial = read_metrics(layout.trial_metrics(0, "_eval"))
    assert trial["strength"] == expected["strength"]
    for path in (layout.session_graph(0, 0, "_eval"), layout.trial_graph(0, "_eval")):
        assert path.read_bytes()[:4] == PNG_MAGIC
    assert not layout.session_metrics(0, 1, "_eval").exists()
    assert f"trial_metrics_eval: {format_metrics(trial)}" in result.stdout.splitlines()


def test_retro_of_a_search_folder(two_session_run: ConsoleRun, tmp_path: Path) -> None:
    """Each trial folder (one without rows said so), then the experiment table's metric columns
    (an errored trial keeps its empty ones) and graph."""
    search_dir = tmp_path / "search"
    search_dir.mkdir()
    shutil.copy(two_session_run.run_dir / f"{NAME}_spec.json", search_dir)
    (search_dir / "tune").mkdir()
    trial_dir, _ = stripped_copy(two_session_run, search_dir / f"{NAME}_t0")
    errored = search_dir / f"{NAME}_t1"  # errored before its first row
    (errored / "info").mkdir(parents=True)
    shutil.copy(two_session_run.run_dir / f"{NAME}_spec.json", errored)
    table = search_dir / "experiment_df.csv"
    header = ["trial", "status", "agent.algorithm.gamma", *TRIAL_METRICS]
    stale = ",".join(["1.0"] * len(TRIAL_METRICS))
    table.write_text(
        ",".join(header)
        + f"\n0,completed,0.99,{stale}\n1,errored: boom,0.9,{',' * (len(TRIAL_METRICS) - 1)}\n"
    )
    result = invoke(["retro", str(search_dir)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"retro: no session rows: nothing to analyze: {NAME}_t1\n"
    trial = read_metrics(RunLayout(trial_dir, NAME).trial_metrics(0))
    rows = pd.read_csv(table)
    assert rows.columns.tolist() == header
    assert rows.loc[0, list(TRIAL_METRICS)].tolist() == pytest.approx(
        [trial[k] for k in TRIAL_METRICS], rel=0, abs=0
    )
    assert rows.loc[1, "status"] == "errored: boom" and rows.loc[1, "agent.algorithm.gamma"] == 0.9
    assert rows.loc[1, list(TRIAL_METRICS)].isna().all()
    assert (search_dir / f"{NAME}_experiment_graph.png").read_bytes()[:4] == PNG_MAGIC
    assert f"{NAME}_t0 trial_metrics: {format_metrics(trial)}" in result.stdout.splitlines()


@pytest.mark.parametrize("kind", ["missing", "no_run", "no_rows"])
def test_retro_bad_input(kind: str, two_session_run: ConsoleRun, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    if kind == "no_run":
        (folder / "info").mkdir(parents=True)
    if kind == "no_rows":
        folder, _ = stripped_copy(two_session_run, folder)
        for path in (folder / "info").glob("*_session_df.csv"):
            path.unlink()
    fragment = {
        "missing": f"{folder}: not a run folder",
        "no_run": f"{folder}: not a run folder",
        "no_rows": f"{folder}: no session rows (info/{NAME}_t<i>_s<j>_session_df.csv) to analyze",
    }[kind]
    result = invoke(["retro", str(folder)])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and fragment in line


def old_run_folder(root: Path, name: str, finals: list[float]) -> Path:
    """A run folder as an older version left it: its spec record, a session's rows per value of
    `finals` (its total_reward_ma at the end) and trial metrics without the IQM and CI."""
    (root / "info").mkdir(parents=True)
    (root / f"{name}_spec.json").write_text(
        json.dumps({"name": name, "env": {"name": "CartPole-v1", "max_frame": 200}})
    )
    for s, final in enumerate(finals):
        rows = f"frame,opt_step,total_reward,total_reward_ma\n100,1,{final},{final}\n200,2,{final},{final}\n"
        (root / "info" / f"{name}_t0_s{s}_session_df.csv").write_text(rows)
    old = {k: 1.0 for k in TRIAL_METRICS if not k.endswith(("_iqm", "_ci_low", "_ci_high"))}
    (root / "info" / f"{name}_t0_trial_metrics.json").write_text(json.dumps(old))
    return root


def test_retro_adds_the_iqm_and_ci_to_an_older_runs_trial_metrics(tmp_path: Path) -> None:
    run_dir = old_run_folder(tmp_path / "old", "ppo_old", [10.0, 12.0, 14.0, 24.0])
    result = invoke(["retro", str(run_dir)])
    assert result.exit_code == 0, result.stderr
    trial = read_metrics(RunLayout(run_dir, "ppo_old").trial_metrics(0))
    assert list(trial) == list(TRIAL_METRICS)
    assert trial["total_reward_ma_iqm"] == 13.0  # (12 + 14) / 2
    low, high = analysis.bootstrap_mean_ci([np.array([10.0, 12.0, 14.0, 24.0])])
    assert (trial["total_reward_ma_ci_low"], trial["total_reward_ma_ci_high"]) == (low, high)
    assert f"total_reward_ma_ci:[{low:.2f}, {high:.2f}]" in result.stdout


def test_retro_adds_the_new_metric_columns_to_an_older_experiment_table(tmp_path: Path) -> None:
    search_dir = tmp_path / "search"
    (search_dir / "tune").mkdir(parents=True)
    (search_dir / "ppo_old_spec.json").write_text(json.dumps({"name": "ppo_old"}))
    old_run_folder(search_dir / "ppo_old_t0", "ppo_old", [10.0, 12.0])
    old_columns = [k for k in TRIAL_METRICS if not k.endswith(("_iqm", "_ci_low", "_ci_high"))]
    table = search_dir / "experiment_df.csv"
    table.write_text(
        ",".join(["trial", "status", "agent.algorithm.gamma", *old_columns])
        + f"\n0,completed,0.99,{','.join(['1.0'] * len(old_columns))}\n"
        + f"1,errored: boom,0.9,{',' * (len(old_columns) - 1)}\n"
    )
    result = invoke(["retro", str(search_dir)])
    assert result.exit_code == 0, result.stderr
    rows = pd.read_csv(table)
    assert rows.columns.tolist() == ["trial", "status", "agent.algorithm.gamma", *TRIAL_METRICS]
    trial = read_metrics(RunLayout(search_dir / "ppo_old_t0", "ppo_old").trial_metrics(0))
    assert rows.loc[0, "total_reward_ma_iqm"] == trial["total_reward_ma_iqm"] == 11.0
    assert rows.loc[0, "total_reward_ma_ci_low"] == trial["total_reward_ma_ci_low"]
    assert rows.loc[1, list(TRIAL_METRICS)].isna().all()  # an errored trial: empty cells
