"""A/B: SLM Lab's training speed in two checkouts, measured in one run.

For one of the SB3 comparison scripts (bench/*_vs_sb3.py), runs its SLM Lab child (training in a
fresh process, one torch thread) in checkout A and in checkout B alternately, `--pairs` times,
and prints each run's fps (frames / training wall seconds), the medians and the median of the
per-pair ratios B / A. Each checkout runs with its own venv (<checkout>/.venv/bin/python). Make A
the old code, e.g. `git worktree add /tmp/old HEAD~1 && (cd /tmp/old && uv sync --frozen)`.

usage: uv run python bench/ab.py --a /tmp/old --b . ppo_cartpole_vs_sb3.py [--pairs 3] [--frames N]
"""

import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_PAIRS = 3
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def run(checkout: Path, script: str, frames: int | None, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="slm_lab_ab_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [str(checkout / ".venv" / "bin" / "python"), str(checkout / "bench" / script)]
        cmd += ["--seed", str(seed), "--child", "slm_lab", "--result-path", str(result_path)]
        if frames is not None:
            cmd += ["--frames", str(frames)]
        proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
        if proc.returncode != 0 or not result_path.exists():
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
        result = json.loads(result_path.read_text())
    result["fps"] = result["frames"] / result["wall_s"]
    return result


def commit(checkout: Path) -> str:
    """The checkout's HEAD commit, with " (modified)" when its tracked files differ from it."""
    git = ["git", "-C", str(checkout)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"]).returncode != 0
    return head.stdout.strip() + (" (modified)" if dirty else "")


def run_pairs(
    pairs: int, a: Path, b: Path, measure: Callable[[Path], dict], describe: Callable[[dict], str]
) -> None:
    """`measure(checkout)` in A and in B alternately (which goes first alternates from pair to
    pair), `pairs` times; prints both checkouts' commits, each run (`describe`) with the load
    average when it started, the medians of its "fps" and the median of the per-pair ratios
    B / A."""
    typer.echo(f"A: {a} at {commit(a)} | B: {b} at {commit(b)}")
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


@app.command()
def main(
    script: Annotated[str, typer.Argument(help="a bench/*_vs_sb3.py script name")],
    a: Annotated[Path, typer.Option(help="checkout A (the old code)")],
    b: Annotated[Path, typer.Option(help="checkout B (the new code)")] = Path("."),
    pairs: Annotated[int, typer.Option(help="A/B pairs")] = DEFAULT_PAIRS,
    frames: Annotated[int | None, typer.Option(help="frames (default: the script's)")] = None,
    seed: Annotated[int, typer.Option(help="seed of both")] = 0,
) -> None:
    run_pairs(
        pairs,
        a,
        b,
        lambda checkout: run(checkout, script, frames, seed),
        lambda r: (
            f"frames {r['frames']} | wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f} | "
            f"mean_return {r['mean_return']:.1f}"
        ),
    )


if __name__ == "__main__":
    app()
