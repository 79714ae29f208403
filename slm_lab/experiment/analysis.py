"""Session and trial metrics and graphs, computed as SLM Lab v5 computes them.

With R_i the total_reward at checkpoint i = 0..N-1 (checkpoints before the first finished
episode have none and are left out) and B the random policy's mean return:
  s_i = R_i - B; strength = mean(s_i); max_strength = max(s_i); final_strength = s_{N-1}
  sample_efficiency = sum_i(s_i / frame_i) / sum_i(s_i)
  training_efficiency = sum_i(s_i / opt_step_i) / sum_i(s_i)
    (terms with opt_step_i = 0 leave the numerator only: 0 for a session that never trained)
  stability = 1 - | sum_{i=0}^{N-2} min(s_{i+1} - s_i, 0) / sum_{i=0}^{N-2} s_i |
    (the denominator leaves out the last checkpoint; NaN for one checkpoint)
  total_reward_ma = the last checkpoint's mean of total_reward over the last 100 checkpoints
A ratio whose denominator is 0 is NaN.
Trial: each session metric is its mean over the sessions that have it (a session's NaN is
skipped); frame is the first session's last frame (every session of a trial checkpoints at the
same frames); and, over the checkpoints all sessions have, with s_ij session j's strength
  consistency = 1 - 2 * sum_i std_j(s_ij) / sum_i mean_j(s_ij)
the std the sample std, both skipping a session without a return yet at checkpoint i (a
checkpoint with one return adds its mean and no std); NaN for one session.
"""

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

SESSION_METRICS = (
    "strength",
    "max_strength",
    "final_strength",
    "sample_efficiency",
    "training_efficiency",
    "stability",
)
TRIAL_METRICS = ("frame", "total_reward_ma", *SESSION_METRICS, "consistency")


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den != 0 else math.nan


def _efficiency(s: np.ndarray, x: np.ndarray) -> float:
    """sum_i(s_i / x_i) / sum_i(s_i), the terms with x_i = 0 (infinite) dropped from the first sum."""
    keep = x > 0
    return _ratio((s[keep] / x[keep]).sum(), s.sum())


def session_metrics(df: pd.DataFrame, baseline: float) -> dict[str, float]:
    frame = float(df["frame"].iloc[-1])
    df = df.dropna(subset=["total_reward"])
    if df.empty:
        return {
            "frame": frame,
            "total_reward_ma": math.nan,
            **dict.fromkeys(SESSION_METRICS, math.nan),
        }
    s = df["total_reward"].to_numpy(dtype=float) - baseline
    drops = np.minimum(np.diff(s), 0).sum()
    return {
        "frame": frame,
        "total_reward_ma": float(df["total_reward_ma"].iloc[-1]),
        "strength": float(s.mean()),
        "max_strength": float(s.max()),
        "final_strength": float(s[-1]),
        "sample_efficiency": _efficiency(s, df["frame"].to_numpy(dtype=float)),
        "training_efficiency": _efficiency(s, df["opt_step"].to_numpy(dtype=float)),
        "stability": 1 - abs(_ratio(drops, s[:-1].sum())),
    }


def consistency(dfs: list[pd.DataFrame], baseline: float) -> float:
    if len(dfs) < 2:
        return math.nan
    aligned = pd.concat(
        [df.set_index("frame")["total_reward"].rename(j) for j, df in enumerate(dfs)],
        axis=1,
        join="inner",
    )
    s = aligned - baseline
    # pandas skips NaN: a session without a return yet is left out of that checkpoint's terms
    return 1 - 2 * _ratio(s.std(axis=1, ddof=1).sum(), s.mean(axis=1).sum())


def trial_metrics(dfs: list[pd.DataFrame], baseline: float) -> dict[str, float]:
    per_session = pd.DataFrame([session_metrics(df, baseline) for df in dfs])
    means = per_session.mean()  # skips a session's NaN
    return {
        "frame": float(per_session["frame"].iloc[0]),
        **{k: float(means[k]) for k in ("total_reward_ma", *SESSION_METRICS)},
        "consistency": consistency(dfs, baseline),
    }


def format_metrics(metrics: dict[str, float]) -> str:
    parts = []
    for k, v in metrics.items():
        parts.append(
            f"{k}:{v:.2e}"
            if k == "frame"
            else f"{k}:{v:.2f}"
            if abs(v) >= 0.01 or v == 0 or math.isnan(v)
            else f"{k}:{v:.2e}"
        )
    return " | ".join(parts)


def plot_session(df: pd.DataFrame, title: str, path: Path) -> None:
    cols = [c for c in ("loss", "entropy", "explore_var", "lr") if c in df and df[c].notna().any()]
    fig, axes = plt.subplots(1 + len(cols), 1, figsize=(8, 3 * (1 + len(cols))), sharex=True)
    axes = np.atleast_1d(axes)
    axes[0].plot(df["frame"], df["total_reward"], label="total_reward", alpha=0.5)
    axes[0].plot(df["frame"], df["total_reward_ma"], label="total_reward_ma")
    axes[0].legend()
    axes[0].set_title(title)
    for ax, c in zip(axes[1:], cols, strict=True):
        ax.plot(df["frame"], df[c])
        ax.set_ylabel(c)
    axes[-1].set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_trial(dfs: list[pd.DataFrame], title: str, path: Path) -> None:
    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for ax, col in zip(axes, ("total_reward", "total_reward_ma"), strict=True):
        aligned = pd.concat(
            [df.set_index("frame")[col].rename(j) for j, df in enumerate(dfs)], axis=1, join="inner"
        )
        mean, std = aligned.mean(axis=1), aligned.std(axis=1, ddof=0)
        ax.plot(aligned.index, mean, label=f"mean of {len(dfs)} sessions")
        ax.fill_between(aligned.index, mean - std, mean + std, alpha=0.25)
        ax.set_ylabel(col)
        ax.legend()
    axes[0].set_title(title)
    axes[-1].set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
