"""MuJoCo Playground rollout speed: the raw jitted, vmapped Playground step against SLM Lab's
rollout on it, random actions, no net.

For each env (CartpoleBalance, CheetahRun by default) and env count (64, 512, 2048):
- `raw`: Playground's own training wrapper (`wrapper.wrap_for_brax_training`, episodes of 1000
  steps) under `jax.jit`, one call a vector step with uniform random actions made in numpy,
  waited for (`block_until_ready`): the env's own rate, the limit;
- `ours`: SLM Lab's rollout as a `ppo_playground` session runs it: the backend
  (`backend_module(name).make(...)` with the spec's observation normalization, true final
  observations, episode returns, ticking a `Clock`, recording finished episodes as session 0
  does) and the spec's `OnPolicyBatchReplay` of time_horizon steps, emptied whenever it is full.

Each block: build (compiles, or reads JAX's persistent cache), `--warmup` vector steps, then
`--steps` timed ones. `--rounds` rounds alternate the order. Printed per env and count: the
median fps (env steps over all envs per wall second) of each and the paired ratio ours / raw
(goal >= 0.9). Results go to bench/out/playground_rollout.json with the load averages.

usage: uv run --group playground python bench/playground_rollout.py [--rounds 2] [--steps 50]
"""

import os
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import typer
from _rollout import slm_lab_rollout
from vs_sb3 import ROOT, pin_torch_threads, write_report

ENVS = ("CartpoleBalance", "CheetahRun")
NUM_ENVS = (64, 512, 2048)
SPEC = (ROOT / "slm_lab" / "spec" / "benchmark" / "ppo" / "ppo_playground.yaml", "ppo_playground")
VARIANTS = ("raw", "ours")
SEED = 0
MAX_FRAME = 10**12  # the clock's run length: never reached here
EPISODE_LENGTH = 1000


def load_spec(env: str, num_envs: int) -> Any:
    from slm_lab.spec import spec_util

    sets = {
        "env": f"playground/{env}",
        "max_frame": str(MAX_FRAME),
        "env.num_envs": str(num_envs),
        "agent.algorithm.minibatch_size": str(num_envs),
    }
    return spec_util.load_spec(str(SPEC[0]), SPEC[1], sets).spec


def raw_rollout(env_name: str, num_envs: int) -> Callable[[], None]:
    from slm_lab.env import playground_backend

    jax = playground_backend._jax()
    from mujoco_playground import registry, wrapper

    env = registry.load(env_name, config_overrides={"impl": "jax"})
    wrapped = wrapper.wrap_for_brax_training(env, episode_length=EPISODE_LENGTH)
    step = jax.jit(wrapped.step)
    state = jax.jit(wrapped.reset)(jax.random.split(jax.random.PRNGKey(SEED), num_envs))
    rng = np.random.default_rng(SEED)
    shape = (num_envs, env.action_size)
    box = {"state": state}

    def one() -> None:
        box["state"] = step(box["state"], rng.uniform(-1, 1, shape).astype(np.float32))
        jax.block_until_ready(box["state"])

    return one


def ours_rollout(spec: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    horizon = spec.agent.algorithm.time_horizon
    step, env, _ = slm_lab_rollout(spec, SEED, MAX_FRAME, horizon, drain=True)
    return step, env.close


def block(variant: str, env: str, num_envs: int, warmup: int, steps: int) -> float:
    if variant == "raw":
        one, close = raw_rollout(env, num_envs), None
    else:
        one, close = ours_rollout(load_spec(env, num_envs))
    try:
        for _ in range(warmup):
            one()
        start = time.perf_counter()
        for _ in range(steps):
            one()
        return steps * num_envs / (time.perf_counter() - start)
    finally:
        if close is not None:
            close()


def main(
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds")] = 2,
    steps: Annotated[int, typer.Option(min=1, help="timed vector steps per block")] = 50,
    warmup: Annotated[int, typer.Option(min=0, help="vector steps before timing")] = 5,
    envs: Annotated[str, typer.Option(help="comma-separated Playground envs")] = ",".join(ENVS),
    num_envs: Annotated[str, typer.Option(help="comma-separated env counts")] = ",".join(
        map(str, NUM_ENVS)
    ),
) -> None:
    """Raw jitted Playground step vs SLM Lab's rollout (backend + clock + memory), by env count."""
    pin_torch_threads()
    load_before = os.getloadavg()
    typer.echo(
        f"random actions, {steps} timed vector steps per block (after {warmup}), load average "
        f"{load_before[0]:.2f}"
    )
    results: dict[str, dict[str, Any]] = {}
    for env in envs.split(","):
        for n in map(int, num_envs.split(",")):
            fps: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for r in range(rounds):
                for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                    fps[variant].append(block(variant, env, n, warmup, steps))
            ratios = [o / w for o, w in zip(fps["ours"], fps["raw"], strict=True)]
            median = {v: statistics.median(xs) for v, xs in fps.items()}
            results[f"{env}x{n}"] = {"fps": fps, "median": median, "ratios": ratios}
            typer.echo(
                f"{env} x{n}: raw fps {median['raw']:.0f}, ours {median['ours']:.0f}, ours / raw "
                f"{statistics.median(ratios):.3f} (goal >= 0.9)"
            )
    write_report(
        "playground_rollout",
        {"steps": steps, "warmup": warmup, "rounds": rounds, "results": results},
        load_before,
        ("playground", "jax", "mujoco", "numpy", "torch"),
    )


if __name__ == "__main__":
    typer.run(main)
