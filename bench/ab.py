"""A/B: SLM Lab's speed in two checkouts, measured in one run, A and B alternating in pairs.

Each checkout runs with its own venv (<checkout>/.venv/bin/...), so only the library's code
differs; which checkout goes first alternates from pair to pair, and every run is a fresh process
with one torch thread (OMP_NUM_THREADS=MKL_NUM_THREADS=1). The command prints both checkouts'
commits, each run with the 1-minute load average at its launch, the medians of fps and the median
of the per-pair ratios B / A. Make A the old code, e.g.
`git worktree add /tmp/old HEAD~1 && (cd /tmp/old && uv sync --frozen)`.

- `train WORK`: the training loop alone: this checkout's `bench/vs_sb3.py child slm_lab WORK`
  (one SLM Lab Session of the record's spec) run by each checkout's python, so each imports its
  own slm_lab; fps = frames / Session.run's wall seconds.
- `cli SPEC NAME`: whole processes: `<checkout>/.venv/bin/slm-lab run --data-dir <tmp>
  --sessions 1 --max-frame N [-s KEY=VAL ...] SPEC NAME train --log-level WARNING`, the same spec
  file for both; fps = frames / wall seconds from launch to exit.

usage: uv run python bench/ab.py train ppo_cartpole --a /tmp/old [--b .] [--pairs 3] [--frames N]
       uv run python bench/ab.py cli SPEC NAME --a /tmp/old --frames 32768 [-s env=ALE/Pong-v5]
"""

import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from vs_sb3 import COMPARISONS

BENCH = Path(__file__).resolve().parent
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TAIL_CHARS = 2000  # of a failed run's stderr, in the error message

app = typer.Typer(
    help="A/B: SLM Lab's speed in two checkouts, alternating in pairs.",
    add_completion=False,
    rich_markup_mode=None,
)
CheckoutA = Annotated[Path, typer.Option(help="checkout A (the old code)")]
CheckoutB = Annotated[Path, typer.Option(help="checkout B (the new code)")]
Pairs = Annotated[int, typer.Option(min=1, help="A/B pairs")]


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD}
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-TAIL_CHARS:]}")
    return proc


