"""`search --keep N`: which trials keep their model files, the pruning of the others' files, and
the option as the CLI passes it to the search (no Ray started: the search is replaced);
`train --drop-state`: a finished run keeps its models and loses its resume state, a stopped one
keeps both."""

import math
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke, make_spec, run_dirs, write_spec_file

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.experiment import ray_cluster, search, stop
from slm_lab.experiment.layout import KEEP_MODELS, RunLayout
from slm_lab.spec.spec_util import SpecError

NAME = "ppo_search"
# trial index -> total_reward_ma; 3 and 4 tie, 5 errored (no metric)
METRICS = {0: 10.0, 1: 30.0, 2: 20.0, 3: 5.0, 4: 5.0, 5: math.nan}


def rows() -> list[dict[str, Any]]:
    return [{"trial": i, "status": "completed", "total_reward_ma": m} for i, m in METRICS.items()]


@pytest.mark.parametrize(
    ("keep", "kept"),
    [
        (0, set()),
        (1, {1}),
        (3, {1, 2, 0}),
        (4, {1, 2, 0, 3}),  # of the tied 3 and 4, the lower index
        (6, {0, 1, 2, 3, 4}),  # a trial without a metric never
        (-1, {0, 1, 2, 3, 4, 5}),
    ],
)
def test_the_best_n_trials_keep_their_models(keep: int, kept: set[int]) -> None:
    assert search.kept_trials(rows(), keep) == kept


def test_the_default_keeps_three() -> None:
    assert KEEP_MODELS == 3
    assert search.kept_trials(rows(), KEEP_MODELS) == {0, 1, 2}


@pytest.mark.parametrize("keep", [2, -1])
def test_pruning_deletes_the_model_files_of_the_others_only(keep: int, tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, NAME)
    for i in METRICS:
        trial = layout.trial_dir(i)
        trial.make()
        for tag in ("best", "latest"):
            for path in trial.ckpt(i, 0, tag):
                path.write_bytes(b"weights")
        (trial.info / "kept.csv").write_text("frame\n")
    search.prune_models(layout, rows(), keep)
    for i in METRICS:
        trial = layout.trial_dir(i)
        models = sorted(p.name for p in trial.model_dir.iterdir())
        assert len(models) == (4 if i in search.kept_trials(rows(), keep) else 0), i
        assert (trial.info / "kept.csv").is_file()  # only model files go


@pytest.fixture
def passed_keep(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The `keep` each search the CLI starts gets; the search itself stops at once."""
    keeps: list[int] = []

    def fake_run(spec: Any, root: Path, log_level: str, resume: bool, keep: int) -> None:
        keeps.append(keep)
        raise SpecError("stopped by the test")

    monkeypatch.setattr(ray_cluster, "start_ray", lambda preload: False)
    monkeypatch.setattr(ray_cluster, "check_cluster", lambda spec: None)
    monkeypatch.setattr(search, "run", fake_run)
    return keeps


@pytest.mark.parametrize(
    ("args", "keep"), [([], KEEP_MODELS), (["--keep", "1"], 1), (["--keep", "-1"], -1)]
)
def test_the_cli_passes_keep_to_the_search(
    args: list[str], keep: int, passed_keep: list[int], in_tmp: Path
) -> None:
    spec = make_spec("ppo", max_session=1)
    spec["search"] = {"agent.algorithm.gamma__uniform": [0.9, 0.99]}
    path = write_spec_file(in_tmp / "search.json", {NAME: spec})
    result = invoke(["run", str(path), NAME, "search", *args])
    assert result.exit_code == 2 and "stopped by the test" in result.stderr
    assert passed_keep == [keep]


@pytest.mark.parametrize(
    ("mode", "keep", "fragment"),
    [
        ("search", "-2", "--keep -2: a number of trials (0 or more), or -1 for every trial"),
        (
            "train",
            "2",
            "--keep applies to search mode (the trials that keep their model files), not train",
        ),
        ("dev", "2", "--keep applies to search mode"),
    ],
)
def test_keep_bad_input(mode: str, keep: str, fragment: str, in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "spec.json", {NAME: make_spec("ppo")})
    result = invoke(["run", str(path), NAME, mode, "--keep", keep])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and fragment in line
    assert run_dirs(in_tmp / "data") == []


def model_files(run_dir: Path) -> set[str]:
    return {p.name.split("_t0_")[1] for p in (run_dir / "model").iterdir()}


@pytest.mark.cli
@pytest.mark.parametrize(("args", "kept"), [([], True), (["--drop-state"], False)])
def test_a_finished_run_with_drop_state_keeps_only_its_models(
    args: list[str], kept: bool, in_tmp: Path
) -> None:
    path = write_spec_file(in_tmp / "spec.json", {"ppo_keep": make_spec("ppo", max_frame=200)})
    result = invoke(["run", str(path), "ppo_keep", "train", *args])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    models = {"s0_ckpt-latest_model.pt", "s0_ckpt-best_model.pt"}
    state = {"s0_ckpt-latest_state.pt"}
    assert model_files(run_dir) == (models | state if kept else models)
    dropped = [line for line in result.stdout.splitlines() if "--drop-state" in line]
    if kept:
        assert dropped == []
    else:
        [line] = dropped
        assert line.startswith("resume state deleted (--drop-state): 1 file, ")
        # the run can no longer be extended: said in one line, nothing written
        more = invoke(["run", f"train@{run_dir}", "--max-frame", "400"])
        assert more.exit_code == 2
        assert more.stderr.splitlines() == [
            f"error: {run_dir} finished without its resume state (--drop-state deleted model/*_ckpt-latest_state.pt), so it cannot be trained further; start a new run"
        ]
        assert model_files(run_dir) == models


@pytest.mark.cli
def test_a_stopped_run_keeps_its_resume_state_with_drop_state(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    update = Algorithm.update

    def update_then_stop(self: Algorithm, *args: object) -> None:
        update(self, *args)
        if self.clock.frame == 150:
            stop.REQUEST.signum = signal.SIGTERM  # what the signal handler records

    path = write_spec_file(in_tmp / "spec.json", {"ppo_keep": make_spec("ppo", max_frame=400)})
    with monkeypatch.context() as m:
        m.setattr(Algorithm, "update", update_then_stop)
        result = invoke(["run", str(path), "ppo_keep", "train", "--drop-state"])
    assert result.exit_code == 143, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    assert "s0_ckpt-latest_state.pt" in model_files(run_dir)
    resumed = invoke(["run", f"train@{run_dir}", "--drop-state"])  # its finish drops it
    assert resumed.exit_code == 0, resumed.stderr[-3000:]
    assert model_files(run_dir) == {"s0_ckpt-latest_model.pt", "s0_ckpt-best_model.pt"}


def test_drop_state_is_for_train_and_dev_runs(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["search"] = {"agent.algorithm.gamma__uniform": [0.9, 0.99]}
    path = write_spec_file(in_tmp / "spec.json", {NAME: spec})
    result = invoke(["run", str(path), NAME, "search", "--drop-state"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --drop-state applies to dev and train runs (the resume state of their sessions), not search"
    ]
    assert run_dirs(in_tmp / "data") == []
