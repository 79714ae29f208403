"""`slm-lab plot` and `plot-list` on tiny run folders written here (no training), in our format
and in SLM Lab v5's (test/fixtures/README.md): the curves' numbers, the PNG, the colours, the
listing and each mistake's one line."""

import json
import math
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import invoke

from slm_lab import ROOT_DIR
from slm_lab.agent.algorithm.registry import ALGORITHMS
from slm_lab.experiment.plot import (
    ALGORITHM_COLORS,
    DPI,
    FIGURE_SIZE,
    LINE_STYLES,
    OTHER_COLORS,
    Style,
    algorithm_color,
    figure,
    file_name,
    moving_mean,
    read_curves,
    run_styles,
)

NAN = math.nan
V5_RUN = ROOT_DIR / "test" / "fixtures" / "v5_run" / "ppo_cartpole_2026_01_11_100728"
PNG_BYTES = (10_000, 2_000_000)


def write_spec(folder: Path, name: str, algorithm: str, env: str = "CartPole-v1") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "info").mkdir(exist_ok=True)
    spec = {"name": name, "agent": {"algorithm": {"name": algorithm}}, "env": {"name": env}}
    (folder / f"{name}_spec.json").write_text(json.dumps(spec))


def write_ours(
    folder: Path,
    name: str,
    algorithm: str,
    sessions: list[tuple[list[int], list[float]]],
    trial: int = 0,
    trial_metrics: bool = True,
) -> Path:
    """Our run folder: a session_df CSV per (frames, total_reward_ma) session; its
    total_reward is twice its total_reward_ma (NaN alike)."""
    write_spec(folder, name, algorithm)
    for s, (frames, ma) in enumerate(sessions):
        rows = "".join(
            f"{f},{'' if math.isnan(m) else 2 * m},{'' if math.isnan(m) else m}\n"
            for f, m in zip(frames, ma, strict=True)
        )
        csv = folder / "info" / f"{name}_t{trial}_s{s}_session_df.csv"
        csv.write_text("frame,total_reward,total_reward_ma\n" + rows)
    if trial_metrics:
        (folder / "info" / f"{name}_t{trial}_trial_metrics.json").write_text('{"frame": 1}')
    return folder


def write_v5(folder: Path, name: str, trials: dict[int, dict[str, Any]]) -> Path:
    """A v5 run folder: a trial metrics JSON per trial, `local` as given."""
    write_spec(folder, name, "PPO")
    for trial, local in trials.items():
        path = folder / "info" / f"{name}_t{trial}_trial_metrics.json"
        path.write_text(json.dumps({"scalar": {"frame": 1}, "local": local}))
    return folder


# two sessions of ours: s1 stopped a checkpoint early; a session has no return before frame 200
OURS = [([100, 200, 300, 400], [NAN, 10.0, 20.0, 30.0]), ([100, 200, 300], [NAN, NAN, 40.0])]
# v5: total_reward per checkpoint, its MA the mean of all so far (under 100 checkpoints); s1 short
V5_LOCAL = {
    "mean_returns": [[10.0, 20.0, 30.0, 40.0], [20.0, 40.0, 60.0]],
    "frames": [1000, 2000, 3000, 4000],
    "strengths": [[0.0] * 4, [0.0] * 3],
}


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:4] == b"\x89PNG"
    return struct.unpack(">II", data[16:24])  # the IHDR chunk: width, height


def test_our_curve_is_the_mean_and_sample_std_over_sessions_at_their_common_frames(
    tmp_path: Path,
) -> None:
    [curve] = read_curves(write_ours(tmp_path / "run", "ppo_a", "PPO", OURS))
    assert (curve.label, curve.algorithm, curve.env, curve.sessions) == (
        "ppo_a",
        "PPO",
        "CartPole-v1",
        2,
    )
    frames, mean, std = zip(*curve.table(), strict=True)
    assert frames == (100, 200, 300)  # s1 has no frame 400
    assert mean == pytest.approx((NAN, 10.0, 30.0), nan_ok=True)  # frame 200: s0 alone
    assert std == pytest.approx((NAN, NAN, math.sqrt(200)), nan_ok=True)  # one value: no std


