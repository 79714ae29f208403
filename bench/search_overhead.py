"""What a search costs over the trials it runs, timed from the shell.

1. `slm-lab run <spec> search_speed search` on an 8-trial search of PPO CartPole-v1 (no
   scheduler, one seed per trial, one CPU per trial, Ray started by the search on this machine's
   CPUs): one whole process, wall seconds.
2. The same 8 trial specs (each trial folder's `<name>_t<i>_spec.json`, the searched values in
   place) run one after another with `slm-lab run <trial spec> search_speed train`, each a whole
   process, wall seconds each.

The ideal for a search on 2 CPUs is two trials at a time with no cost of its own: the sum of the
train walls over 2. The overhead is search wall / ideal - 1. Every child has one torch thread
and the same working directory (a temporary folder: its data/ goes there).

Raw numbers go to bench/out/search_overhead.json.

usage: uv run python bench/search_overhead.py [--frames 50000] [--trials 8]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def timed(cmd: list[str], cwd: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=50_000)
    parser.add_argument("--trials", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "search_speed.json"
        spec_file.write_text(json.dumps(spec(args.frames, args.trials)))
        search_wall = timed([SLM_LAB, "run", str(spec_file), NAME, "search"], tmp)
        [search_dir] = [p for p in (Path(tmp) / "data").iterdir() if p.is_dir()]
        train_walls = []
        for i in range(args.trials):
            trial_spec = json.loads(
                (search_dir / f"{NAME}_t{i}" / f"{NAME}_t{i}_spec.json").read_text()
            )
            path = Path(tmp) / f"trial_{i}.json"
            path.write_text(json.dumps({NAME: trial_spec}))
            train_walls.append(timed([SLM_LAB, "run", str(path), NAME, "train"], tmp))
            print(f"train t{i}: {train_walls[-1]:.2f} s", flush=True)
    ideal = sum(train_walls) / CPUS
    result = {
        "frames": args.frames,
        "trials": args.trials,
        "search_wall_s": search_wall,
        "train_walls_s": train_walls,
        "sequential_s": sum(train_walls),
        "ideal_two_at_a_time_s": ideal,
        "overhead": search_wall / ideal - 1,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(
        f"search {search_wall:.1f} s | {args.trials} trains one after another {sum(train_walls):.1f} s"
        f" | ideal (two at a time) {ideal:.1f} s | overhead {100 * result['overhead']:+.1f}%"
    )


if __name__ == "__main__":
    main()
