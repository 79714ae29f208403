"""Session and trial metrics on tiny hand-built dataframes, worked by hand with SLM Lab v5's
formulas (slm_lab/experiment/analysis.py upstream); the progress line's format; the session
graph's panels and scales, the trial and experiment graphs' labels and axes."""

import json
import math
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from slm_lab.experiment import analysis
from slm_lab.experiment.analysis import (
    consistency,
    format_duration,
    format_metrics,
    loss_scale,
    plot_experiment,
    plot_session,
    plot_trial,
    progress_line,
    session_metrics,
    session_panels,
    trial_metrics,
)
from slm_lab.experiment.layout import RunLayout
from slm_lab.lib import logger as log_setup

BASELINE = 10.0


def session_df(frames: list[int], opt_steps: list[int], rewards: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "frame": frames,
            "opt_step": opt_steps,
            "total_reward": rewards,
            "total_reward_ma": pd.Series(rewards).expanding().mean(),
        }
    )


# a NaN row (no episode finished yet) comes first and is dropped; then s = R - B = [2, 4, 3, 7]
DF = session_df([50, 100, 200, 300, 400], [0, 0, 5, 10, 20], [math.nan, 12.0, 14.0, 13.0, 17.0])


def test_session_metrics_hand_computed() -> None:
    m = session_metrics(DF, BASELINE)
    assert m["frame"] == 400
    assert m["total_reward_ma"] == 14.0  # (12 + 14 + 13 + 17) / 4
    assert m["strength"] == 4.0  # (2 + 4 + 3 + 7) / 4
    assert m["max_strength"] == 7.0
    assert m["final_strength"] == 7.0
    # (2/100 + 4/200 + 3/300 + 7/400) / 16 = 0.0675 / 16
    assert m["sample_efficiency"] == pytest.approx(0.00421875)
    # the opt_step-0 term (s=2 at opt_step 0) is dropped from the sum of ratios, not from sum_i s_i:
    # (4/5 + 3/10 + 7/20) / (2 + 4 + 3 + 7) = 1.45 / 16
    assert m["training_efficiency"] == pytest.approx(0.090625)
    # drops: min(4-2,0) + min(3-4,0) + min(7-3,0) = -1 over the strengths but the last, 2 + 4 + 3
    assert m["stability"] == pytest.approx(1 - 1 / 9)


def test_stability_leaves_the_last_strength_out_of_the_denominator() -> None:
    m = session_metrics(session_df([100, 200, 300], [1, 2, 3], [10.0, 20.0, 5.0]), 0.0)
    # drops: min(20-10,0) + min(5-20,0) = -15; denominator s_0 + s_1 = 30 (not 35)
    assert m["stability"] == pytest.approx(0.5)


def test_stability_of_one_checkpoint_is_nan() -> None:
    m = session_metrics(session_df([100], [1], [15.0]), BASELINE)  # no drop over no strength
    assert math.isnan(m["stability"])
    assert m["strength"] == m["final_strength"] == 5.0


def test_session_metrics_negative_strength() -> None:
    m = session_metrics(session_df([100, 200], [1, 2], [8.0, 6.0]), BASELINE)  # s = [-2, -4]
    assert (m["strength"], m["max_strength"], m["final_strength"]) == (-3.0, -2.0, -4.0)
    assert m["stability"] == pytest.approx(0.0)  # 1 - |min(-4 - -2, 0) / -2|


def test_session_metrics_without_any_episode_are_nan() -> None:
    m = session_metrics(session_df([100, 200], [0, 0], [math.nan, math.nan]), BASELINE)
    assert math.isnan(m["strength"]) and math.isnan(m["stability"])
    assert m["frame"] == 200  # the session still ran to its last checkpoint


def test_training_efficiency_is_zero_without_any_training() -> None:
    """Every opt_step-0 ratio is dropped: an empty sum, 0, over sum_i s_i = 5."""
    m = session_metrics(session_df([100, 200], [0, 0], [12.0, 13.0]), BASELINE)
    assert m["training_efficiency"] == 0.0
    assert m["sample_efficiency"] == pytest.approx((2 / 100 + 3 / 200) / 5)


