"""The results page (docs/BENCHMARKS.md) against its data (docs/results/): every number and
every plot on the page rebuilt from the run folders there; the cell rules (status, IQM and CI)
on hand-made runs; `slm-lab plot --pool`, which draws a cell's runs as one curve; each mistake
in the cell list or a run folder as one line."""

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import typer
from conftest import invoke
from matplotlib.image import imread

from slm_lab.experiment import analysis, results
from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.plot import read_pooled_curve
from slm_lab.experiment.results import MET, NO_RUN, NO_TARGET, NOT_MET, OPEN, status
from slm_lab.experiment.retro import env_of, run_name, sessions_of
from slm_lab.lib import io

MAX_RUN_BYTES = 2**20  # a run folder in docs/results/: its rows and metrics, no checkpoints


# -- the page and its data ---------------------------------------------------------------
def test_the_page_is_what_its_data_gives() -> None:
    """Regenerate with `uv run python -m slm_lab.experiment.results` when this fails."""
    page = results.PAGE.read_text()
    assert results.generated_block(page, results.PAGE) == results.render()


def test_the_page_has_runs_with_data_and_a_cell_they_make_met() -> None:
    cells = results.load_cells()
    runs = results.read_runs(results.RESULTS_DIR, cells)
    assert sum(len(r) for r in runs.values()) >= 3
    statuses = [
        results.run_status(runs[results.cell_id(env, cell)], cell)
        for env in cells.envs
        for cell in env.cells
        if runs[results.cell_id(env, cell)]
    ]
    assert MET in statuses


def test_each_plot_on_the_page_is_what_slm_lab_plot_draws_from_docs_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command under each plot, run here (from the repo's root, into a temporary folder),
    draws the committed PNG to the pixel; docs/results/plots holds no other PNG."""
    monkeypatch.chdir(results.ROOT_DIR)
    cells = results.load_cells()
    runs = results.read_runs(results.RESULTS_DIR, cells)
    committed = set()
    for env in cells.envs:
        if not any(runs[results.cell_id(env, cell)] for cell in env.cells):
            continue
        args = results.plot_args(env, results.RESULTS_DIR, runs)
        args[args.index("-o") + 1] = str(tmp_path)
        result = invoke(args)
        assert result.exit_code == 0, result.stderr
        path = results.plot_path(env, results.RESULTS_DIR)
        committed.add(path)
        assert result.stdout.splitlines()[-1] == f"plot: {tmp_path / path.name}"
        assert np.array_equal(imread(tmp_path / path.name), imread(path)), path.name
    assert committed
    assert set((results.RESULTS_DIR / results.PLOTS_DIR).glob("*.png")) == committed


def test_each_shipped_runs_metrics_are_what_its_rows_give() -> None:
    """A run folder's trial and session metrics are those its CSVs give (as `slm-lab retro`
    would write them), and the page's score of the run is its trial metric."""
    cells = results.load_cells()
    names = [name for env in cells.envs for cell in env.cells for name in cell.runs]
    assert names
    for name in names:
        root = results.RESULTS_DIR / name
        layout = RunLayout(root, run_name(root))
        [sessions] = sessions_of(layout).values()
        tables = [analysis.read_csv(layout.rows_csv(0, s)) for s in sessions]
        baseline = analysis.baseline_of(env_of(layout, 0))
        trial = io.read_json(layout.trial_metrics(0))
        assert trial == pytest.approx(analysis.trial_metrics(tables, baseline), rel=1e-12), name
        for s, table in zip(sessions, tables, strict=True):
            session = io.read_json(layout.session_metrics(0, s))
            assert session == pytest.approx(analysis.session_metrics(table, baseline), rel=1e-12)


def test_docs_results_run_folders_are_small_and_have_no_checkpoints() -> None:
    files = [p for p in results.RESULTS_DIR.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".pt" or "model" in p.parts or "log" in p.parts]
    for folder in results.RESULTS_DIR.iterdir():
        if folder.is_dir() and folder.name != results.PLOTS_DIR:
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            assert size < MAX_RUN_BYTES, folder.name


