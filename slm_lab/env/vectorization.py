"""How a Gymnasium vector env steps its sub-envs: in the session's process (sync) or one process
each (async), and the `auto` rule that picks one.

Async steps the sub-envs in parallel, but every vector step then pays a pipe round trip per
sub-env (the action out, the observation, reward and info back, each pickled) in the session's
process, and gains only as many parallel steps as there are cores for the session. Per vector
step of n sub-envs that each step in s seconds, with c cores:

    sync:  n * s
    async: n * ASYNC_OVERHEAD_S + ceil(n / min(n, c)) * s

`auto` picks async only when n > 1, c > 1 and async's estimate is at least MIN_ASYNC_SPEEDUP
times faster; s is measured on one sub-env when the vector env is built (`step_seconds`). The
cores c of a session are the free ones: the machine's (its CPU affinity) less its 1-minute load
average, and at most the session's share of them when a trial runs several in parallel. A busy
machine thus steps in sync, where a probe alone would see its slow steps as worth parallelizing.
"""

import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Literal

import gymnasium as gym

from slm_lab.lib.util import counted, machine_cpus

Mode = Literal["sync", "async"]
CONFIG_REASON = "env.vectorization_mode"  # why an explicit mode is used: the spec says so
# the async cost per sub-env per vector step: CartPole-v1 x4 stepped 64 us per vector step sync
# and 747 us async on a 2-core machine (bench/vectorization.py), (747 - 64) / 4 = 171 us
ASYNC_OVERHEAD_S = 170e-6
# async must beat sync by this factor in the estimate: the cores may be busy with other work
# (the estimate takes them as free) and the step time is measured once, on a short probe
MIN_ASYNC_SPEEDUP = 1.5
PROBE_STEPS = 64  # steps of one sub-env timed to measure its step cost


def session_cpus(max_session: int) -> int:
    """The free cores one session's envs may use: the machine's less its load, and at most
    their share among a trial's `max_session` parallel sessions."""
    cpus = machine_cpus()
    free = math.floor(cpus - os.getloadavg()[0])
    return max(1, min(cpus // max_session, free))


def can_run_async(num_envs: int, cpus: int) -> bool:
    """Whether async can gain at all: more than one sub-env, and more than one core."""
    return num_envs > 1 and cpus > 1


def auto_mode(step_seconds: float, num_envs: int, cpus: int) -> Mode:
    """The mode `auto` picks for `num_envs` sub-envs each stepping in `step_seconds`, with
    `cpus` cores for the session (see the module docstring)."""
    if not can_run_async(num_envs, cpus):
        return "sync"
    sync_s = num_envs * step_seconds
    async_s = num_envs * ASYNC_OVERHEAD_S + math.ceil(num_envs / min(num_envs, cpus)) * step_seconds
    return "async" if async_s * MIN_ASYNC_SPEEDUP <= sync_s else "sync"


def step_seconds(make_env: Callable[[], gym.Env], steps: int = PROBE_STEPS) -> float:
    """The median wall time of one step of an env `make_env` builds, on random actions from a
    seeded reset (an episode's end resets it, untimed). The median, not the mean: on a busy
    machine a step the OS preempts for milliseconds is not the env's own cost."""
    env = make_env()
    try:
        env.action_space.seed(0)
        env.reset(seed=0)
        times = []
        for _ in range(steps):
            action = env.action_space.sample()
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            times.append(time.perf_counter() - start)
            if terminated or truncated:
                env.reset()
        return statistics.median(times)
    finally:
        env.close()


def choose(
    mode: Literal["auto", "sync", "async"],
    make_env: Callable[[], gym.Env],
    num_envs: int,
    cpus: int,
    render: bool,
) -> tuple[Mode, str]:
    """The mode a vector env of `num_envs` envs that `make_env` builds steps in, and why (for
    the session's log): an explicit sync or async as given; auto by `auto_mode`, timing one env
    only when async could gain (rendering: sync, the window is the session's)."""
    if mode != "auto":
        return mode, CONFIG_REASON
    if render:
        return "sync", "auto: rendering"
    if not can_run_async(num_envs, cpus):
        return "sync", f"auto: {counted(num_envs, 'env')}, {counted(cpus, 'free core')}"
    seconds = step_seconds(make_env)
    chosen = auto_mode(seconds, num_envs, cpus)
    return (
        chosen,
        f"auto: one step {seconds * 1e6:.0f} us, {counted(num_envs, 'env')}, {counted(cpus, 'free core')}",
    )
