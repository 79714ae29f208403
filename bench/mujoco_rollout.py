"""MuJoCo rollout speed: Gymnasium's vector env alone vs SLM Lab's rollout on it, random actions.

Two ways to step 16 Hopper-v5 envs with uniform random actions, no net:
- `raw`: `gym.make_vec(ENV_ID, 16, vectorization_mode=MODE, autoreset_mode=SAME_STEP)`, the
  vector env SLM Lab's Gymnasium backend builds for this spec on this machine: `env.step` only;
- `ours`: SLM Lab's rollout as a `ppo_mujoco` session runs it: the backend
  (`backend_module(name).make(config, seed, clock, gamma)` with the spec's observation and
  reward normalization, its episode statistics and final observations, ticking a `Clock`,
  recording finished episodes as session 0 does) and the spec's `OnPolicyBatchReplay` of
  time_horizon steps, emptied (`sample`) whenever it is full, as a training call empties it.

Each measurement is a block: build, reset, `--warmup` vector steps, then `--steps` timed vector
steps; close. `--rounds` rounds run raw and ours interleaved in one process (the order
alternates). Printed per variant, medians over the rounds: fps (env steps over all envs per wall
second), frames per CPU second of this process (less sensitive than wall time to what else runs
on the machine), and the paired ratio ours / raw of each (the goal is >= 0.6).

MODE is what `vectorization_mode: auto` chooses here (printed); `--mode` overrides it for both.
Torch has one thread. Results go to bench/out/mujoco_rollout.json with the load averages.

usage: uv run --group bench python bench/mujoco_rollout.py [--rounds 5] [--steps 2000]
"""

import os
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from _rollout import slm_lab_rollout
from vs_sb3 import ROOT, pin_torch_threads, write_report

ENV_ID = "Hopper-v5"
SPEC = (ROOT / "slm_lab" / "spec" / "benchmark" / "ppo" / "ppo_mujoco.json", "ppo_mujoco")
VARIANTS = ("raw", "ours")
SEED = 0
MAX_FRAME = 10**12  # the clock's run length: never reached here


def load_spec(mode: str | None) -> Any:
    from slm_lab.spec import spec_util

    sets = {"env": ENV_ID, "max_frame": str(MAX_FRAME)}
    if mode is not None:
        sets["env.vectorization_mode"] = mode
    return spec_util.load_spec(str(SPEC[0]), SPEC[1], sets).spec


def raw_rollout(spec: Any, mode: str) -> tuple[Callable[[], Any], Callable[[], None]]:
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    vec = gym.make_vec(
        ENV_ID,
        spec.env.num_envs,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    vec.action_space.seed(SEED)
    vec.reset(seed=SEED)
    sample = vec.action_space.sample
    return (lambda: vec.step(sample())), vec.close


def ours_rollout(spec: Any) -> tuple[Callable[[], Any], Callable[[], None], str]:
    horizon = spec.agent.algorithm.time_horizon
    step, env, _ = slm_lab_rollout(spec, SEED, MAX_FRAME, horizon, drain=True)
    mode = "async" if type(env.vec.unwrapped).__name__ == "AsyncVectorEnv" else "sync"
    return step, env.close, mode


def block(variant: str, spec: Any, mode: str, warmup: int, steps: int) -> dict[str, float]:
    if variant == "raw":
        step, close = raw_rollout(spec, mode)
    else:
        step, close, _ = ours_rollout(spec)
    try:
        for _ in range(warmup):
            step()
        cpu_start, start = time.process_time(), time.perf_counter()
        for _ in range(steps):
            step()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        close()
    frames = steps * spec.env.num_envs
    return {"fps": frames / wall, "cpu_fps": frames / cpu}


def main(
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds")] = 5,
    steps: Annotated[int, typer.Option(min=1, help="timed vector steps per block")] = 2000,
    warmup: Annotated[int, typer.Option(min=0, help="vector steps before timing")] = 100,
    mode: Annotated[
        str | None, typer.Option(help="sync or async (default: what auto picks)")
    ] = None,
) -> None:
    """Raw Gymnasium vector env vs SLM Lab's rollout (backend + clock + memory) on Hopper-v5."""
    pin_torch_threads()
    spec = load_spec(mode)
    _, close, chosen = ours_rollout(spec)  # the mode SLM Lab builds for this spec here
    close()
    spec = load_spec(chosen)  # both variants in that mode, whatever the load does later
    load_before = os.getloadavg()
    typer.echo(
        f"{ENV_ID} x{spec.env.num_envs} ({chosen}), random actions, {steps} timed vector steps "
        f"per block (after {warmup}), load average {load_before[0]:.2f}"
    )
    blocks: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            blocks[variant].append(block(variant, spec, chosen, warmup, steps))
        typer.echo(
            f"[round {r + 1}/{rounds}] "
            + " | ".join(
                f"{v} fps {blocks[v][-1]['fps']:.0f} (per CPU s {blocks[v][-1]['cpu_fps']:.0f})"
                for v in VARIANTS
            )
        )
    ratios = {
        key: [o[key] / w[key] for o, w in zip(blocks["ours"], blocks["raw"], strict=True)]
        for key in ("fps", "cpu_fps")
    }
    median = {
        v: {k: statistics.median(b[k] for b in bs) for k in ("fps", "cpu_fps")}
        for v, bs in blocks.items()
    }
    median_ratio = {k: statistics.median(xs) for k, xs in ratios.items()}
    typer.echo(
        f"medians: raw fps {median['raw']['fps']:.0f}, ours {median['ours']['fps']:.0f}, "
        f"ours / raw {median_ratio['fps']:.3f} | per CPU s: raw {median['raw']['cpu_fps']:.0f}, "
        f"ours {median['ours']['cpu_fps']:.0f}, ours / raw {median_ratio['cpu_fps']:.3f} (goal >= 0.6)"
    )
    results = {
        "env": ENV_ID,
        "num_envs": spec.env.num_envs,
        "vectorization_mode": chosen,
        "steps": steps,
        "warmup": warmup,
        "rounds": rounds,
        "blocks": blocks,
        "median": median,
        "ratios_over_raw": ratios,
        "median_ratio_over_raw": median_ratio,
    }
    write_report("mujoco_rollout", results, load_before, ("gymnasium", "mujoco", "numpy", "torch"))


if __name__ == "__main__":
    typer.run(main)