def test_efficiency_and_stability_are_nan_when_strengths_sum_to_zero() -> None:
    m = session_metrics(session_df([100, 200], [1, 2], [10.0, 10.0]), BASELINE)  # s = [0, 0]
    assert math.isnan(m["sample_efficiency"]) and math.isnan(m["training_efficiency"])
    assert math.isnan(m["stability"])


# two sessions at frames 100, 200, 300 (session b has an extra frame 400, dropped by alignment)
A = session_df([100, 200, 300], [1, 2, 3], [12.0, 14.0, 16.0])  # s = [2, 4, 6]
B = session_df([100, 200, 300, 400], [1, 2, 3, 4], [14.0, 14.0, 20.0, 30.0])  # s = [4, 4, 10, 20]


def test_consistency_hand_computed() -> None:
    # per-frame sample std over sessions: |2-4|/sqrt2, 0, |6-10|/sqrt2 -> sum 3*sqrt2
    # per-frame mean: 3, 4, 8 -> sum 15
    assert consistency([A, B], BASELINE) == pytest.approx(1 - 2 * 3 * math.sqrt(2) / 15)


def test_consistency_keeps_checkpoints_where_some_sessions_have_no_return_yet() -> None:
    """A session without a finished episode at frame 100 leaves that checkpoint's mean to the
    others and its (one-value) sample std out, as pandas' NaN-skipping mean and std do."""
    a = session_df([100, 200, 300], [1, 2, 3], [math.nan, 12.0, 14.0])  # s = [nan, 2, 4]
    b = session_df([100, 200, 300], [1, 2, 3], [14.0, 14.0, 20.0])  # s = [4, 4, 10]
    # means 4, 3, 7 -> 14; stds -, sqrt2, 3 sqrt2 -> 4 sqrt2
    assert consistency([a, b], BASELINE) == pytest.approx(1 - 2 * 4 * math.sqrt(2) / 14)


def test_consistency_is_nan_with_one_session() -> None:
    assert math.isnan(consistency([A], BASELINE))
    assert math.isnan(trial_metrics([A], BASELINE)["consistency"])


def test_trial_metrics_are_session_means_plus_consistency() -> None:
    m = trial_metrics([A, B], BASELINE)
    assert m["frame"] == 300.0  # the first session's last frame
    assert m["strength"] == pytest.approx((4.0 + 9.5) / 2)
    assert m["max_strength"] == pytest.approx((6.0 + 20.0) / 2)
    assert m["final_strength"] == pytest.approx((6.0 + 20.0) / 2)
    assert m["stability"] == pytest.approx(1.0)  # no drops in either
    assert m["consistency"] == pytest.approx(1 - 2 * 3 * math.sqrt(2) / 15)
    assert list(m) == [
        "frame",
        "total_reward_ma",
        "strength",
        "max_strength",
        "final_strength",
        "sample_efficiency",
        "training_efficiency",
        "stability",
        "consistency",
        "total_reward_ma_iqm",
        "total_reward_ma_ci_low",
        "total_reward_ma_ci_high",
        "strength_iqm",
        "strength_ci_low",
        "strength_ci_high",
    ]


def test_trial_metrics_skip_a_session_whose_metric_is_nan() -> None:
    """A mean over the sessions that have the metric, as pandas' DataFrame.mean skips NaN."""
    one_checkpoint = session_df([100], [1], [15.0])  # s = [5]: stability NaN
    drop = session_df([100, 200, 300], [1, 2, 3], [14.0, 12.0, 16.0])  # s = [4, 2, 6]
    no_episode = session_df([100, 200, 300], [0, 0, 0], [math.nan] * 3)  # every metric NaN
    m = trial_metrics([one_checkpoint, drop, no_episode], BASELINE)
    assert m["stability"] == pytest.approx(1 - 2 / 6)  # the middle session's alone
    assert m["strength"] == pytest.approx((5.0 + 4.0) / 2)
    assert m["final_strength"] == pytest.approx((5.0 + 6.0) / 2)
    assert m["total_reward_ma"] == pytest.approx((15.0 + 14.0) / 2)
    assert m["frame"] == 100.0