def test_v5_curve_is_the_moving_mean_of_each_sessions_returns_cut_to_the_shortest(
    tmp_path: Path,
) -> None:
    [curve] = read_curves(write_v5(tmp_path / "v5", "ppo_v5", {0: V5_LOCAL}), label="v5 PPO")
    assert (curve.label, curve.algorithm, curve.sessions) == ("v5 PPO", "PPO", 2)
    # MAs: s0 [10, 15, 20], s1 [20, 30, 40]
    assert np.array(curve.table()) == pytest.approx(
        np.array(
            [
                (1000, 15.0, 10 / math.sqrt(2)),
                (2000, 22.5, 15 / math.sqrt(2)),
                (3000, 30.0, 20 / math.sqrt(2)),
            ]
        )
    )


def test_the_published_v5_fixture_reads_as_v5_plots_it() -> None:
    [curve] = read_curves(V5_RUN)
    local = json.loads((V5_RUN / "info" / "ppo_cartpole_t0_trial_metrics.json").read_text())
    returns = np.array(local["local"]["mean_returns"])
    ma = returns.cumsum(axis=1) / np.arange(1, returns.shape[1] + 1)  # 10 checkpoints < 100
    assert (curve.label, curve.algorithm, curve.env) == ("ppo_cartpole", "PPO", "CartPole-v1")
    assert curve.frames.tolist() == list(range(10000, 100001, 10000))
    assert curve.mean == pytest.approx(ma.mean(axis=0))
    assert curve.std == pytest.approx(ma.std(axis=0, ddof=1))
    # the last MA is v5's own scalar total_reward_ma, mean over sessions
    assert curve.mean[-1] == pytest.approx(local["scalar"]["total_reward_ma"])


def test_moving_mean_skips_nan_within_the_window() -> None:
    values = np.array([NAN, 1.0, NAN, 3.0, 5.0])
    assert moving_mean(values, 2) == pytest.approx([NAN, 1.0, 1.0, 3.0, 4.0], nan_ok=True)


def test_a_search_gives_a_curve_per_trial_in_both_formats(tmp_path: Path) -> None:
    search = tmp_path / "s_2026_01_01_000000"
    write_spec(search, "s", "DQN")
    (search / "info").rmdir()  # our search folder: its trials' folders have the info/
    (search / "tune").mkdir()
    for trial, algorithm in ((1, "DoubleDQN"), (0, "DQN"), (10, "DQN")):
        write_ours(search / f"s_t{trial}", "s", algorithm, OURS[:1], trial=trial)
    curves = read_curves(search)
    assert [(c.label, c.algorithm) for c in curves] == [
        ("s t0", "DQN"),
        ("s t1", "DoubleDQN"),  # the trial's own spec: the algorithm may be searched
        ("s t10", "DQN"),
    ]
    v5 = read_curves(write_v5(tmp_path / "v5", "v5s", {0: V5_LOCAL, 1: V5_LOCAL}), label="x")
    assert [c.label for c in v5] == ["x t0", "x t1"]


def test_each_algorithm_has_its_own_fixed_colour_and_a_second_run_a_shade_of_it() -> None:
    assert set(ALGORITHMS) <= set(ALGORITHM_COLORS)  # a new algorithm gets its colour here
    assert len(set(ALGORITHM_COLORS.values())) == len(ALGORITHM_COLORS)
    assert algorithm_color("PPO") == "#9467bd"
    other = algorithm_color("HydraDQN")  # a v5 or user algorithm: the same colour every time
    assert other in OTHER_COLORS and algorithm_color("HydraDQN") == other
    ppo = ALGORITHM_COLORS["PPO"]
    assert run_styles(["PPO", "DQN", "PPO", "PPO"]) == [
        Style(ppo, "-"),
        Style(ALGORITHM_COLORS["DQN"], "-"),
        Style("#684884", LINE_STYLES[1]),  # 30% to black
        Style("#b495d1", LINE_STYLES[2]),  # 30% to white
    ]


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("CartPole-v1", "CartPole-v1.png"),
        ("ALE/Pong-v5", "ALE_Pong-v5.png"),
        ("PPO vs. DQN (CartPole)", "PPO_vs._DQN_CartPole.png"),
    ],
)
def test_the_file_is_named_by_the_title(title: str, name: str) -> None:
    assert file_name(title) == name


def colours_of(png: Path) -> set[str]:
    from matplotlib.image import imread

    pixels = (imread(png)[..., :3] * 255).round().astype(int).reshape(-1, 3)
    return {"#" + "".join(f"{c:02x}" for c in p) for p in np.unique(pixels, axis=0)}


