"""Atari rollout speed: ale-py's vector env alone vs SLM Lab's rollout on it, random actions.

Three ways to step 16 ALE/Pong-v5 games with uniform random actions, no net:
- `raw`: ale-py's `AtariVectorEnv` as SLM Lab's Atari backend makes it (`gym.make_vec(...,
  vectorization_mode="vector_entry_point", autoreset_mode=SAME_STEP, reward_clipping=False,
  episodic_life=False, life_loss_info=False)`, v5 defaults otherwise): `env.step` only;
- `ppo`: SLM Lab's rollout as a `ppo_atari` session runs it: the backend
  (`backend_module(name).make(config, seed, clock, gamma)`, its episode statistics, clipped
  training rewards, life-loss terminals and final observations, ticking a `Clock`, recording
  finished episodes as session 0 does) and the spec's memory, an `OnPolicyBatchReplay` of
  time_horizon steps emptied (`sample`) whenever it is full, as a training call empties it;
- `dqn`: the same with `dqn_atari`'s `Replay`. Its max_size is cut to what the warm-up writes
  (`WARMUP_STEPS` x 16), so the timed steps overwrite rows as a full replay does; a fresh 2e5
  replay's first pass also pays the page faults of new memory, which a full one does not.

Each measurement is a block: build the env (and memory), reset, `WARMUP_STEPS` vector steps
(the on-policy batch and the cut replay are then written through once), then `--steps` timed
vector steps; close. fps counts env steps (agent steps, 4 ALE frames each) over all envs, as
SLM Lab's frame counter does. For each ALE `num_threads` in `--threads` (0: ale-py's default,
one thread per core), `--rounds` rounds run raw, ppo and dqn interleaved in one process (the
order rotates each round). Printed per num_threads and variant, medians over the rounds:
- fps, and the paired ratio ours / raw of each round (the goal is >= 0.9);
- frames per CPU second (this process's CPU time, all threads: ALE's too), and its ratio: the
  cost of the work, less sensitive than wall time to what else runs on the machine;
- microseconds per vector step spent outside ale-py's `step` (timed around it, on the wall
  clock): action sampling and the loop for raw; that plus SLM Lab's layers (wrappers, backend,
  clock, memory add) for ours. Their difference is what SLM Lab adds to a step.

`--parallel` adds what a multi-session run sees: os.cpu_count() processes start together, one
per core as `slm-lab run ... train` runs its sessions, each timing the `ppo` rollout for
`--steps` vector steps after its warm-up, for each `num_threads` in `--parallel-threads`;
printed: the summed fps of the processes (each process's own frames / its own timed wall) and
their frames per CPU second, medians over `--rounds`. On a machine that other work shares, a
process with more threads also takes a larger share of the cores from that work, so the total
fps of num_threads 0 there overstates what it gains; frames per CPU second shows the cost of
the extra threads.

Torch has one thread (the memory's `sample` makes tensors); ALE's threads are its own.
Results go to bench/out/atari_rollout.json, with the load averages before and after.

usage: uv run --group bench python bench/atari_rollout.py [--rounds 3] [--steps 300]
       [--threads 0 --threads 1 --threads 2] [--parallel/--no-parallel]
"""

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from _rollout import slm_lab_rollout
from vs_sb3 import ROOT, pin_torch_threads, write_report

ENV_ID = "ALE/Pong-v5"
NUM_ENVS = 16  # the benchmark specs' env.num_envs
SPEC_DIR = ROOT / "slm_lab" / "spec" / "benchmark"
SPECS = {  # variant -> (spec file, spec name): whose env and memory the rollout uses
    "ppo": (SPEC_DIR / "ppo" / "ppo_atari.json", "ppo_atari"),
    "dqn": (SPEC_DIR / "dqn" / "dqn_atari.json", "dqn_atari"),
}
VARIANTS = ("raw", "ppo", "dqn")
# vector steps before timing: at least ppo_atari's time_horizon (128), so that the on-policy
# batch has been written through and emptied once
WARMUP_STEPS = 130
SEED = 0
MAX_FRAME = 10**12  # the clock's run length: never reached here

Stepper = Callable[[], None]  # one vector step (and what follows it: the memory's add)


@dataclass
class Rollout:
    step: Stepper
    close: Callable[[], None]
    ale: Any  # ale-py's AtariVectorEnv that `step` steps (directly or under SLM Lab's layers)