def test_trial_metrics_of_one_session_are_valid_json_with_a_null_consistency(
    tmp_path: Path,
) -> None:
    layout = RunLayout(tmp_path / "run", "ppo_pong")
    layout.make()
    analysis.write_trial_tables([DF], BASELINE, layout, 0)
    for path in (layout.trial_metrics(0), layout.root / layout.trial_metrics(0).name):
        text = path.read_text()
        assert "NaN" not in text
        written = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}"))
        assert written["consistency"] is None and written["strength"] == pytest.approx(4.0)


def test_format_metrics_line() -> None:
    line = format_metrics(
        {
            "frame": 200000.0,
            "total_reward_ma": 499.7,
            "sample_efficiency": 0.00123,
            "consistency": math.nan,
        }
    )
    assert (
        line
        == "frame:2.00e+05 | total_reward_ma:499.70 | sample_efficiency:1.23e-03 | consistency:nan"
    )


def test_progress_line_formats_each_kind_and_leaves_nan_out() -> None:
    row = {
        "frame": 12000,
        "t": 3000,
        "epi": 150,
        "opt_step": 1200,
        "wall_t": 10.0,
        "fps": 1234.4,
        "total_reward": 45.678,
        "total_reward_ma": math.nan,  # left out
        "loss": 0.012345,
        "lr": 0.0003,
        "entropy": 0.6931,
        "alpha": 1234.5,
        "clip_frac": 0.0,
    }
    # 12,000 frames in 10 s: 88,000 more take 73.3 s
    assert progress_line(row, 100_000) == (
        "12% eta 1m13s | frame:12,000 | t:3,000 | epi:150 | opt_step:1,200 | wall_t:10s"
        " | fps:1,234 | total_reward:45.68 | loss:0.0123 | lr:3.00e-04 | entropy:0.693"
        " | alpha:1.23e+03 | clip_frac:0"
    )


PPO_ROW = {
    "frame": 12000,
    "t": 3000,
    "epi": 150,
    "opt_step": 1200,
    "wall_t": 10.0,
    "fps": 1234.4,
    "total_reward": 45.678,
    "total_reward_ma": 40.0,
    "loss": 0.012345,
    "approx_kl": 0.01,
    "lr": 0.0003,
}


HEAD = "12% eta 1m13s"


@pytest.mark.parametrize(
    ("width", "columns"),
    [
        (10, ""),  # the head, always
        (27, ""),
        (28, " | frame:12,000"),
        (52, " | frame:12,000 | total_reward_ma:40.00"),
        # total_reward does not fit, so nothing after it is taken (loss:0.0123 would fit)
        (72, " | frame:12,000 | total_reward_ma:40.00"),
        (73, " | frame:12,000 | total_reward:45.68 | total_reward_ma:40.00"),
        (87, " | frame:12,000 | total_reward:45.68 | total_reward_ma:40.00 | loss:0.0123"),
        (
            99,
            " | frame:12,000 | fps:1,234 | total_reward:45.68 | total_reward_ma:40.00 | loss:0.0123",
        ),
        # then the algorithm's, in the row's order, then the other clock columns
        (
            139,
            " | frame:12,000 | fps:1,234 | total_reward:45.68 | total_reward_ma:40.00 | loss:0.0123 | approx_kl:0.01 | lr:3.00e-04",
        ),
        (
            140,
            " | frame:12,000 | t:3,000 | fps:1,234 | total_reward:45.68 | total_reward_ma:40.00 | loss:0.0123 | approx_kl:0.01 | lr:3.00e-04",
        ),
    ],
)
def test_progress_line_within_a_width_keeps_the_first_columns(width: int, columns: str) -> None:
    """Taken in order frame, total_reward_ma, total_reward, loss, fps, the algorithm's, the
    clock's, until one does not fit; printed in the row's order."""
    line = progress_line(PPO_ROW, 100_000, width)
    assert line == HEAD + columns
    assert len(line) <= max(width, len(HEAD))


def test_progress_line_wide_enough_is_the_full_line() -> None:
    full = progress_line(PPO_ROW, 100_000)
    assert progress_line(PPO_ROW, 100_000, len(full)) == full
    assert progress_line(PPO_ROW, 100_000, len(full) - 1) != full