def test_every_run_folder_in_docs_results_is_listed_under_a_cell() -> None:
    cells = results.load_cells()
    listed = {name for env in cells.envs for cell in env.cells for name in cell.runs}
    folders = {p.name for p in results.RESULTS_DIR.iterdir() if p.is_dir()}
    assert folders - {results.PLOTS_DIR} == listed


# -- the status rule ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scores", "sessions", "target", "expected"),
    [
        ([450.0, 420.0, 401.0], [4, 4, 4], 400.0, MET),  # two pass, a third does not miss
        ([450.0, 420.0, 401.0, 480.0], [4, 4, 4, 4], 400.0, MET),
        ([450.0, 420.0, 399.0], [4, 4, 4], 400.0, NOT_MET),  # the third misses
        ([450.0, 400.0], [4, 4], 400.0, NOT_MET),  # at the target is not above it
        ([450.0, 420.0], [4, 4], 400.0, OPEN),  # a third run is still to make
        ([450.0, 420.0, 430.0], [4, 4, 1], 400.0, OPEN),  # a run of one session does not count
        ([-90.0, -80.0, -99.0], [4, 4, 4], -100.0, MET),  # a negative target
        ([450.0], [4], None, NO_TARGET),
        ([], [], 400.0, NO_RUN),
    ],
)
def test_status(
    scores: list[float], sessions: list[int], target: float | None, expected: str
) -> None:
    assert status(scores, sessions, target) == expected


def test_frames_text() -> None:
    assert [results.frames_text(f) for f in (200_000, 1_000_000, 150_000, 10_000_000)] == [
        "2e5",
        "1e6",
        "1.5e5",
        "1e7",
    ]


# -- a page from hand-made runs ----------------------------------------------------------
FRAMES = [100, 200, 300]


def write_run(
    root: Path,
    name: str,
    sessions: list[list[float]],
    algorithm: str = "PPO",
    env: str = "CartPole-v1",
    frames: list[int] = FRAMES,
    hogwild: bool = False,
) -> Path:
    """A run folder: its spec record and a session's rows per list of total_reward_ma values
    (total_reward the same values); `hogwild`: its sessions are a Hogwild trial's workers, whose
    rows have the trial's `global_frame` (here each worker's frame times the workers)."""
    (root / "info").mkdir(parents=True)
    spec = {"name": name, "agent": {"algorithm": {"name": algorithm}}, "env": {"name": env}}
    (root / f"{name}_spec.json").write_text(json.dumps(spec))
    workers = len(sessions)
    for s, values in enumerate(sessions):
        if hogwild:
            header = "frame,total_reward,total_reward_ma,global_frame\n"
            rows = "".join(
                f"{f},{v},{v},{f * workers}\n" for f, v in zip(frames, values, strict=True)
            )
        else:
            header = "frame,total_reward,total_reward_ma\n"
            rows = "".join(f"{f},{v},{v}\n" for f, v in zip(frames, values, strict=True))
        path = root / "info" / f"{name}_t0_s{s}_session_df.csv"
        path.write_text(header + rows)
    return root


CELLS = """
families: [Classic control]
algorithms: [PPO, DQN]
envs:
  - env: CartPole-v1
    family: Classic control
    note: A note.
    cells:
      - {algorithm: PPO, spec_file: ppo/ppo_cartpole.json, spec_name: ppo_cartpole, frames: 300,
         target: 400, v5: 498.94, runs: [ppo_a, ppo_b], earlier: [500.00, "482"]}
      - {algorithm: DQN, spec_file: dqn/dqn_cartpole.json, spec_name: dqn_cartpole, frames: 300,
         target: 400, v5: 239.94, v5_frames: 3_000, options: -s max_frame=300}
"""
PAGE = "# Page\n\nintro\n\n{begin}\nstale\n{end}\n\nthe rest\n"


@pytest.fixture
def hand_made(tmp_path: Path) -> tuple[Path, Path]:
    """(results folder, page): two PPO runs of 2 and 3 sessions; a DQN cell without runs."""
    data = tmp_path / "docs" / "results"
    write_run(data / "ppo_a", "ppo_cartpole", [[10.0, 300.0, 410.0], [10.0, 300.0, 450.0]])
    write_run(data / "ppo_b", "ppo_cartpole", [[20.0, 350.0, 420.0]] * 2 + [[5.0, 5.0, 390.0]])
    (data / results.CELLS_FILE).write_text(CELLS)
    page = tmp_path / "docs" / "BENCHMARKS.md"
    page.write_text(PAGE.format(begin=results.BEGIN, end=results.END))
    return data, page


