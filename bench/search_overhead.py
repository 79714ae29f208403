"""What a search costs over the trials it runs, timed from the shell.

1. `slm-lab run <spec> search_speed search` on an 8-trial search of PPO CartPole-v1 (no
   scheduler, one seed per trial, one CPU per trial, Ray started by the search on this machine's
   CPUs): one whole process, wall seconds.
2. The same 8 trial specs (each trial folder's `<name>_t<i>_spec.json`, the searched values in
   place) run one after another with `slm-lab run <trial spec> search_speed train`, each a whole
   process, wall seconds each.

3. The same 8 `train` processes two at a time (t0 with t1, then t2 with t3, ...): wall seconds of
   each pair, i.e. what two trials at a time cost on this machine without Ray (two busy
   processes on 2 cores run slower than one alone, which has the second core to itself).

The ideal for a search on 2 CPUs is two trials at a time with no cost of its own. Two figures:
search wall / (sum of the sequential train walls / 2) - 1 (the ideal as arithmetic), and
search wall / (sum of the pair walls) - 1 (the ideal as measured). Every child has one torch
thread and the same working directory (a temporary folder: its data/ goes there).

With `--ab DIR` (a checkout of another commit, e.g. a `git worktree`), the search alone is
first timed A/B: the other commit's code (DIR first on PYTHONPATH, this venv's packages) and this
one's, alternating, `--pairs` times, each a fresh search in its own temporary folder.

Raw numbers go to bench/out/search_overhead.json.

usage: uv run python bench/search_overhead.py [--frames 50000] [--trials 8] [--ab DIR --pairs 2]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "search_overhead.json"
SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
NAME = "search_speed"
CPUS = 2


def spec(frames: int, trials: int) -> dict:
    base = json.loads((ROOT / "slm_lab/spec/benchmark/ppo/ppo_cartpole.json").read_text())
    s = base["ppo_cartpole"]
    s["env"]["max_frame"] = frames
    s["meta"].update(
        max_session=1, max_trial=trials, random_seed=7, search_resources={"cpu": 1, "gpu": 0}
    )
    s["search"] = {
        "agent.algorithm.gamma__uniform": [0.98, 0.999],
        "agent.algorithm.lam__uniform": [0.9, 0.98],
    }
    return {NAME: s}


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def timed(cmd: list[str], cwd: str, env: dict[str, str] = ENV) -> float:
    return timed_together([cmd], cwd, env)


def timed_together(cmds: list[list[str]], cwd: str, env: dict[str, str] = ENV) -> float:
    """Wall seconds until every one of `cmds`, started together, has exited. Each one's stderr
    goes to its own file: a pipe read only after another process had exited filled up and
    stalled its writer (two `train` runs logging to pipes ran half one after the other)."""
    with tempfile.TemporaryDirectory() as logs:
        files = [open(Path(logs) / f"{i}.err", "w+b") for i in range(len(cmds))]
        start = time.perf_counter()
        procs = [
            subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=f)
            for cmd, f in zip(cmds, files, strict=True)
        ]
        for p in procs:
            p.wait()
        wall = time.perf_counter() - start
        for cmd, p, f in zip(cmds, procs, files, strict=True):
            f.seek(0)
            err = f.read()
            f.close()
            if p.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{err.decode()[-2000:]}")
    return wall


def ab_searches(other: str, pairs: int, search_spec: dict) -> dict[str, list[float]]:
    """The search's wall time with the other checkout's code (A) and this one's (B), in turns."""
    envs = {"A": {**ENV, "PYTHONPATH": str(Path(other).resolve())}, "B": ENV}
    walls: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(pairs):
        for label, env in envs.items():
            with tempfile.TemporaryDirectory() as tmp:
                spec_file = Path(tmp) / "search_speed.json"
                spec_file.write_text(json.dumps(search_spec))
                walls[label].append(
                    timed([SLM_LAB, "run", str(spec_file), NAME, "search"], tmp, env)
                )
            print(f"pair {i}: search {label} {walls[label][-1]:.1f} s", flush=True)
    print(f"A/B search: A {walls['A']} | B {walls['B']}", flush=True)
    return walls


def main(
    frames: Annotated[int, typer.Option(min=1, help="frames a trial")] = 50_000,
    trials: Annotated[int, typer.Option(min=1, help="trials of the search")] = 8,
    ab: Annotated[str | None, typer.Option(help="a checkout of the commit to compare with")] = None,
    pairs: Annotated[int, typer.Option(min=1, help="A/B pairs of searches (with --ab)")] = 2,
) -> None:
    """What a search costs over the trials it runs, timed from the shell."""
    ab_walls = ab_searches(ab, pairs, spec(frames, trials)) if ab else None
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "search_speed.json"
        spec_file.write_text(json.dumps(spec(frames, trials)))
        search_wall = timed([SLM_LAB, "run", str(spec_file), NAME, "search"], tmp)
        [search_dir] = [p for p in (Path(tmp) / "data").iterdir() if p.is_dir()]
        trains = []
        for i in range(trials):
            trial_spec = json.loads(
                (search_dir / f"{NAME}_t{i}" / f"{NAME}_t{i}_spec.json").read_text()
            )
            path = Path(tmp) / f"trial_{i}.json"
            path.write_text(json.dumps({NAME: trial_spec}))
            trains.append([SLM_LAB, "run", str(path), NAME, "train"])
        train_walls = []
        for i, cmd in enumerate(trains):
            train_walls.append(timed(cmd, tmp))
            print(f"train t{i}: {train_walls[-1]:.2f} s", flush=True)
        pair_walls = []
        for i in range(0, len(trains), CPUS):
            pair_walls.append(timed_together(trains[i : i + CPUS], tmp))
            print(f"trains t{i}-t{i + CPUS - 1} together: {pair_walls[-1]:.2f} s", flush=True)
    ideal = sum(train_walls) / CPUS
    paired = sum(pair_walls)
    result = {
        "frames": frames,
        "trials": trials,
        "search_wall_s": search_wall,
        "train_walls_s": train_walls,
        "sequential_s": sum(train_walls),
        "ideal_two_at_a_time_s": ideal,
        "overhead": search_wall / ideal - 1,
        "pair_walls_s": pair_walls,
        "two_at_a_time_s": paired,
        "overhead_vs_two_at_a_time": search_wall / paired - 1,
        "ab_search_walls_s": ab_walls,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(
        f"search {search_wall:.1f} s | {trials} trains one after another {sum(train_walls):.1f} s"
        f" | ideal (half of that) {ideal:.1f} s | overhead {100 * result['overhead']:+.1f}%"
    )
    print(
        f"the {trials} trains two at a time {paired:.1f} s"
        f" | overhead {100 * result['overhead_vs_two_at_a_time']:+.1f}%"
    )


if __name__ == "__main__":
    typer.run(main)