def test_progress_line_eta_is_at_the_pace_since_its_origin() -> None:
    # resumed at frame 10,000 after 1000 s (a slow first day): 2,000 frames in the 10 s since,
    # so 88,000 more take 440 s, not the 7,407 s the whole run's average pace says
    row = {"frame": 12000, "wall_t": 1010.0}
    assert progress_line(row, 100_000, origin=(10_000, 1000.0)).startswith("12% eta 7m20s |")
    assert progress_line(row, 100_000).startswith("12% eta 2h03m |")


def test_progress_line_at_the_end() -> None:
    row = {"frame": 400, "t": 200, "epi": 9, "opt_step": 24, "wall_t": 3725.0, "fps": 0.4}
    assert progress_line(row, 400) == (
        "100% eta 0s | frame:400 | t:200 | epi:9 | opt_step:24 | wall_t:1h02m | fps:0"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (59.4, "59s"),
        (59.6, "1m00s"),
        (65.0, "1m05s"),
        (3599.6, "1h00m"),
        (7380, "2h03m"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


NAN = math.nan
CLOCK = {
    "frame": [100, 200, 300],
    "t": [50, 100, 150],
    "epi": [1, 2, 3],
    "opt_step": [1, 2, 3],
    "wall_t": [1.0, 2.0, 3.0],
    "fps": [100.0, 90.0, 110.0],
    "total_reward": [10.0, 12.0, 15.0],
    "total_reward_ma": [10.0, 11.0, 12.3],
}


def table(**columns: list[float]) -> dict[str, np.ndarray]:
    return {k: np.array(v, dtype=float) for k, v in {**CLOCK, **columns}.items()}


def test_session_panels_pick_changing_columns_and_log_scale_losses_spanning_decades() -> None:
    t = table(
        loss=[100.0, 1.0, 0.5],  # positive, 200x: log
        policy_loss=[-0.1, 0.2, 0.1],  # sizes within 2x: linear
        actor_loss=[1.0, 100.0, 10.0],  # exactly two decades: log
        value_loss=[0.0, 1e3, 1e-2],  # five decades and a zero: symlog
        q_mean=[NAN, 1.0, 1e4],  # wide but not a loss: linear; its NaN (not measured yet) skipped
        alpha_loss=[NAN, NAN, NAN],  # never measured: no panel
        lr=[1e-3, 1e-3, 1e-3],  # constant: no panel
    )
    assert session_panels(t) == [
        ("loss", "log"),
        ("policy_loss", "linear"),
        ("actor_loss", "log"),
        ("value_loss", "symlog"),
        ("q_mean", "linear"),
    ]


@pytest.mark.parametrize(
    ("values", "scale"),
    [
        ([5.0, 0.05], "log"),  # two decades
        ([5.0, 0.0501], "linear"),  # just under two decades
        ([1e3, 1.0, 1e-3, NAN], "log"),  # NaN (not measured yet) left out
        ([1e3, 0.0, 1e-3], "symlog"),  # a zero, which log cannot show
        ([-50.0, -0.1], "symlog"),  # negative sizes over 2.7 decades (a SAC actor loss)
        ([-1.0, 1.0, 0.5], "linear"),  # crosses zero within one decade
        ([0.0, 0.0], "linear"),  # no size to span
        # a loss crossing zero: its few sizes near 0 (under the lowest tenth) do not count
        ([1e-6, *np.linspace(-1.0, 1.0, 20)], "linear"),
        ([NAN], "linear"),
    ],
)
def test_loss_scale_is_log_over_two_decades_and_symlog_with_values_at_or_below_zero(
    values: list[float], scale: str
) -> None:
    assert loss_scale(np.array(values)) == scale


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the graphs draw, instead of their PNGs."""
    drawn: list[Any] = []
    monkeypatch.setattr(analysis, "_write_png", lambda fig, path: drawn.append(fig))
    return drawn


def test_session_graph_sets_each_panels_scale(figures: list[Any]) -> None:
    plot_session(table(loss=[100.0, 1.0, 0.5], value_loss=[0.0, 1e3, 1e-2]), "t", Path("x"))
    [fig] = figures
    _, loss_ax, value_ax = fig.axes
    assert (loss_ax.get_yscale(), value_ax.get_yscale()) == ("log", "symlog")
    assert value_ax.yaxis.get_transform().linthresh == 1e-2  # linear under the smallest size


def test_session_and_trial_graphs_keep_every_label_inside_the_figure_and_off_the_other_panels(
    figures: list[Any],
) -> None:
    """The fixed margins hold wide tick labels (a symlog loss, six-digit returns, a small lr)
    and long y labels, in one column of panels and in two."""
    n = 50
    wide = {
        "loss": np.linspace(-1.5e5, 2.0, n),
        "value_loss": np.geomspace(1e-8, 1e2, n),
        "explained_variance": np.linspace(-33.0, 1.0, n),
        "lr": np.linspace(3e-4, 0.0, n),
    }
    returns = np.linspace(-150_000.0, 150_000.0, n)
    rows = {"frame": np.arange(n) * 2e5, "total_reward": returns, "total_reward_ma": returns}
    plot_session(rows | wide, "a_long_spec_name_for_a_title t0 s0", Path("x"))
    plot_session(rows | wide | {f"{k}_2": v for k, v in wide.items()}, "two columns", Path("x"))
    plot_trial([rows, rows], "t", Path("x"))
    for fig in figures:
        boxes = [ax.get_tightbbox() for ax in fig.axes]
        for box in boxes:
            assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1 :])


@pytest.mark.parametrize(("sessions", "label"), [(1, "1 session"), (3, "3 sessions")])
def test_trial_graph_band_says_mean_and_std_over_the_sessions(
    figures: list[Any], sessions: int, label: str
) -> None:
    plot_trial([table()] * sessions, "t", Path("x"))
    [fig] = figures
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"mean ± std over {label}"]


def drawn_points(line: Any) -> list[int]:
    """The indices of a line's data points that carry a visible marker."""
    if line.get_marker() in ("None", None, "") or line.get_markersize() <= 0:
        return []
    every = line.get_markevery()
    n = len(line.get_xdata())
    return [i for i in range(n) if every is None or every[i]]


def test_graphs_of_one_checkpoint_mark_the_point(figures: list[Any]) -> None:
    one_row = {"frame": np.array([20_000.0]), "total_reward": np.array([-20.5])}
    one_row["total_reward_ma"] = one_row["total_reward"]
    plot_session(one_row, "s", Path("x"))
    plot_trial([one_row], "t", Path("x"))
    session_fig, trial_fig = figures
    lines = [line for fig in (session_fig, trial_fig) for ax in fig.axes for line in ax.lines]
    assert len(lines) == 4  # total_reward and its MA in each graph
    assert all(drawn_points(line) == [0] for line in lines)


def test_a_long_series_marks_only_its_lone_points(figures: list[Any]) -> None:
    n = 3 * analysis.FEW_POINTS
    returns = np.full(n, NAN)
    returns[5] = 1.0  # alone between NaNs
    returns[n // 2 :] = np.arange(n - n // 2)  # a line
    plot_trial(
        [{"frame": np.arange(n) * 100.0, "total_reward": returns, "total_reward_ma": returns}],
        "t",
        Path("x"),
    )
    [fig] = figures
    assert [drawn_points(ax.lines[0]) for ax in fig.axes] == [[5], [5]]


def test_experiment_graph_puts_log_distributed_values_on_log_axes(figures: list[Any]) -> None:
    trials = [
        {"lr": 1e-4, "gamma": 0.9, "total_reward_ma": 10.0, "status": "completed"},
        {"lr": 1e-2, "gamma": 0.99, "total_reward_ma": 20.0, "status": "completed"},
    ]
    plot_experiment(trials, ["lr", "gamma"], "status", Path("x"), log_variables=["lr"])
    [fig] = figures
    assert [(ax.get_xlabel(), ax.get_xscale()) for ax in fig.axes] == [
        ("lr", "log"),
        ("gamma", "linear"),
    ]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:4] == b"\x89PNG"
    return struct.unpack(">II", data[16:24])  # the IHDR chunk: width, height


def test_session_graph_goes_to_two_columns_with_many_panels(tmp_path: Path) -> None:
    few = {f"d{i}": [1.0, 2.0, 3.0] for i in range(4)}
    many = {f"d{i}": [1.0, 2.0, 3.0] for i in range(8)}
    plot_session(table(**few), "few", tmp_path / "few.png")
    plot_session(table(**many), "many", tmp_path / "many.png")
    (w_few, h_few), (w_many, h_many) = (
        png_size(tmp_path / "few.png"),
        png_size(tmp_path / "many.png"),
    )
    assert w_many == 2 * w_few  # two columns of panels
    assert h_few == h_many  # 1 + 4 rows: returns, then 4 panels (one column) or 4 pairs (two)


def test_console_width_is_columns_else_the_terminals_else_no_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A pipe or a file keeps whole lines; COLUMNS wins when set (less the line's head)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    head = log_setup.console_head_width()
    with open(tmp_path / "console.txt", "w") as file:  # not a terminal
        monkeypatch.setattr(sys, "__stderr__", file)
        assert log_setup.console_width() is None
        monkeypatch.setenv("COLUMNS", "100")
        assert log_setup.console_width() == 100 - head


def test_a_sessions_eta_is_at_the_pace_since_its_first_progress_line(tmp_path: Path) -> None:
    """A resumed session (here at 50,000 frames after 2 hours): its first line goes by the whole
    run's pace, the next ones by the pace since that first line."""
    from loguru import logger

    from slm_lab.env.clock import Clock
    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.recorder import Recorder

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    try:
        recorder = Recorder(RunLayout(tmp_path, "eta"), 0, 0, Clock(100_000, 4), episodes=False)
        first = {"frame": 50_000, "wall_t": 7200.0}
        second = {"frame": 60_000, "wall_t": 7300.0}
        recorder.row(first, [first])
        recorder.row(second, [first, second])
    finally:
        logger.remove(sink)
    # 7200 s for 50,000 frames; then 100 s for 10,000, so 40,000 more take 400 s (the whole
    # run's pace would say 4,867 s)
    assert [line.split(" | ")[0] for line in lines] == ["50% eta 2h00m", "60% eta 6m40s"]


def test_the_first_fps_after_a_resume_counts_the_frames_and_time_since_the_resume(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped at frame 1,200 (its last row at 1,000): the frames between that row and the
    stop ran before the resumed clock started, so they do not count in the next row's fps."""
    from types import SimpleNamespace

    from slm_lab.env import clock as clock_module
    from slm_lab.experiment.recorder import MetricsTracker

    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    clock = clock_module.Clock(10_000, 4)
    clock.load_state_dict({"t": 300, "frame": 1200, "epi": 0, "opt_step": 0, "wall_t": 60.0})
    env = SimpleNamespace(total_reward=math.nan)
    agent = SimpleNamespace(metrics=dict)
    tracker = MetricsTracker(clock, env, agent)  # type: ignore[arg-type]
    tracker.load_state_dict({"rows": [{"frame": 1000, "total_reward": math.nan}]})
    for _ in range(200):  # 800 frames in 2 s
        clock.tick(0)
    now[0] = 2.0
    assert tracker.add_row()["fps"] == 400.0


# -- how sure a number is: the interquartile mean and the bootstrap confidence interval ------
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([4.0, 1.0, 3.0, 2.0], 2.5),  # n=4: the lowest and the highest dropped, (2 + 3) / 2
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0], 4.5),  # n=8: two each side, (3+4+5+6) / 4
        ([1.0, 2.0, 9.0], 4.0),  # n=3: floor(3/4) = 0 dropped, the plain mean
        ([5.0, math.nan], 5.0),  # a NaN (a session without a value) is left out
        ([7.0], 7.0),
    ],
)
def test_iqm_drops_the_lowest_and_the_highest_quarter(values: list[float], expected: float) -> None:
    assert analysis.iqm(np.array(values)) == pytest.approx(expected)


