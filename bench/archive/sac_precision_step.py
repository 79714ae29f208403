"""Milliseconds per SAC gradient step in SLM Lab, `agent.net.precision` float32 against
bf16-mixed, interleaved in one process.

Two sessions of sac_train_step.py's kind (bench/vs_sb3.py's sac_hopper spec: Hopper-v5, [256, 256]
nets, batch 256, `--training-iter` gradient steps a training call, the memory filled with
`--fill` frames of random actions), one per precision, built side by side in one process on one
torch thread; each round times `--calls` training calls of each and prints milliseconds per
gradient step; the medians and their ratio come last.

usage: uv run --group bench python bench/sac_precision_step.py [--rounds 5] [--calls 50]
"""

import statistics
import time
from typing import Annotated

import typer
from sac_train_step import DEFAULT_FILL, DEFAULT_TRAINING_ITER, WARMUP_CALLS, build_session

PRECISIONS = ("float32", "bf16-mixed")
app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command()
def main(
    rounds: Annotated[int, typer.Option(help="interleaved rounds")] = 5,
    calls: Annotated[int, typer.Option(help="timed training calls a round and precision")] = 50,
    fill: Annotated[int, typer.Option(help="random frames in the memory")] = DEFAULT_FILL,
    training_iter: Annotated[
        int, typer.Option(help="gradient steps per call")
    ] = DEFAULT_TRAINING_ITER,
) -> None:
    algorithms = {
        p: build_session("SoftActorCritic", training_iter, fill, p).agent.algorithm
        for p in PRECISIONS
    }
    for algorithm in algorithms.values():
        for _ in range(WARMUP_CALLS):
            algorithm.train()
    ms: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for r in range(rounds):
        for p, algorithm in algorithms.items():
            start = time.perf_counter()
            for _ in range(calls):
                algorithm.train()
            ms[p].append((time.perf_counter() - start) * 1e3 / (calls * training_iter))
        typer.echo(f"round {r + 1}: " + " | ".join(f"{p} {v[-1]:.2f} ms" for p, v in ms.items()))
    medians = {p: statistics.median(v) for p, v in ms.items()}
    typer.echo(
        f"median ms per gradient step: float32 {medians['float32']:.2f} | bf16-mixed "
        f"{medians['bf16-mixed']:.2f} | float32 / bf16-mixed {medians['float32'] / medians['bf16-mixed']:.2f}x"
    )


if __name__ == "__main__":
    app()
