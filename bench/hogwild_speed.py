"""Hogwild's speed: A3C CartPole with 2 workers against 1 worker, and against A2C on the same envs
in one process, as whole CLI processes interleaved in rounds.

Hogwild exists to use more cores: the goal is 2 workers >= 1.7x the frames per second of one
worker. Each round runs the three, in an order that rotates from round to round, each a fresh
`slm-lab run SPEC NAME train` process with one torch thread per process (OMP_NUM_THREADS=1):

- `a3c_2w`: the spec as shipped (`meta.distributed` shared), `--sessions 2`: two workers of
  `num_envs` envs each, `frames / 2` frames each;
- `a3c_1w`: `--sessions 1`: one worker (Hogwild of one: its global nets and process layout, the
  run warns);
- `a2c`: `-s meta.distributed=false -s env.num_envs=2*num_envs --sessions 1`: the same nets,
  optimizer and settings as one session in the CLI's own process, stepping both workers' envs
  as one vector env.

Every run trains `--frames` frames in all. Two rates each: `fps` = frames / the slowest
session's training seconds (its last metrics row's `wall_t`: from its first step to its last,
start-up excluded), and `whole_fps` = frames / the process's wall seconds from launch to exit.
The table has every run with the 1-minute load average at its launch, then the medians and the
per-round ratios 2w/1w and 2w/a2c. Run it on an idle machine with >= 2 free cores: on a loaded
one the workers share cores with everything else.

usage: uv run python bench/hogwild_speed.py [--frames 200000] [--rounds 3]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "slm_lab" / "spec" / "benchmark" / "a3c" / "a3c_gae_cartpole.json"
NAME = "a3c_gae_cartpole"
SPEC_NUM_ENVS = 4  # the spec's env.num_envs, per worker
SLM_LAB = Path(sys.executable).parent / "slm-lab"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TAIL_CHARS = 2000  # of a failed run's stderr, in the error message
# configuration -> the `slm-lab run` arguments beside the spec
CONFIGS: dict[str, list[str]] = {
    "a3c_2w": ["--sessions", "2"],
    "a3c_1w": ["--sessions", "1"],
    "a2c": [
        "--sessions",
        "1",
        "-s",
        "meta.distributed=false",
        "-s",
        f"env.num_envs={2 * SPEC_NUM_ENVS}",
    ],
}


def run_once(config: str, frames: int) -> dict[str, Any]:
    """One whole `slm-lab run ... train` process of `config`: its frames and rates."""
    with tempfile.TemporaryDirectory(prefix="slm_lab_hogwild_speed_") as tmp:
        cmd = [str(SLM_LAB), "run", str(SPEC), NAME, "train", "--data-dir", tmp]
        cmd += ["--max-frame", str(frames), *CONFIGS[config], "--log-level", "WARNING"]
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=tmp, capture_output=True, text=True, env={**os.environ, **ONE_THREAD}
        )
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-TAIL_CHARS:]}")
        last_rows = [pd.read_csv(p).iloc[-1] for p in Path(tmp).glob("*/info/*_session_df.csv")]
    done = int(sum(row["frame"] for row in last_rows))
    train_s = max(float(row["wall_t"]) for row in last_rows)
    return {
        "frames": done,
        "train_s": train_s,
        "wall_s": wall,
        "fps": done / train_s,
        "whole_fps": done / wall,
    }


def main(
    frames: Annotated[int, typer.Option(min=1000, help="frames per run, all workers together")] = (
        200_000
    ),
    rounds: Annotated[int, typer.Option(min=1, help="rounds of the three configurations")] = 3,
) -> None:
    """A3C CartPole's frames per second: 2 Hogwild workers, 1 worker, and A2C on the same envs
    in one process, whole CLI processes interleaved in rounds; the table and the ratios."""
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    names = list(CONFIGS)
    typer.echo(
        f"{'round':>5} {'config':>7} {'load':>5} {'frames':>8} {'train_s':>8} "
        f"{'fps':>8} {'wall_s':>7} {'whole_fps':>9}"
    )
    for i in range(rounds):
        for config in names[i % len(names) :] + names[: i % len(names)]:
            load = os.getloadavg()[0]
            r = run_once(config, frames)
            runs[config].append(r)
            typer.echo(
                f"{i + 1:>5} {config:>7} {load:>5.1f} {r['frames']:>8} {r['train_s']:>8.1f} "
                f"{r['fps']:>8.0f} {r['wall_s']:>7.1f} {r['whole_fps']:>9.0f}"
            )
    for rate in ("fps", "whole_fps"):
        medians = {c: statistics.median(r[rate] for r in runs[c]) for c in CONFIGS}
        typer.echo(f"median {rate}: " + " | ".join(f"{c} {v:.0f}" for c, v in medians.items()))
        for other in ("a3c_1w", "a2c"):
            ratios = [
                two[rate] / one[rate] for two, one in zip(runs["a3c_2w"], runs[other], strict=True)
            ]
            typer.echo(
                f"  a3c_2w / {other}: median {statistics.median(ratios):.2f} (per round: "
                + ", ".join(f"{x:.2f}" for x in ratios)
                + ")"
                + (" [goal >= 1.7]" if other == "a3c_1w" and rate == "fps" else "")
            )


if __name__ == "__main__":
    typer.run(main)