def test_iqm_of_nothing_is_nan() -> None:
    assert math.isnan(analysis.iqm(np.array([math.nan])))


def test_bootstrap_ci_of_the_mean_hand_computed() -> None:
    """Sessions [0, 0, 0, 10]: a resample's mean is 10 k / 4 with k ~ Binomial(4, 1/4) the
    times 10 is drawn; P(k = 0) = 0.32 > 2.5%, P(k <= 2) = 0.949 < 97.5% <= P(k <= 3) = 0.996,
    so the 95% interval is [0, 7.5]. Sessions [0, 1]: means 0, 0.5, 1 with P 1/4, 1/2, 1/4: [0, 1]."""
    assert analysis.bootstrap_mean_ci([np.array([0.0, 0.0, 0.0, 10.0])]) == (0.0, 7.5)
    assert analysis.bootstrap_mean_ci([np.array([0.0, 1.0])]) == (0.0, 1.0)


def test_bootstrap_ci_is_the_same_for_the_same_seed() -> None:
    values = [np.sqrt(np.arange(1.0, 13.0))]  # means that seldom tie: another seed moves a bound
    first = analysis.bootstrap_mean_ci(values)
    assert analysis.bootstrap_mean_ci(values) == first  # BOOTSTRAP_SEED: reproducible
    assert analysis.bootstrap_mean_ci(values, seed=analysis.BOOTSTRAP_SEED + 1) != first
    low, high = first
    assert low < np.mean(values) < high


