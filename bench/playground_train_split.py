"""Where a `ppo_playground` session's time goes on this machine: the Playground env's steps
against torch (acting, PPO's update), in one SLM Lab session run in this process as `train`
runs it.

The session is built from the spec file (`-s` overrides as on the CLI) and runs `--frames`
frames with timers around its parts (floor.timed): `env` (the backend's vector step: the
jitted JAX step, the true final observations, the returns), `acting` (the policy's forward
pass and sampling), `training` (PPO's epochs of minibatch updates), `update_other` (memory
adds, schedules), `recording`/`checkpoints`/`evaluation`, and what is left of the loop. The
first vector step compiles (or reads JAX's persistent cache): `--warmup` frames run before the
timers start. Results, CPU and wall seconds per part and the fps, go to
bench/out/playground_train_split.json.

usage: uv run --group playground python bench/playground_train_split.py \
    [--frames 491520] [--env CartpoleBalance] [--spec-name ppo_playground] [-s KEY=VALUE ...]
"""

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from floor import CLOCKS, now, since, timed
from vs_sb3 import ROOT, write_report

SPEC_FILE = ROOT / "slm_lab" / "spec" / "benchmark" / "ppo" / "ppo_playground.yaml"
PARTS = ("env", "acting", "training", "update_other", "recording", "checkpoints", "evaluation")


def main(
    frames: Annotated[int, typer.Option(min=1, help="timed frames")] = 8 * 61_440,
    warmup: Annotated[int, typer.Option(min=0, help="frames before the timers start")] = 61_440,
    env: Annotated[str, typer.Option(help="Playground env")] = "CartpoleBalance",
    spec_name: Annotated[str, typer.Option(help="spec in ppo_playground.yaml")] = "ppo_playground",
    sets: Annotated[list[str] | None, typer.Option("-s", help="KEY=VALUE, as the CLI's -s")] = None,
) -> None:
    """One ppo_playground session's time, split into env and torch."""
    import torch

    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.session import Session
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    log_setup.setup("WARNING")
    values = {"env": f"playground/{env}", "max_frame": str(warmup + frames)}
    for item in sets or []:
        key, _, value = item.partition("=")
        values[key] = value
    spec = spec_util.load_spec(str(SPEC_FILE), spec_name, values).spec
    totals = {k: dict.fromkeys(CLOCKS, 0.0) for k in (*PARTS, "loop")}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="playground_split_") as tmp:
        RunLayout(Path(tmp), spec.name).make()
        session = Session(SessionTask(spec, Path(tmp), trial=0, session=0, seed=0))
        agent, backend, algorithm = session.agent, session.env, session.agent.algorithm
        started: dict[str, Any] = {}

        def start_timers_after_warmup(fn: Any) -> Any:
            def step(*args: Any) -> Any:
                if not started and session.clock.frame >= warmup:
                    started["at"] = now()
                    started["frame"] = session.clock.frame
                    backend.step = timed(totals, "env", plain_step)
                    agent.act = timed(totals, "acting", agent_act)
                    agent.update = timed(totals, "update_other", agent_update)
                    algorithm.train = timed(totals, "training", algorithm_train)
                    session.add_row = timed(totals, "recording", add_row)
                    session.save = timed(totals, "checkpoints", save)
                    if session.evaluation is not None:
                        session.evaluation.run = timed(totals, "evaluation", evaluate)
                return fn(*args)

            return step

        plain_step, agent_act, agent_update = backend.step, agent.act, agent.update
        algorithm_train, add_row, save = algorithm.train, session.add_row, session.save
        evaluate = session.evaluation.run if session.evaluation is not None else None
        backend.step = start_timers_after_warmup(plain_step)
        session.run()
        loop = since(started["at"])
        timed_frames = session.clock.frame - started["frame"]
    for clock in CLOCKS:
        totals["update_other"][clock] -= totals["training"][clock]
        totals["loop"][clock] = loop[clock] - sum(totals[k][clock] for k in PARTS)
    wall = loop["wall"]
    typer.echo(
        f"{spec_name} on playground/{env} x{spec.env.num_envs}: {timed_frames} frames in "
        f"{wall:.1f} s ({timed_frames / wall:.0f} fps), torch threads {torch.get_num_threads()}, "
        f"load average {load_before[0]:.2f} before"
    )
    for part in (*PARTS, "loop"):
        t = totals[part]
        typer.echo(
            f"  {part:13s} wall {t['wall']:7.1f} s ({t['wall'] / wall:6.1%})  cpu {t['cpu']:7.1f} s"
        )
    results = {
        "spec": spec_name,
        "env": env,
        "num_envs": spec.env.num_envs,
        "sets": sets or [],
        "warmup_frames": warmup,
        "timed_frames": timed_frames,
        "fps": timed_frames / wall,
        "seconds": totals,
    }
    packages = ("playground", "jax", "mujoco", "torch")
    write_report("playground_train_split", results, load_before, packages)


if __name__ == "__main__":
    typer.run(main)