def raw_rollout(num_threads: int) -> Rollout:
    """One vector step of ale-py's vector env as the backend builds it."""
    import ale_py
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    gym.register_envs(ale_py)
    vec = gym.make_vec(
        ENV_ID,
        NUM_ENVS,
        vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.SAME_STEP,
        reward_clipping=False,
        episodic_life=False,
        life_loss_info=False,
        num_threads=num_threads,
    )
    vec.action_space.seed(SEED)
    vec.reset(seed=SEED)
    sample = vec.action_space.sample
    return Rollout(lambda: vec.step(sample()), vec.close, vec)


def ours_rollout(variant: str, num_threads: int) -> Rollout:
    """One vector step + memory add of SLM Lab's backend and the spec's memory."""
    from slm_lab.spec import spec_util

    spec_file, name = SPECS[variant]
    sets = {"env": ENV_ID, "env.num_threads": str(num_threads)}
    if variant == "dqn":  # see the module docstring: the timed steps overwrite written rows
        sets["agent.memory.max_size"] = str(WARMUP_STEPS * NUM_ENVS)
    spec = spec_util.load_spec(str(spec_file), name, sets).spec
    algorithm = spec.agent.algorithm
    on_policy = variant == "ppo"
    batch_steps = algorithm.time_horizon * algorithm.num_unrolls if on_policy else 1
    step, env, _ = slm_lab_rollout(spec, SEED, MAX_FRAME, batch_steps, drain=on_policy)
    return Rollout(step, env.close, env.vec.unwrapped)


def rollout(variant: str, num_threads: int) -> Rollout:
    return raw_rollout(num_threads) if variant == "raw" else ours_rollout(variant, num_threads)


def block(variant: str, num_threads: int, steps: int) -> dict[str, float]:
    """One block: build, warm up, time `steps` vector steps, close. Returns fps, frames per CPU
    second of this process (all its threads, ALE's included) and the wall microseconds per
    vector step spent outside ALE's `step` (actions, SLM Lab's layers, the memory)."""
    r = rollout(variant, num_threads)
    try:
        for _ in range(WARMUP_STEPS):
            r.step()
        ale_step, in_ale = r.ale.step, [0.0]

        def timed_ale_step(actions: Any) -> Any:
            start = time.perf_counter()
            out = ale_step(actions)
            in_ale[0] += time.perf_counter() - start
            return out

        r.ale.step = timed_ale_step  # an instance attribute: the wrappers above call it
        cpu_start, start = time.process_time(), time.perf_counter()
        for _ in range(steps):
            r.step()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        r.close()
    frames = steps * NUM_ENVS
    return {
        "fps": frames / wall,
        "cpu_fps": frames / cpu,
        "outside_ale_us": (wall - in_ale[0]) / steps * 1e6,
    }


def median(xs: list[float]) -> float:
    return statistics.median(xs)


METRICS = ("fps", "cpu_fps", "outside_ale_us")


def interleaved(threads: list[int], rounds: int, steps: int) -> dict[str, Any]:
    """Per num_threads: each variant's blocks and medians, and the paired ratios ours / raw of
    fps and of frames per CPU second."""
    results: dict[str, Any] = {}
    for num_threads in threads:
        blocks: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for r in range(rounds):
            k = r % len(VARIANTS)
            for variant in VARIANTS[k:] + VARIANTS[:k]:  # rotate who goes first
                blocks[variant].append(block(variant, num_threads, steps))
            typer.echo(
                f"[num_threads {num_threads} round {r + 1}/{rounds}] "
                + " | ".join(
                    f"{v} fps {blocks[v][-1]['fps']:.0f} (per CPU s {blocks[v][-1]['cpu_fps']:.0f},"
                    f" outside ALE {blocks[v][-1]['outside_ale_us']:.0f} us/step)"
                    for v in VARIANTS
                )
            )
        ratios = {
            f"{v}_{key}": [
                ours[key] / raw[key] for ours, raw in zip(blocks[v], blocks["raw"], strict=True)
            ]
            for v in VARIANTS[1:]
            for key in ("fps", "cpu_fps")
        }
        results[str(num_threads)] = {
            "blocks": blocks,
            "median": {
                v: {key: median([b[key] for b in bs]) for key in METRICS}
                for v, bs in blocks.items()
            },
            "ratios_over_raw": ratios,
            "median_ratio_over_raw": {k: median(xs) for k, xs in ratios.items()},
        }
    return results