def test_bootstrap_ci_is_stratified_by_run() -> None:
    """Two runs whose sessions agree within each run: every resample draws 2 sessions from each
    run, so its mean is always 5; pooled into one run, the same values give a wide interval."""
    assert analysis.bootstrap_mean_ci([np.array([0.0, 0.0]), np.array([10.0, 10.0])]) == (5.0, 5.0)
    low, high = analysis.bootstrap_mean_ci([np.array([0.0, 0.0, 10.0, 10.0])])
    assert (low, high) == (0.0, 10.0) or low < 5.0 < high


def test_bootstrap_ci_of_one_session_is_nan() -> None:
    """One value (or one value per run) cannot vary under resampling: no interval, not one of
    zero width."""
    assert all(math.isnan(b) for b in analysis.bootstrap_mean_ci([np.array([3.0])]))
    assert all(
        math.isnan(b) for b in analysis.bootstrap_mean_ci([np.array([3.0]), np.array([5.0])])
    )


def test_bootstrap_ci_per_point_leaves_sessions_without_a_value_out() -> None:
    """[session, point] values: each point's interval; a point where one session has a value
    has none; a NaN session is left out of a point's means."""
    values = np.array([[math.nan, 0.0, 0.0], [1.0, 1.0, 0.0], [math.nan, math.nan, 0.0]])
    low, high = analysis.bootstrap_mean_ci([values])
    assert math.isnan(low[0]) and math.isnan(high[0])  # one session has a value at point 0
    assert (low[1], high[1]) == (0.0, 1.0)  # sessions 0 and 1: [0, 1] as above
    assert (low[2], high[2]) == (0.0, 0.0)  # all agree


