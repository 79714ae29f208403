"""Evaluation runs during training: `meta.rigorous_eval` whole episodes every
`meta.eval_frequency` frames (default: log_frequency) and at the end of the run.

An evaluation plays on an env of its own, built from the spec's env section (at most
rigorous_eval sub-envs), with its observation normalizer frozen at the training normalizer's
statistics. Its returns are the env's own (RecordEpisodeStatistics, below every reward transform)
of whole episodes, on Atari whole games; the reward transforms and life-loss terminals, which
change nothing measured, are left off. The agent acts in evaluation mode (`Agent.evaluating`):
schedules at their end values, no memory writes, no training, greedy actions when
`meta.eval_greedy`. Its row: where the training clock stood, `total_reward` the mean return of its
episodes, `total_reward_ma` the mean of total_reward over the last 100 evaluations, and the
agent's metrics as the training row has them.

Training goes on exactly as without evaluation: the global RNG states (torch, CUDA, numpy,
Python) are restored afterwards and the training env is never stepped. Each evaluation seeds its
env and torch from the session's seed and its frame, so it is a function of the weights, the
observation statistics and the frame: a resumed run repeats it, and only the rows need saving.
"""

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from slm_lab.agent.agent import Agent, rng_state, set_rng_state
from slm_lab.env.backend import EnvBackend, play_episodes
from slm_lab.env.clock import Clock
from slm_lab.experiment.build import make_env
from slm_lab.experiment.recorder import MetricsTracker
from slm_lab.experiment.task import Placement
from slm_lab.spec.schema import Spec

# seeds evaluations apart from the sessions (SeedSequence([base, trial, session])): a trial
# index never reaches it
EVAL_KEY = 0x4556414C  # "EVAL"


def evaluation_seed(session_seed: int, frame: int) -> int:
    """The seed of the evaluation a session runs at `frame` (its env's sub-envs and torch)."""
    return int(np.random.SeedSequence([session_seed, EVAL_KEY, frame]).generate_state(1)[0])


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch seeded with `seed` inside the block; every global RNG state as before it after."""
    saved = rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        set_rng_state(saved)


class Evaluation:
    """A session's evaluations: `run()` when `next_frame` is reached; `rows` keeps them."""

    def __init__(
        self,
        spec: Spec,
        env: EnvBackend,
        clock: Clock,
        agent: Agent,
        session_seed: int,
        placement: Placement | None = None,
    ) -> None:
        """For a spec with evaluations (`spec.meta.eval_every` set), beside the session's
        training env, clock and agent, placed where the session is (None: the spec's own)."""
        self.frequency = spec.meta.eval_every
        self.episodes = spec.meta.rigorous_eval
        self.greedy = spec.meta.eval_greedy
        self.train_env, self.train_clock, self.agent = env, clock, agent
        self.session_seed = session_seed
        config = dataclasses.replace(
            spec.env,
            num_envs=min(spec.env.num_envs, self.episodes),
            reward_scale=None,
            normalize_reward=False,
            clip_reward=False,  # None would be a backend's default clipping (Atari's [-1, 1])
            life_loss_info=False,  # an episode is a whole game, not a life
        )
        seed = evaluation_seed(session_seed, 0)  # each evaluation reseeds it
        with seeded(seed):  # whatever building the env draws from the global RNGs
            clock = Clock(config.max_frame, config.num_envs)
            self.env = make_env(spec, config, seed, clock, placement or Placement.of(spec))
        self.env.set_obs_stats(None, frozen=True)
        self.env.record_episodes()
        self.rows: list[dict[str, float]] = []
        self.next_frame = self.frequency

    def run(self) -> dict[str, float]:
        """Evaluate at the training clock's frame; returns the new row."""
        clock = self.train_clock
        row: dict[str, float] = {
            "frame": clock.frame,
            "t": clock.t,
            "epi": clock.epi,
            "opt_step": clock.opt_step,
            "wall_t": clock.wall_t,
        }
        metrics = self.agent.metrics()  # before evaluation mode sets the schedules' end values
        self.env.set_obs_stats(self.train_env.obs_stats(), frozen=True)
        seed = evaluation_seed(self.session_seed, clock.frame)
        with seeded(seed), self.agent.evaluating(self.env.info, self.greedy):
            self.env.reset(seed)
            returns, _ = play_episodes(self.env, self.agent.act, self.episodes)
            total_reward = float(returns.mean())
        recent = [r["total_reward"] for r in self.rows[-(MetricsTracker.MA_WINDOW - 1) :]]
        row["total_reward"] = total_reward
        row["total_reward_ma"] = float(np.mean([*recent, total_reward]))
        row.update(metrics)
        self.rows.append(row)
        self.next_frame = (clock.frame // self.frequency + 1) * self.frequency
        return row

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [dict(r) for r in self.rows], "next_frame": self.next_frame}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = [dict(r) for r in state["rows"]]
        self.next_frame = state["next_frame"]

    def close(self) -> None:
        self.env.close()