def parallel(threads: list[int], rounds: int, steps: int) -> dict[str, Any]:
    """Per num_threads: the summed fps of os.cpu_count() `ppo` rollouts started together, and
    the median of their frames per CPU second."""
    procs_n = os.cpu_count() or 1
    results: dict[str, Any] = {}
    for r in range(rounds):
        for num_threads in threads if r % 2 == 0 else threads[::-1]:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "ppo"]
            cmd += ["--threads", str(num_threads), "--steps", str(steps)]
            procs = [
                subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
                for _ in range(procs_n)
            ]
            outs = [p.communicate()[0] for p in procs]
            if any(p.returncode != 0 for p in procs):
                raise SystemExit(f"{' '.join(cmd)} failed")
            children = [json.loads(out) for out in outs]
            total = sum(c["fps"] for c in children)
            cpu_fps = median([c["cpu_fps"] for c in children])
            entry = results.setdefault(str(num_threads), {"total_fps": [], "cpu_fps": []})
            entry["total_fps"].append(total)
            entry["cpu_fps"].append(cpu_fps)
            typer.echo(
                f"[parallel x{procs_n} round {r + 1}/{rounds}] num_threads {num_threads}: "
                f"total fps {total:.0f} | fps per CPU s (median of the processes) {cpu_fps:.0f}"
            )
    for entry in results.values():
        entry["median_total_fps"] = median(entry["total_fps"])
        entry["median_cpu_fps"] = median(entry["cpu_fps"])
    return {"processes": procs_n, "results": results}


def table(results: dict[str, Any]) -> None:
    typer.echo(
        f"{'num_threads':>11} | {'variant':>7} | {'fps':>6} | {'/ raw':>6} | {'fps per CPU s':>13} |"
        f" {'/ raw':>6} | {'us/step outside ALE':>19}"
    )
    for num_threads, r in results.items():
        for v in VARIANTS:
            m = r["median"][v]
            q = r["median_ratio_over_raw"]
            fps_ratio, cpu_ratio = (
                ("", "") if v == "raw" else (f"{q[f'{v}_fps']:.3f}", f"{q[f'{v}_cpu_fps']:.3f}")
            )
            typer.echo(
                f"{num_threads:>11} | {v:>7} | {m['fps']:6.0f} | {fps_ratio:>6} |"
                f" {m['cpu_fps']:13.0f} | {cpu_ratio:>6} | {m['outside_ale_us']:19.0f}"
            )


def main(
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds per num_threads")] = 3,
    steps: Annotated[int, typer.Option(min=1, help="timed vector steps per block")] = 300,
    threads: Annotated[
        list[int] | None, typer.Option(help="ALE num_threads to try (repeat the option)")
    ] = None,
    parallel_threads: Annotated[
        list[int] | None, typer.Option(help="num_threads for --parallel (repeat the option)")
    ] = None,
    run_parallel: Annotated[
        bool, typer.Option("--parallel/--no-parallel", help="also time one rollout per core")
    ] = True,
    child: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Raw ALE vector env vs SLM Lab's rollout (backend + clock + memory), random actions."""
    pin_torch_threads()
    threads = threads or [0, 1, 2]
    if child is not None:  # a --parallel child: one block of `child` at threads[0]
        typer.echo(json.dumps(block(child, threads[0], steps)))
        return
    load_before = os.getloadavg()
    typer.echo(
        f"{ENV_ID} x{NUM_ENVS}, random actions, {steps} timed vector steps per block "
        f"(after {WARMUP_STEPS}), load average {load_before[0]:.2f}"
    )
    report: dict[str, Any] = {
        "env": ENV_ID,
        "num_envs": NUM_ENVS,
        "steps": steps,
        "warmup_steps": WARMUP_STEPS,
        "rounds": rounds,
        "interleaved": interleaved(threads, rounds, steps),
    }
    if run_parallel:
        report["parallel"] = parallel(parallel_threads or [0, 1], rounds, steps)
    typer.echo(
        "medians (fps: env steps per second over all envs; / raw: median of the per-round "
        "ratios ours / raw)"
    )
    table(report["interleaved"])
    if run_parallel:
        p = report["parallel"]
        typer.echo(
            f"x{p['processes']} ppo rollouts at once, medians: "
            + " | ".join(
                f"num_threads {t}: total fps {r['median_total_fps']:.0f}, fps per CPU s "
                f"{r['median_cpu_fps']:.0f}"
                for t, r in p["results"].items()
            )
        )
    write_report("atari_rollout", report, load_before, ("ale-py", "gymnasium", "numpy", "torch"))


if __name__ == "__main__":
    typer.run(main)