def test_trial_metrics_gain_the_iqm_and_the_ci_of_total_reward_ma_and_strength() -> None:
    tables = [session_df([100, 200], [1, 2], [r, r]) for r in (10.0, 12.0, 14.0, 24.0)]
    m = trial_metrics(tables, BASELINE)
    # total_reward_ma per session 10, 12, 14, 24: IQM (12 + 14) / 2; strength = that - 10
    assert m["total_reward_ma"] == 15.0
    assert m["total_reward_ma_iqm"] == 13.0
    assert m["strength_iqm"] == 3.0
    low, high = analysis.bootstrap_mean_ci([np.array([10.0, 12.0, 14.0, 24.0])])
    assert (m["total_reward_ma_ci_low"], m["total_reward_ma_ci_high"]) == (low, high)
    assert (m["strength_ci_low"], m["strength_ci_high"]) == pytest.approx((low - 10, high - 10))
    assert 10.0 <= low < 15.0 < high <= 24.0


def test_trial_metrics_of_one_session_have_its_value_as_iqm_and_no_ci() -> None:
    m = trial_metrics([A], BASELINE)
    assert m["total_reward_ma_iqm"] == m["total_reward_ma"]
    assert math.isnan(m["total_reward_ma_ci_low"]) and math.isnan(m["total_reward_ma_ci_high"])


def test_format_metrics_shows_a_ci_as_one_item() -> None:
    line = format_metrics(
        {
            "total_reward_ma": 15.0,
            "total_reward_ma_iqm": 13.0,
            "total_reward_ma_ci_low": 11.5,
            "total_reward_ma_ci_high": 19.5,
            "strength_ci_low": math.nan,
            "strength_ci_high": math.nan,
        }
    )
    assert line == (
        "total_reward_ma:15.00 | total_reward_ma_iqm:13.00 | total_reward_ma_ci:[11.50, 19.50]"
        " | strength_ci:nan"
    )