def table_rows(block: str, header_start: str) -> list[list[str]]:
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_a_cells_row_gives_each_run_and_the_iqm_and_ci_over_all_sessions(
    hand_made: tuple[Path, Path],
) -> None:
    data, page = hand_made
    block = results.render(data, page)
    [row] = table_rows(block, "| algorithm | target | status | total_reward_ma (each run) | IQM")
    # run a: (410 + 450) / 2 = 430; run b: (420 + 420 + 390) / 3 = 410: both above 400
    low, high = analysis.bootstrap_mean_ci(
        [np.array([410.0, 450.0]), np.array([420.0] * 2 + [390.0])]
    )
    mean = (410 + 450 + 420 + 420 + 390) / 5
    assert row == [
        "PPO",
        "> 400",
        OPEN,  # two runs passed, a third is needed
        "[430.00](results/ppo_a), [410.00](results/ppo_b)",
        "416.67",  # IQM of 390, 410, 420, 420, 450: 1 dropped each side, (410 + 420 + 420) / 3
        f"{mean:.2f} [{low:.2f}, {high:.2f}]",
        "2 of 2",
        "498.94",
        "[ppo/ppo_cartpole.json](../slm_lab/spec/benchmark/ppo/ppo_cartpole.json)",
        "ppo_cartpole",
        "3e2 (2 runs x 2/3 sessions)",
    ]
    earlier = table_rows(block, "| algorithm | target | status | total_reward_ma (each run) | runs")
    assert earlier == [
        [
            "PPO",
            "> 400",
            OPEN,
            "500.00, 482",  # a score quoted without decimals stays so
            "2 of 2",
            "498.94",
            "[ppo/ppo_cartpole.json](../slm_lab/spec/benchmark/ppo/ppo_cartpole.json)",
            "ppo_cartpole",
            "3e2 (2 runs x 4 sessions)",
        ]
    ]
    # PPO's status rests on runs with data (no *); DQN's cell has no run at all
    assert "| Classic control | 1 open | 1 no run |" in block
    assert "No run yet: DQN (`dqn_cartpole`)." in block
    assert (
        "uv run slm-lab run -s max_frame=300 slm_lab/spec/benchmark/dqn/dqn_cartpole.json" in block
    )


def test_write_replaces_the_block_and_draws_the_plot_the_page_shows(
    hand_made: tuple[Path, Path],
) -> None:
    data, page = hand_made
    stale = data / results.PLOTS_DIR / "Gone-v0.png"
    stale.parent.mkdir()
    stale.write_bytes(b"")
    [png] = results.write(data, page)
    text = page.read_text()
    assert text.startswith("# Page\n\nintro\n\n" + results.BEGIN)
    assert text.endswith(results.END + "\n\nthe rest\n") and "stale" not in text
    assert results.generated_block(text, page) == results.render(data, page)
    assert png == data / "plots" / "CartPole-v1.png" and imread(png).shape[0] > 0
    assert "![CartPole-v1](results/plots/CartPole-v1.png)" in text
    assert not stale.exists()  # a plot no env draws any more


# -- slm-lab plot --pool -----------------------------------------------------------------
def test_a_pooled_curve_is_the_mean_over_all_sessions_with_the_stratified_ci(
    tmp_path: Path,
) -> None:
    a = write_run(tmp_path / "a", "ppo_cartpole", [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    b = write_run(
        tmp_path / "b",
        "ppo_cartpole",
        [[10.0, 20.0, 30.0, 40.0]],
        frames=[100, 200, 300, 400],
    )
    curve = read_pooled_curve([a, b], "PPO")
    assert (curve.label, curve.algorithm, curve.runs, curve.sessions) == ("PPO", "PPO", 2, 3)
    assert curve.frames.tolist() == FRAMES  # the frames every run has
    assert curve.mean.tolist() == pytest.approx([14 / 3, 26 / 3, 38 / 3])
    low, high = analysis.bootstrap_mean_ci(
        [np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]), np.array([[10.0, 20.0, 30.0]])]
    )
    assert curve.ci is not None
    assert curve.ci[0].tolist() == low.tolist() and curve.ci[1].tolist() == high.tolist()
    # run b has one session: only a's two vary, each resample's mean within a's spread
    assert (low < curve.mean).all() and (curve.mean < high).all()


