"""Replay speed and size on Atari-shaped steps: whole stacks (frame_stack 1) vs frame stacks (4).

16 envs of 4 x 84 x 84 uint8 stacks of random frames, episodes ending with probability 1/500 a
step (half of them restarting zero-padded, half going on as a lost life does), fill a replay
of `--max-size` transitions and wrap it. Then `sample()` is timed for batch 32 and 256 (median
and 10th percentile over `--samples` draws, after a warm-up), and `add()` per step over the last
quarter of the fill (pages already touched). The two layouts run in turn in one process.

usage: uv run python bench/replay_sample.py [--max-size 100000] [--samples 300]
"""

import argparse
import time

import numpy as np
import torch

from slm_lab.agent.memory.config import ReplayConfig
from slm_lab.agent.memory.layout import Layout
from slm_lab.agent.memory.replay import Replay
from slm_lab.env.transition import Transition

NUM_ENVS, STACK, SIZE = 16, 4, 84
EPISODE_END = 1 / 500  # per step and env
BATCHES = (32, 256)
WARMUP = 20
CPU = torch.device("cpu")


def fill(mem: Replay, steps: int, rng: np.random.Generator) -> float:
    """Add `steps` vector steps; seconds per add over the last quarter."""
    obs = np.zeros((NUM_ENVS, STACK, SIZE, SIZE), dtype=np.uint8)
    obs[:, -1] = rng.integers(0, 256, (NUM_ENVS, SIZE, SIZE), dtype=np.uint8)
    timed, start = 0.0, steps - steps // 4
    for step in range(steps):
        frames = rng.integers(0, 256, (NUM_ENVS, 1, SIZE, SIZE), dtype=np.uint8)
        next_obs = np.concatenate([obs[:, 1:], frames], axis=1)
        ended = rng.random(NUM_ENVS) < EPISODE_END
        actions, rewards = rng.integers(0, 6, NUM_ENVS), rng.random(NUM_ENVS, dtype=np.float32)
        t = Transition(obs, actions, rewards, next_obs, ended, np.zeros(NUM_ENVS, bool))
        t0 = time.perf_counter()
        mem.add(t)
        timed += time.perf_counter() - t0 if step >= start else 0.0
        obs = next_obs
        restart = ended & (rng.random(NUM_ENVS) < 0.5)
        obs[restart] = 0
        obs[restart, -1] = rng.integers(0, 256, (int(restart.sum()), SIZE, SIZE), dtype=np.uint8)
    return timed / (steps - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-size", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    steps = args.max_size // NUM_ENVS * 5 // 4  # fill, then wrap a quarter
    for frame_stack in (1, STACK):
        layout = Layout(
            NUM_ENVS,
            (STACK, SIZE, SIZE),
            np.dtype(np.uint8),
            (),
            np.dtype(np.int64),
            frame_stack,
        )
        config = ReplayConfig(name="Replay", max_size=args.max_size, batch_size=BATCHES[0])
        mem = Replay(config, layout, 1, 10**7)
        add = fill(mem, steps, np.random.default_rng(0))
        line = f"frame_stack {frame_stack}: {mem.nbytes / 1e9:.3f} GB, add {add * 1e6:.0f} us"
        for batch in BATCHES:
            mem.batch_size = batch
            for _ in range(WARMUP):
                mem.sample(CPU)
            times = []
            for _ in range(args.samples):
                t0 = time.perf_counter()
                mem.sample(CPU)
                times.append(time.perf_counter() - t0)
            line += f", sample({batch}) {np.median(times) * 1e3:.3f} ms"
            line += f" (p10 {np.percentile(times, 10) * 1e3:.3f})"
        print(line, flush=True)
        del mem


if __name__ == "__main__":
    main()