def commit(checkout: Path) -> str:
    """The checkout's HEAD commit, with " (modified)" when its tracked files differ from it."""
    git = ["git", "-C", str(checkout)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"]).returncode != 0
    return head.stdout.strip() + (" (modified)" if dirty else "")


def run_pairs(
    pairs: int,
    a: Path,
    b: Path,
    measure: Callable[[Path], dict[str, Any]],
    describe: Callable[[dict[str, Any]], str],
) -> None:
    """`measure(checkout)` in A and in B alternately, `pairs` times; each run (`describe`), the
    medians of its "fps" and the median of the per-pair ratios B / A."""
    typer.echo(f"A: {a} at {commit(a)} | B: {b} at {commit(b)}")
    for checkout in (a, b):  # each checkout's own Python checks its own bytecode
        python = checkout.resolve() / ".venv" / "bin" / "python"
        if not python.exists():
            raise SystemExit(f"{checkout}: no .venv/bin/python: run `uv sync --frozen` there")
        check = [str(python), str(BENCH / "whole_process.py"), "require-bytecode"]
        done = subprocess.run([*check, "--root", str(checkout.resolve())], capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: {done.stderr.decode().strip().splitlines()[-1]}")
    fps: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(pairs):
        order = (("A", a), ("B", b)) if i % 2 == 0 else (("B", b), ("A", a))
        for label, checkout in order:
            load = os.getloadavg()[0]
            r = measure(checkout.resolve())
            fps[label].append(r["fps"])
            typer.echo(f"[pair {i + 1} {label}] load {load:.1f} | {describe(r)}")
    ratios = [nb / na for na, nb in zip(fps["A"], fps["B"], strict=True)]
    typer.echo(
        f"median fps: A {statistics.median(fps['A']):.0f} | B {statistics.median(fps['B']):.0f} | "
        f"median ratio B/A {statistics.median(ratios):.3f} (per pair: "
        + ", ".join(f"{r:.3f}" for r in ratios)
        + ")"
    )


def train_run(checkout: Path, work: str, frames: int, seed: int) -> dict[str, Any]:
    """One SLM Lab Session of the vs_sb3 record `work`, on the checkout's slm_lab."""
    with tempfile.TemporaryDirectory(prefix="slm_lab_ab_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [str(checkout / ".venv" / "bin" / "python"), str(BENCH / "vs_sb3.py")]
        cmd += ["child", "slm_lab", work, "--frames", str(frames), "--seed", str(seed)]
        cmd += ["--result-path", str(result_path)]
        run(cmd, cwd=checkout)
        result = json.loads(result_path.read_text())
    return result | {"fps": result["frames"] / result["wall_s"]}


def cli_run(checkout: Path, spec: Path, name: str, frames: int, sets: list[str]) -> dict[str, Any]:
    """One whole `slm-lab run ... train` process of the checkout."""
    with tempfile.TemporaryDirectory(prefix="slm_lab_ab_cli_") as tmp:
        cmd = [str(checkout / ".venv" / "bin" / "slm-lab"), "run", "--data-dir", tmp]
        cmd += ["--sessions", "1", "--max-frame", str(frames)]
        for s in sets:
            cmd += ["-s", s]
        cmd += [str(spec), name, "train", "--log-level", "WARNING"]
        start = time.perf_counter()
        run(cmd, cwd=checkout)
        wall = time.perf_counter() - start
        [metrics] = Path(tmp).glob("*/info/*_trial_metrics.json")
        ma = reward_ma(json.loads(metrics.read_text()))
    return {"wall_s": wall, "fps": frames / wall, "total_reward_ma": ma}


def reward_ma(trial_metrics: dict[str, Any]) -> float:
    """A trial's total_reward_ma; NaN where it has none (JSON null: no episode finished)."""
    ma = trial_metrics["total_reward_ma"]
    return math.nan if ma is None else float(ma)


@app.command()
def train(
    work: Annotated[
        str, typer.Argument(help=f"a bench/vs_sb3.py record: {', '.join(COMPARISONS)}")
    ],
    a: CheckoutA,
    b: CheckoutB = Path("."),
    pairs: Pairs = 3,
    frames: Annotated[int | None, typer.Option(min=1, help="frames (default: the work's)")] = None,
    seed: Annotated[int, typer.Option(help="seed of both")] = 0,
) -> None:
    """The training loop of one vs_sb3 record's SLM Lab session, A against B."""
    if work not in COMPARISONS:
        raise typer.BadParameter(f"one of {', '.join(COMPARISONS)}, got {work!r}")
    frames = frames or COMPARISONS[work].default_frames
    run_pairs(
        pairs,
        a,
        b,
        lambda checkout: train_run(checkout, work, frames, seed),
        lambda r: (
            f"frames {r['frames']} | wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f} | "
            f"mean_return {r['mean_return']:.1f}"
        ),
    )


@app.command()
def cli(
    spec: Annotated[Path, typer.Argument(help="a spec file")],
    name: Annotated[str, typer.Argument(help="the spec's name in it")],
    a: CheckoutA,
    frames: Annotated[int, typer.Option(min=1, help="max_frame of every run")],
    b: CheckoutB = Path("."),
    pairs: Pairs = 3,
    sets: Annotated[list[str] | None, typer.Option("-s", help="KEY=VAL, as slm-lab run's")] = None,
) -> None:
    """Whole `slm-lab run` processes of one spec, A against B."""
    spec = spec.resolve()
    run_pairs(
        pairs,
        a,
        b,
        lambda checkout: cli_run(checkout, spec, name, frames, sets or []),
        lambda r: (
            f"wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f} | "
            f"total_reward_ma {r['total_reward_ma']:.2f}"
        ),
    )


if __name__ == "__main__":
    app()
