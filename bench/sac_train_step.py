"""A/B: milliseconds per SAC (or CrossQ) gradient step on Hopper-v5-sized nets, in one run.

A child process (one torch thread) builds bench/vs_sb3.py's `sac_hopper` session (256x256 nets,
batch 256) with `training_iter` gradient steps per training call, fills its replay memory with
`--fill` frames of uniformly random actions, then times `--calls` training calls and prints the
median milliseconds per gradient step. The parent runs the child with the slm_lab package of
checkout A and of checkout B alternately (PYTHONPATH), `--rounds` times each, and prints every
round, the medians and the median B / A ratio. `--profile` runs one child under cProfile instead.

usage: uv run --group bench python bench/sac_train_step.py --a /tmp/old [--b .] [--rounds 5]
"""

import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_ROUNDS = 5
DEFAULT_CALLS = 200
DEFAULT_FILL = 2_000
DEFAULT_TRAINING_ITER = 4
WARMUP_CALLS = 20
PROFILE_LINES = 30
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def build_session(  # noqa: ANN201 (a Session)
    algo: str, training_iter: int, fill: int, precision: str = "float32"
):
    from vs_sb3 import COMPARISONS, pin_torch_threads

    pin_torch_threads()
    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.session import Session
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    spec = COMPARISONS["sac_hopper"].slm_lab_spec(10**6, 0)
    algorithm = spec["agent"]["algorithm"]
    algorithm.update(name=algo, training_iter=training_iter, training_start_step=10**9)
    spec["agent"]["name"] = algo
    if algo == "CrossQ":  # batch-renormalized critics, no target nets
        spec["agent"]["net"]["batch_renorm"] = True
    spec["agent"]["net"]["precision"] = precision
    log_setup.setup("WARNING")
    config = spec_util.validate(spec, spec["name"]).with_values({"meta.num_threads": 1})
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"sac_train_step_{os.getpid()}"
    RunLayout(tmp, config.name).make()
    session = Session(SessionTask(config, tmp, trial=0, session=0))
    env, agent = session.env, session.agent
    env.reset()
    for _ in range(fill):
        agent.update(env.step(agent.act(env.obs)))
    return session


def child(algo: str, training_iter: int, fill: int, calls: int, profile: bool) -> list[float]:
    algorithm = build_session(algo, training_iter, fill).agent.algorithm
    for _ in range(WARMUP_CALLS):
        algorithm.train()
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        algorithm.train()
        times.append((time.perf_counter() - start) * 1e3 / training_iter)
    if profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(PROFILE_LINES)
        pstats.Stats(profiler).sort_stats("cumtime").print_stats(PROFILE_LINES)
    return times


@app.command()
def main(
    a: Annotated[Path | None, typer.Option(help="checkout A (the old code)")] = None,
    b: Annotated[Path, typer.Option(help="checkout B (the new code)")] = Path("."),
    algo: Annotated[str, typer.Option(help="SoftActorCritic or CrossQ")] = "SoftActorCritic",
    rounds: Annotated[int, typer.Option(help="A/B rounds")] = DEFAULT_ROUNDS,
    calls: Annotated[int, typer.Option(help="timed training calls per child")] = DEFAULT_CALLS,
    fill: Annotated[int, typer.Option(help="random frames in the memory")] = DEFAULT_FILL,
    training_iter: Annotated[
        int, typer.Option(help="gradient steps per call")
    ] = DEFAULT_TRAINING_ITER,
    profile: Annotated[bool, typer.Option(help="one child under cProfile")] = False,
    as_child: Annotated[bool, typer.Option("--child", hidden=True)] = False,
) -> None:
    if as_child or profile:
        times = child(algo, training_iter, fill, calls, profile)
        import slm_lab

        typer.echo(json.dumps({"median_ms": statistics.median(times), "slm_lab": slm_lab.__file__}))
        return
    if a is None:
        raise typer.BadParameter("--a: the checkout to compare against")
    ms: dict[str, list[float]] = {"A": [], "B": []}
    cmd = [sys.executable, __file__, "--child", "--algo", algo, "--calls", str(calls)]
    cmd += ["--fill", str(fill), "--training-iter", str(training_iter)]
    for i in range(rounds):
        order = (("A", a), ("B", b)) if i % 2 == 0 else (("B", b), ("A", a))
        for label, checkout in order:
            env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
            env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            median = result["median_ms"]
            ms[label].append(median)
            typer.echo(
                f"[round {i + 1} {label}] {median:.2f} ms per gradient step ({result['slm_lab']})"
            )
    ratios = [mb / ma for ma, mb in zip(ms["A"], ms["B"], strict=True)]
    typer.echo(
        f"median ms per gradient step: A {statistics.median(ms['A']):.2f} | "
        f"B {statistics.median(ms['B']):.2f} | median B/A {statistics.median(ratios):.3f}"
    )


if __name__ == "__main__":
    app()
