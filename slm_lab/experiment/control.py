"""Trial (max_session seeds of one spec, in parallel processes) and enjoy (replay a model).

Torch loads only where a session runs: in the pool's processes, or in this process for a
one-session trial and enjoy.
"""

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab.env.backend import play_episodes
from slm_lab.env.clock import Clock
from slm_lab.experiment import analysis, stop
from slm_lab.experiment.checkpointer import Checkpointer
from slm_lab.experiment.layout import RunLayout, enjoy_root, prefix
from slm_lab.experiment.pool import SessionPool
from slm_lab.experiment.task import SessionTask, session_seed
from slm_lab.lib import io, util
from slm_lab.lib.config import SpecError
from slm_lab.lib.logger import logger
from slm_lab.spec.schema import Spec

ENJOY_TRIAL_INDEX = 10**6  # enjoy seeds its env apart from every training session
GRAPHS_MODULE = "matplotlib.figure"
VIDEO_NAME = "enjoy"  # a recorded replay's video in its enjoy folder: enjoy.mp4 (or .gif)


class Trial:
    """`max_session` sessions of one spec, with seeds differing by session index."""

    def __init__(
        self,
        spec: Spec,
        root: Path,
        trial: int = 0,
        dev: bool = False,
        resume: bool = False,
        render: bool = False,
        log_level: str = "INFO",
    ) -> None:
        self.spec, self.layout, self.trial = spec, RunLayout(root, spec.name), trial
        self.dev, self.resume, self.render, self.log_level = dev, resume, render, log_level
        self.max_session = 1 if dev else spec.meta.max_session
        self.errors: dict[int, str] = {}  # session index -> its error's last line
        self.stopped: dict[int, int] = {}  # session index -> the frame it saved and stopped at
        self.stop_signal: int | None = None  # the signal that stopped the run
        self.eval_metrics: dict[str, float] | None = None  # the evaluations' trial metrics

    def run(self) -> dict[str, float] | None:
        """The trial metrics; None when no session completed (see `errors`) or the run was
        stopped by a signal (see `stopped`)."""
        handlers = stop.install(pass_on=self.max_session > 1, give_up=True)
        try:
            results = self.run_sessions()
        finally:
            self.stop_signal = stop.REQUEST.signum
            stop.restore(handlers)
        for s in [s for s, r in results.items() if "stopped_at" in r]:
            self.stopped[s] = int(results.pop(s)["stopped_at"])
        if self.stopped:
            return None
        return self.analyze(sorted(results))

    def run_sessions(self) -> dict[int, dict[str, float]]:
        tasks = [
            SessionTask(
                self.spec, self.layout.root, self.trial, s, self.dev, self.resume, self.render
            )
            for s in range(self.max_session)
        ]
        if self.max_session == 1 and not self.spec.meta.hogwild:
            return self.run_here(tasks[0])
        util.preload(GRAPHS_MODULE)  # the trial's graph at the end: loaded while sessions run
        pool = SessionPool(tasks, self.log_level)
        results = pool.run()
        for s, reason in sorted(pool.errors.items()):  # a failed session is reported
            self.fail(s, reason)
        return results

    def run_here(self, task: SessionTask) -> dict[int, dict[str, float]]:
        """A one-session trial, in this process."""
        from slm_lab.experiment import session  # torch: only where a session runs

        try:
            return {0: session.run(task, self.log_level)}
        except session.SessionFailed as e:
            self.fail(0, str(e))
            return {}

    def fail(self, session: int, reason: str) -> None:
        self.errors[session] = reason
        logger.error(f"{prefix(self.spec.name, self.trial, session)} failed: {reason}")

    def analyze(self, sessions: list[int]) -> dict[str, float] | None:
        pre = prefix(self.spec.name, self.trial)
        if not sessions:
            logger.error(f"{pre}: no session completed")
            return None
        if len(sessions) < self.max_session:
            logger.warning(
                f"{pre}: {len(sessions)} of {util.counted(self.max_session, 'session')} completed; trial metrics cover those"
            )
        metrics, self.eval_metrics = analysis.write_trial(
            self.spec, self.layout, self.trial, sessions
        )
        return metrics


def enjoy(
    spec: Spec,
    root: Path,
    episodes: int,
    render: bool = False,
    session: int = 0,
    trial: int = 0,
    record: bool = False,
) -> dict[str, Any]:
    """Replay the best checkpoint of a session without training; writes to its own folder.
    Its returns are `episodes` whole episodes on min(num_envs, episodes) sub-envs (one with
    `record`), each playing its share (`play_episodes`). `render` shows the env in a window;
    `record` writes a video of the episodes there (`VIDEO_NAME`.mp4, or .gif without ffmpeg),
    played one after another on one env, each from its reset frame to its last step's (T + 1
    frames for T steps)."""
    from slm_lab.experiment.build import build  # torch: only where it acts

    model_path = Checkpointer(RunLayout(root, spec.name), trial, session).model_path()
    if not model_path.exists():
        raise SpecError(
            f"{root}: session {session} of trial {trial} has no checkpoint to replay ({model_path.name} is not in {model_path.parent})"
        )
    model = io.load_torch(model_path)
    if record:  # one env: the video shows each episode whole
        env_config = dataclasses.replace(spec.env, num_envs=1, vectorization_mode="sync")
    else:  # no more sub-envs than episodes: each plays its share (`play_episodes`)
        env_config = dataclasses.replace(spec.env, num_envs=min(spec.env.num_envs, episodes))
    spec = dataclasses.replace(spec, env=env_config)
    seed = session_seed(spec.meta.random_seed, ENJOY_TRIAL_INDEX, session)  # fresh episodes
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    render_mode = "rgb_array" if record else "human" if render else None
    env, agent = build(SessionTask.detached(spec, seed), clock, render_mode)
    stats = model["obs_rms"]
    if stats is not None:
        stats = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in stats.items()}
    env.set_obs_stats(stats, frozen=True)
    agent.load_model(model["nets"])
    agent.set_eval()
    out = enjoy_root(root)
    result: dict[str, Any] = {}
    env.record_episodes()
    try:
        env.reset()
        if record:
            from slm_lab.experiment import video  # imageio: only for a recorded replay

            path = out / f"{VIDEO_NAME}{video.video_suffix()}"
            with video.video_file(path, env.frame_rate) as recording:
                recording.add(env.frames())
                returns, lengths = play_episodes(env, agent.act, episodes, recording)
            result = {"video": str(path), "video_frames": recording.frames}
        else:
            returns, lengths = play_episodes(env, agent.act, episodes)
    finally:
        env.close()
    result = {
        "episodes": len(returns),
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "checkpoint": str(model_path),
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        **result,
    }
    io.write_json(result, out / "enjoy_metrics.json")
    return {**result, "folder": str(out)}
