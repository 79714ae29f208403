"""From how many rows bfloat16 autocast pays on this CPU, for a MuJoCo-sized MLP.

The body of SLM Lab's MuJoCo nets (obs 11 -> 256 -> 256, ReLU; a 256 -> 1 head in float32, as
`agent.net.precision: bf16-mixed` runs it) timed in float32 and under torch.autocast to bfloat16,
interleaved in one process on one thread, at several batch sizes: a no-grad forward (acting, a
target net) and a forward plus backward (a training pass). Prints microseconds per call, the
median of `--rounds` rounds of `--calls` calls, and bf16's speed relative to float32 (> 1: bf16
is faster). SAC's minibatches are 256 rows, PPO's MuJoCo minibatches 64, acting 1-16 rows.

usage: uv run python bench/bf16_batch_crossover.py [--rounds 3] [--calls 1000]
"""

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Annotated

import torch
import typer
from torch import nn

BATCHES = (1, 16, 64, 128, 256)


def timed(fn: Callable[[], None], calls: int) -> float:
    """Microseconds per call of `fn`, after a warm-up."""
    for _ in range(calls // 10):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def act(body: nn.Module, head: nn.Module, x: torch.Tensor, bf16: bool) -> None:
    """A no-grad pass, as acting and target nets make."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        h = body(x)
    head(h.float())


def train(body: nn.Module, head: nn.Module, x: torch.Tensor, bf16: bool) -> None:
    """A forward and backward pass, as a training step makes."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        h = body(x)
    head(h.float()).sum().backward()


def main(
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds")] = 3,
    calls: Annotated[int, typer.Option(min=10, help="timed calls a round and variant")] = 1000,
) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(11, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
    head = nn.Linear(256, 1)
    typer.echo(f"torch {torch.__version__}, 1 thread; us per call (median of {rounds} rounds)")
    typer.echo(
        "rows | no-grad f32 | no-grad bf16 | bf16 speed | train f32 | train bf16 | bf16 speed"
    )
    for rows in BATCHES:
        x = torch.randn(rows, 11)
        times: dict[str, list[float]] = {}
        for _ in range(rounds):
            for name, fn in (("act", act), ("train", train)):
                for bf16 in (False, True):
                    key = f"{name}_{'bf16' if bf16 else 'f32'}"
                    call = partial(fn, body, head, x, bf16)
                    times.setdefault(key, []).append(timed(call, calls))
        med = {k: statistics.median(v) for k, v in times.items()}
        typer.echo(
            f"{rows:4d} | {med['act_f32']:11.0f} | {med['act_bf16']:12.0f} |"
            f" {med['act_f32'] / med['act_bf16']:9.2f}x | {med['train_f32']:9.0f} |"
            f" {med['train_bf16']:10.0f} | {med['train_f32'] / med['train_bf16']:9.2f}x"
        )


if __name__ == "__main__":
    typer.run(main)
