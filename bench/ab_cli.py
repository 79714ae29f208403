"""A/B: one `slm-lab run` in two checkouts, whole processes, measured in one run.

Runs `<checkout>/.venv/bin/slm-lab run --data-dir <tmp> --sessions 1 [-s KEY=VAL ...] SPEC NAME
train --log-level WARNING` in checkout A and in checkout B alternately (which goes first
alternates from pair to pair), `--pairs` times, one torch thread each (OMP_NUM_THREADS=1,
MKL_NUM_THREADS=1), and prints each run's wall seconds (launch to exit), fps = frames / wall,
the final total_reward_ma, the medians and the median of the per-pair ratios fps B / fps A.
Both checkouts run the same spec file (the one given, from B's tree), so only the code differs.

usage: uv run python bench/ab_cli.py --a /tmp/old --b . SPEC NAME --frames 32768 [-s env=ALE/Pong-v5]
"""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from ab import run_pairs  # bench/ is the script's directory

app = typer.Typer(add_completion=False, rich_markup_mode=None)


def run(checkout: Path, spec: Path, name: str, frames: int, sets: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="slm_lab_ab_cli_") as tmp:
        cmd = [str(checkout / ".venv" / "bin" / "slm-lab"), "run", "--data-dir", tmp]
        cmd += ["--sessions", "1", "--max-frame", str(frames)]
        for s in sets:
            cmd += ["-s", s]
        cmd += [str(spec), name, "train", "--log-level", "WARNING"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
        [metrics] = Path(tmp).glob("*/info/*_trial_metrics.json")
        scalar = json.loads(metrics.read_text())
    return {"wall_s": wall, "fps": frames / wall, "total_reward_ma": scalar["total_reward_ma"]}


@app.command()
def main(
    spec: Annotated[Path, typer.Argument(help="a spec file")],
    name: Annotated[str, typer.Argument(help="the spec's name in it")],
    a: Annotated[Path, typer.Option(help="checkout A (the old code)")],
    frames: Annotated[int, typer.Option(help="max_frame of every run")],
    b: Annotated[Path, typer.Option(help="checkout B (the new code)")] = Path("."),
    pairs: Annotated[int, typer.Option(help="A/B pairs")] = 3,
    sets: Annotated[list[str] | None, typer.Option("-s", help="KEY=VAL, as slm-lab run's")] = None,
) -> None:
    spec = spec.resolve()
    run_pairs(
        pairs,
        a,
        b,
        lambda checkout: run(checkout, spec, name, frames, sets or []),
        lambda r: (
            f"wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f} | "
            f"total_reward_ma {r['total_reward_ma']:.2f}"
        ),
    )


if __name__ == "__main__":
    app()