def test_a_hogwild_run_counts_the_trials_frames_all_workers_together(tmp_path: Path) -> None:
    """A Hogwild trial's workers each run their share of its frames: its run is the cell's at
    the trial's budget, and its curve is drawn at the trial's frames (a worker's times the
    workers), on the axis of the other algorithms' runs."""
    data = tmp_path / "docs" / "results"
    write_run(data / "a3c_a", "a3c_cartpole", [[10.0, 20.0, 30.0]] * 2, "A3C", hogwild=True)
    cell = results.Cell(
        algorithm="A3C", spec_file="a3c/a3c.json", spec_name="a3c_cartpole", frames=600
    )
    env = results.EnvResults(env="CartPole-v1", family="Classic control", cells=[cell])
    assert results.read_run(data, "a3c_a", env, cell).name == "a3c_a"
    curve = read_pooled_curve([data / "a3c_a"])
    assert curve.frames.tolist() == [200, 400, 600] and curve.mean.tolist() == [10.0, 20.0, 30.0]
    budget = dataclasses.replace(cell, frames=300)  # a worker's frames are not the trial's
    with pytest.raises(results.ResultsError, match="ended at frame 600, the cell's budget is 300"):
        results.read_run(data, "a3c_a", env, budget)


def test_slm_lab_plot_pool_draws_one_curve_per_cell(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "ppo_cartpole", [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    b = write_run(tmp_path / "b", "ppo_cartpole", [[5.0, 6.0, 7.0], [7.0, 8.0, 9.0]])
    c = write_run(tmp_path / "c", "dqn_cartpole", [[0.0, 1.0, 2.0]] * 2, algorithm="DQN")
    out = tmp_path / "out"
    result = invoke(
        ["plot", "--pool", "-f", f"{a},{b}", "-f", str(c), "-l", "PPO", "-l", "DQN", "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    curve = read_pooled_curve([a, b])
    low, high = curve.ci[0][-1], curve.ci[1][-1]
    assert result.stdout.splitlines() == [
        f"PPO (PPO, CartPole-v1): 2 runs, 4 sessions | frame:300 | total_reward_ma:6.00 [{low:.2f}, {high:.2f}]",
        "DQN (DQN, CartPole-v1): 1 run, 2 sessions | frame:300 | total_reward_ma:2.00 [2.00, 2.00]",
        f"plot: {out / 'CartPole-v1.png'}",
    ]
    assert imread(out / "CartPole-v1.png").shape[0] > 0


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "envs",
            "--pool: the runs are of different envs (Acrobot-v1, CartPole-v1); pool the runs of one cell, one -f per cell",
        ),
        (
            "algorithms",
            "--pool: the runs are of different algorithms (DQN, PPO); pool the runs of one cell, one -f per cell",
        ),
        ("legends", "--legends: 1 label for 2 cells; give one per cell"),
    ],
)
def test_a_pool_mistake_is_one_line(tmp_path: Path, case: str, message: str) -> None:
    a = write_run(tmp_path / "a", "ppo_cartpole", [[1.0, 2.0, 3.0]])
    other = {"envs": {"env": "Acrobot-v1"}, "algorithms": {"algorithm": "DQN"}, "legends": {}}
    b = write_run(tmp_path / "b", "x", [[1.0, 2.0, 3.0]], **other[case])
    folders = ["-f", f"{a},{b}"] if case != "legends" else ["-f", str(a), "-f", str(b), "-l", "A"]
    result = invoke(["plot", "--pool", *folders, "-o", str(tmp_path / "out")])
    assert (result.exit_code, result.stderr.splitlines()) == (2, [f"error: {message}"])
    assert not (tmp_path / "out").exists()


# -- mistakes in the data ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: shutil.rmtree(d / "ppo_b"),
            "{d}/ppo_b (a run of ppo_cartpole on CartPole-v1): not a run folder (its <spec_name>_spec.json and info/); copy the run folder there",
        ),
        (
            lambda d: (d / "ppo_b" / "ppo_cartpole_spec.json").write_text(
                json.dumps(
                    {
                        "name": "dqn_cartpole",
                        "agent": {"algorithm": {"name": "DQN"}},
                        "env": {"name": "CartPole-v1"},
                    }
                )
            ),
            "{d}/ppo_b (a run of ppo_cartpole on CartPole-v1): it is a run of dqn_cartpole on CartPole-v1",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(
                CELLS.replace(
                    "frames: 300,\n         target: 400, v5: 498.94",
                    "frames: 400,\n         target: 400, v5: 498.94",
                )
            ),
            "{d}/ppo_a (a run of ppo_cartpole on CartPole-v1): it ended at frame 300, the cell's budget is 400",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(CELLS.replace("v5_frames:", "v5_frame:")),
            "{d}/cells.yaml: envs[0].cells[1].v5_frame: unknown key; did you mean v5_frames?",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(
                CELLS.replace("spec_name: dqn_cartpole", "spec_name: dqn_cartpol")
            ),
            "{d}/cells.yaml: envs[0].cells[1].spec_name: 'dqn_cartpol' is not in dqn/dqn_cartpole.json; did you mean dqn_cartpole?",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(CELLS.replace('"482"', '"lots"')),
            "{d}/cells.yaml: envs[0].cells[0].earlier[1]: 'lots' is not a number",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(
                CELLS.replace("algorithm: DQN", "algorithm: Rainbow")
            ),
            "{d}/cells.yaml: envs[0].cells[1].algorithm: 'Rainbow' is not in algorithms (PPO, DQN)",
        ),
        (
            lambda d: (d / results.CELLS_FILE).write_text(
                CELLS.replace("spec_name: dqn_cartpole", "spec_name: ppo_cartpole")
            ),
            "{d}/cells.yaml: envs[0].cells[1]: ppo_cartpole at 300 frames is listed twice for CartPole-v1",
        ),
    ],
)
def test_a_data_mistake_is_one_line_and_leaves_the_page_alone(
    hand_made: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit,
    message: str,
) -> None:
    data, page = hand_made
    edit(data)
    before = page.read_text()
    monkeypatch.setattr(results, "RESULTS_DIR", data)
    monkeypatch.setattr(results, "PAGE", page)
    with pytest.raises(typer.Exit) as exit_:
        results.main()
    assert exit_.value.exit_code == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {message.format(d=data)}"]
    assert page.read_text() == before
    assert not (data / results.PLOTS_DIR).exists()