def test_plot_draws_ours_beside_v5s_in_one_png_with_the_algorithms_colours(
    tmp_path: Path,
) -> None:
    dqn = write_ours(tmp_path / "data" / "dqn_run", "dqn_a", "DQN", OURS)
    out = tmp_path / "plots"
    result = invoke(["plot", "-t", "CartPole-v1", "-f", f"{V5_RUN},{dqn}", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    png = out / "CartPole-v1.png"
    assert result.stdout.splitlines() == [
        "ppo_cartpole (PPO, CartPole-v1): 2 sessions | frame:100000 | total_reward_ma:238.64 ± 2.59",
        "dqn_a (DQN, CartPole-v1): 2 sessions | frame:300 | total_reward_ma:30.00 ± 14.14",
        f"plot: {png}",
    ]
    assert PNG_BYTES[0] < png.stat().st_size < PNG_BYTES[1]
    assert png_size(png) == (FIGURE_SIZE[0] * DPI, FIGURE_SIZE[1] * DPI)
    colours = colours_of(png)
    assert {ALGORITHM_COLORS["PPO"], ALGORITHM_COLORS["DQN"]} <= colours

    # the other order, a folder by its name in --data-dir, legends given: the same colours
    result = invoke(
        ["plot", "-t", "again", "-f", f"dqn_run,{V5_RUN}", "-l", "mine,v5"]
        + ["--data-dir", str(tmp_path / "data"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    assert [line.split(" (")[0] for line in result.stdout.splitlines()[:2]] == ["mine", "v5"]
    assert {ALGORITHM_COLORS["PPO"], ALGORITHM_COLORS["DQN"]} <= colours_of(out / "again.png")


def test_a_run_of_one_checkpoint_is_a_marked_point(tmp_path: Path) -> None:
    run = write_ours(tmp_path / "one", "ppo_pong", "PPO", [([20_000], [-20.5])])
    [curve] = read_curves(run)
    [line] = figure([curve], "Pong").axes[0].lines
    assert line.get_marker() not in ("None", "", None) and line.get_markersize() > 0
    assert list(line.get_markevery()) == [True]


def test_a_repeated_legend_keeps_its_commas(tmp_path: Path) -> None:
    a = write_ours(tmp_path / "a", "ppo_a", "PPO", OURS)
    b = write_ours(tmp_path / "b", "dqn_a", "DQN", OURS)
    out = ["-o", str(tmp_path / "plots")]
    cases = [
        (["-f", f"{a},{b}", "-l", "lr 1e-3, 64x64", "-l", "v5"], ["lr 1e-3, 64x64", "v5"]),
        (["-f", str(a), "-l", "gamma 0.99, lam 0.95"], ["gamma 0.99, lam 0.95"]),
        (["-f", f"{a},{b}", "-l", "ours, v5"], ["ours", "v5"]),  # one -l, two folders: split
    ]
    for args, labels in cases:
        result = invoke(["plot", "-t", "t"] + args + out)
        assert result.exit_code == 0, result.stderr
        assert [line.split(" (")[0] for line in result.stdout.splitlines()[:-1]] == labels


def test_plot_of_total_reward_reads_that_column_and_v5s_returns_themselves(
    tmp_path: Path,
) -> None:
    [ours] = read_curves(write_ours(tmp_path / "run", "a", "PPO", OURS), metric="total_reward")
    assert np.array(ours.table())[1:] == pytest.approx(
        np.array([(200, 20.0, NAN), (300, 60.0, math.sqrt(800))]), nan_ok=True
    )
    [v5] = read_curves(write_v5(tmp_path / "v5", "v", {0: V5_LOCAL}), metric="total_reward")
    assert np.array(v5.table()) == pytest.approx(  # s0 [10, 20, 30], s1 [20, 40, 60]
        np.array(
            [(1000, 15.0, 10 / math.sqrt(2)), (2000, 30.0, 20 / math.sqrt(2))]
            + [(3000, 45.0, 30 / math.sqrt(2))]
        )
    )
    one = write_ours(tmp_path / "one", "b", "PPO", OURS[:1])
    out = tmp_path / "plots"
    result = invoke(["plot", "-m", "total_reward", "-f", str(one), "-t", "t", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [  # one session: no ± std
        "b (PPO, CartPole-v1): 1 session | frame:400 | total_reward:60.00",
        f"plot: {out / 't.png'}",
    ]


def test_plot_title_defaults_to_the_env(in_tmp: Path) -> None:
    write_ours(in_tmp / "data" / "run", "ppo_a", "PPO", OURS)
    result = invoke(["plot", "-f", "run"])
    assert result.exit_code == 0, result.stderr
    # into the data folder (git-ignored), not the working tree
    assert result.stdout.splitlines()[-1] == "plot: data/plots/CartPole-v1.png"
    assert (in_tmp / "data" / "plots" / "CartPole-v1.png").is_file()
    assert not (in_tmp / "docs").exists()
    result = invoke(["plot", "-f", "run", "-m", "total_reward"])  # not over the default's file
    assert result.stdout.splitlines()[-1] == "plot: data/plots/CartPole-v1_total_reward.png"
    other = in_tmp / "elsewhere"
    write_ours(other / "run", "ppo_a", "PPO", OURS)
    result = invoke(["plot", "-f", "run", "--data-dir", str(other)])
    assert result.stdout.splitlines()[-1] == f"plot: {other / 'plots' / 'CartPole-v1.png'}"


def bad_plot_input(tmp: Path, case: str) -> tuple[list[str], str]:
    """(plot arguments, its one error line) of a mistake."""
    run = write_ours(tmp / "run", "ppo_a", "PPO", OURS)
    match case:
        case "no folder":
            return ["-f", " , "], "--folders: no folder given (e.g. -f data/run_a,data/run_b)"
        case "missing":
            return ["-f", f"{run},{tmp}/gone"], f"{tmp}/gone: no such folder"
        case "missing by name":
            return ["-f", "gone"], "gone: no such folder (nor data/gone)"
        case "not a run":
            return ["-f", str(tmp)], (
                f"{tmp}: not a run folder (expected a folder made by slm-lab run, or an SLM Lab v5 run folder: <spec_name>_spec.json and info/)"
            )
        case "legends":
            return ["-f", f"{run},{run}", "-l", "a"], (
                "--legends: 1 label for 2 folders; give one per folder"
            )
        case "legends repeated":
            return ["-f", f"{run},{run}", "-l", "a, b", "-l", "c", "-l", "d"], (
                "--legends: 3 labels for 2 folders; give one per folder"
            )
        case "title":
            return [
                "-f",
                str(run),
                "-t",
                "//",
            ], "--title '//': no letter or digit to name the file by"
        case "no curves":
            write_spec(tmp / "empty", "e", "PPO")
            return ["-f", str(tmp / "empty")], (
                f"{tmp}/empty: no curves: neither info/*_session_df.csv (SLM Lab) nor info/*_trial_metrics.json with `local` curves (SLM Lab v5)"
            )
        case "v5 without frames":
            v5 = write_v5(tmp / "v5", "v", {0: {"mean_returns": [[1.0]]}})
            return ["-f", str(v5)], f"{v5}/info/v_t0_trial_metrics.json: its `local` has no frames"
        case "metric":
            return ["-f", str(run), "-m", "strength"], (
                "--metric strength: give one of total_reward_ma, total_reward"
            )
        case "bad spec":
            (run / "ppo_a_spec.json").write_text('{"name": "ppo_a"}')
            return ["-f", str(run)], (
                f"{run}/ppo_a_spec.json: not a run's spec record (it needs name, agent.algorithm.name and env.name)"
            )
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "no folder",
        "missing",
        "missing by name",
        "not a run",
        "legends",
        "legends repeated",
        "title",
        "no curves",
        "v5 without frames",
        "metric",
        "bad spec",
    ],
)
def test_a_plot_mistake_is_one_line(in_tmp: Path, case: str) -> None:
    args, message = bad_plot_input(in_tmp / "t", case)
    (in_tmp / "t").mkdir(exist_ok=True)
    result = invoke(["plot", *args, "-o", str(in_tmp / "out")])
    assert (result.exit_code, result.stderr.splitlines()) == (2, [f"error: {message}"])
    assert not (in_tmp / "out").exists()


def test_plot_list_marks_the_folders_with_trial_metrics(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_ours(data / "ppo_a_2026_01_01_000000", "ppo_a", "PPO", OURS)
    write_ours(data / "dqn_b_2026_01_02_000000", "dqn_b", "DQN", OURS, trial_metrics=False)
    shutil.copytree(V5_RUN, data / V5_RUN.name)
    search = data / "s_2026_01_03_000000"
    write_spec(search, "s", "DQN")
    (search / "info").rmdir()
    (search / "tune").mkdir()
    write_ours(search / "s_t0", "s", "DQN", OURS, trial=0)
    write_ours(search / "s_t1", "s", "DQN", OURS, trial=1, trial_metrics=False)
    (data / "notes").mkdir()  # not a run folder: left out
    (data / "notes.txt").write_text("")
    result = invoke(["plot-list", str(data)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "  dqn_b_2026_01_02_000000 | DQN | CartPole-v1 | run",
        "* ppo_a_2026_01_01_000000 | PPO | CartPole-v1 | run",
        "* ppo_cartpole_2026_01_11_100728 | PPO | CartPole-v1 | run",
        "* s_2026_01_03_000000 | DQN | CartPole-v1 | search: 1 trial ended",
        "* = has trial metrics (a trial ended); every run folder with rows can be plotted",
    ]


def test_plot_list_goes_past_a_folder_whose_spec_record_is_broken(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_ours(data / "a_2026_01_01_000000", "a", "PPO", OURS)
    write_spec(data / "b_2026_01_02_000000", "b", "DQN")
    (data / "b_2026_01_02_000000" / "b_spec.json").write_text("{cut short")
    write_spec(data / "c_2026_01_03_000000", "c", "DQN")
    (data / "c_2026_01_03_000000" / "c_spec.json").write_text('{"name": "c"}')
    write_ours(data / "d_2026_01_04_000000", "d", "SAC", OURS, trial_metrics=False)
    write_spec(data / "e_2026_01_05_000000", "e", "DQN")
    (data / "e_2026_01_05_000000" / "e_spec.json").write_text("[1]")
    write_spec(data / "f_2026_01_06_000000", "f", "DQN")
    (data / "f_2026_01_06_000000" / "f_spec.json").write_bytes(b"\xff\xfe")
    result = invoke(["plot-list", str(data)])
    assert result.exit_code == 0, result.stderr
    b, c = (
        data / "b_2026_01_02_000000" / "b_spec.json",
        data / "c_2026_01_03_000000" / "c_spec.json",
    )
    assert result.stdout.splitlines() == [
        "* a_2026_01_01_000000 | PPO | CartPole-v1 | run",
        f"! b_2026_01_02_000000 | {b}: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        f"! c_2026_01_03_000000 | {c}: not a run's spec record (it needs name, agent.algorithm.name and env.name)",
        "  d_2026_01_04_000000 | SAC | CartPole-v1 | run",
        f"! e_2026_01_05_000000 | {data / 'e_2026_01_05_000000' / 'e_spec.json'}: not a run's spec record (it needs name, agent.algorithm.name and env.name)",
        f"! f_2026_01_06_000000 | {data / 'f_2026_01_06_000000' / 'f_spec.json'}: not JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)",
        "* = has trial metrics (a trial ended); every run folder with rows can be plotted",
        "! = its spec record cannot be read, so it cannot be plotted",
    ]


def test_plot_list_of_an_empty_or_missing_folder(tmp_path: Path) -> None:
    result = invoke(["plot-list", str(tmp_path)])
    assert (result.exit_code, result.stdout) == (0, f"no run folders in {tmp_path}\n")
    result = invoke(["plot-list", str(tmp_path / "gone")])
    assert (result.exit_code, result.stderr) == (2, f"error: {tmp_path}/gone: no such folder\n")


@pytest.mark.subprocess
def test_plot_and_plot_list_import_no_torch(tmp_path: Path) -> None:
    """A minimal install without torch can plot (DESIGN 9): neither command loads it, nor
    pandas."""
    run = write_ours(tmp_path / "data" / "run", "ppo_a", "PPO", OURS)
    code = (
        "import sys\n"
        "from slm_lab.cli.main import app\n"
        f"app(['plot', '-f', {str(run)!r}, '-o', {str(tmp_path)!r}], standalone_mode=False)\n"
        f"app(['plot-list', {str(tmp_path / 'data')!r}], standalone_mode=False)\n"
        "print([m for m in ('torch', 'pandas', 'gymnasium') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "CartPole-v1.png").is_file()