def test_add_copies_a_run_folder_without_its_checkpoints_logs_and_graphs(
    hand_made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = hand_made
    run = write_run(
        tmp_path / "data" / "ppo_cartpole_2026_01_01_000000", "ppo_cartpole", [[1.0] * 3]
    )
    for part in ("model/ppo_cartpole_t0_s0_ckpt-best_model.pt", "log/x.log", "graph/g.png"):
        (run / part).parent.mkdir(exist_ok=True)
        (run / part).write_text("x")
    (run / "ppo_cartpole_t0_trial_metrics.json").write_text("{}")
    (run / "ppo_cartpole_t0_trial_graph.png").write_text("x")
    monkeypatch.setattr(results, "RESULTS_DIR", data)
    results.main(add=[run])
    copied = data / run.name
    assert sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()) == [
        "info/ppo_cartpole_t0_s0_session_df.csv",
        "ppo_cartpole_spec.json",
        "ppo_cartpole_t0_trial_metrics.json",
    ]
    with pytest.raises(typer.Exit):  # a second copy would overwrite it
        results.main(add=[run])


def test_iqm_of_the_pooled_sessions_is_nan_free() -> None:
    """The page never shows a NaN IQM for a cell with data: every shipped session has a score."""
    cells = results.load_cells()
    runs = results.read_runs(results.RESULTS_DIR, cells)
    for found in runs.values():
        for run in found:
            assert not any(math.isnan(s) for s in run.scores), run.name
