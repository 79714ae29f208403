"""A session: one seed of a trial, trained from frame 0 (or its saved state) to max_frame.

The loop: act -> env.step -> agent.update -> checkpoint every `log_frequency` frames. A
checkpoint adds a metrics row (the recorder writes it); with `meta.rigorous_eval`, checkpoints
also fall every `eval_frequency` frames to run an evaluation (experiment/evaluation.py). The
checkpointer writes the latest and best checkpoint files. The session is assembled from these
parts and the env backend the registry picks; it only runs the loop.
"""

import math
import resource
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from slm_lab.agent.agent import rng_state, set_rng_state
from slm_lab.env import state as env_state
from slm_lab.env.clock import Clock
from slm_lab.experiment import analysis, hogwild, stop
from slm_lab.experiment.build import build
from slm_lab.experiment.checkpointer import Checkpointer
from slm_lab.experiment.dev_checks import DevChecks
from slm_lab.experiment.evaluation import Evaluation
from slm_lab.experiment.layout import EVAL_SUFFIX, is_search_dir
from slm_lab.experiment.recorder import MetricsTracker, Recorder, Row
from slm_lab.experiment.task import SessionTask
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup
from slm_lab.lib.logger import logger


class Session:
    def __init__(self, task: SessionTask, publish: Callable[[Row], None] | None = None) -> None:
        """`publish` gets each metrics row as it is made (a search trial reports them)."""
        spec = task.spec
        self.task, self.spec, self.publish = task, spec, publish
        self.seed = task.seed
        # the first line of a session, before the slow part (env processes, nets) starts
        logger.info(
            f"building env {spec.env.name} x{spec.env.num_envs} and agent "
            f"{spec.agent.algorithm.name} (seed {self.seed})"
        )
        # Flush denormal floats to zero. Adam's moment estimates of weights whose gradient stays
        # zero (dead ReLU units) decay into the denormal range, where x86 arithmetic is many times
        # slower: a fused Adam step on a 2x256 MLP took 464 us with 18% of exp_avg denormal and
        # 179 us flushed. Values below 1.2e-38 are zero to any learning rule here.
        torch.set_flush_denormal(True)
        torch.set_num_threads(spec.meta.num_threads)  # after the flush: pool threads take it
        shared = task.placement.shared
        self.clock = (
            Clock(spec.env.max_frame, spec.env.num_envs)
            if shared is None
            else hogwild.WorkerClock(spec.env.max_frame, spec.env.num_envs, shared, task.session)
        )
        self.worker: hogwild.Worker | None = None  # a Hogwild worker's link to the global nets
        render_mode = "human" if task.render else None
        self.env, self.agent = build(task, self.clock, render_mode)
        if task.session == 0:
            logger.info(f"vector env: {self.env.vectorization}")
            if (note := self.agent.precision_note()) is not None:
                logger.log(*note)
        self.tracker = MetricsTracker(self.clock, self.env, self.agent)
        self.evaluation = (
            Evaluation(spec, self.env, self.clock, self.agent, self.seed, task.placement)
            if spec.meta.eval_every is not None
            else None
        )
        writes_episodes = task.session == 0  # session 0 writes every finished episode
        self.recorder = Recorder(task.layout, task.trial, task.session, self.clock, writes_episodes)
        self.dev_checks = DevChecks(self.clock, self.env.info, self.agent) if task.dev else None
        if writes_episodes:
            self.env.record_episodes()
        self.checkpointer = Checkpointer(task.layout, task.trial, task.session)
        self.baseline = analysis.baseline_of(spec.env)  # the random policy's mean return
        self.log_frequency = spec.meta.log_frequency
        self.best = -math.inf
        self.next_row = self.log_frequency
        self.next_ckpt = self.next_checkpoint()

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> dict[str, float]:
        resumed = self.task.resume and self.load()  # a resume says what it restarts itself
        if not resumed:
            self.env.reset()
            self.recorder.start()
        if self.task.placement.shared is not None:  # after its own state: the global nets win
            self.worker = hogwild.attach(self.agent.algorithm, self.task.placement.shared)
        # said once a run (session 0), where a resume could need it, and not again on a resume
        if (
            not resumed
            and self.task.resumable
            and self.task.session == 0
            and (native := self.env.uncapturable()) is not None
        ):
            logger.info(env_state.resume_note(self.spec.env.name))
            logger.debug(f"the state a resume cannot restore: {native}")
        agent, env, clock, dev = self.agent, self.env, self.clock, self.dev_checks
        request = stop.REQUEST
        try:
            while not clock.done():
                if request.signum is not None:
                    self.stop()
                t = env.step(agent.act(env.obs))
                if dev is not None:
                    dev.step(env.obs, t.actions, t.rewards)
                agent.update(t)
                if clock.frame >= self.next_ckpt or clock.done():
                    self.checkpoint()
        except Exception:
            self.recorder.release()  # a session run in its caller's process leaks no file
            raise
        self.close()
        return self.finish()

    def next_checkpoint(self) -> int:
        """The frame of the next metrics row or evaluation, whichever comes first."""
        if self.evaluation is None:
            return self.next_row
        return min(self.next_row, self.evaluation.next_frame)

    def checkpoint(self) -> None:
        """The metrics row and the evaluation due at this frame (both at the end of the run)."""
        frame, done = self.clock.frame, self.clock.done()
        if frame >= self.next_row or done:
            self.add_row()
        if self.evaluation is not None and (frame >= self.evaluation.next_frame or done):
            row = self.evaluation.run()
            self.recorder.eval_row(row, self.evaluation.rows, self.evaluation.episodes)
        self.next_ckpt = self.next_checkpoint()
        if done or self.checkpointer.due():
            self.save()

    def add_row(self) -> None:
        row = self.tracker.add_row()
        if self.worker is not None:  # a Hogwild worker's frames, and the trial's beside them
            row["global_frame"] = self.clock.global_frame
        self.recorder.row(row, self.tracker.rows)
        self.write_episodes()
        if self.publish is not None:
            self.publish(row)
        if self.dev_checks is not None:
            self.dev_checks.params()
        self.next_row = (self.clock.frame // self.log_frequency + 1) * self.log_frequency
        if not math.isnan(row["total_reward"]) and row["total_reward"] > self.best:
            self.best = row["total_reward"]
            self.checkpointer.keep_best(self.model_snapshot())

    def write_episodes(self) -> None:
        """The episodes finished since the last call, to the episodes CSV (session 0)."""
        if self.recorder.episodes_path is not None:
            self.recorder.episodes(self.env.pop_episodes())

    # -- checkpoints -------------------------------------------------------------------------
    def model_snapshot(self) -> dict[str, Any]:
        """What acting needs: the nets' weights and the observation normalizer's statistics (a
        Hogwild worker's: the global nets')."""
        if self.worker is not None:
            self.worker.pull()
        stats = self.env.obs_stats()
        return {
            "nets": self.agent.model_state(),
            "obs_rms": None
            if stats is None
            else {
                k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in stats.items()
            },
        }

    def save(self) -> None:
        """Write the checkpoint files: the episodes finished so far first, so that the saved
        size of the episodes CSV holds every episode up to the saved frame."""
        self.write_episodes()
        state = {
            "clock": self.clock.state_dict(),
            "agent": self.agent.state_dict(),
            "env": self.env.state_dict(),
            "tracker": self.tracker.state_dict(),
            "rng": rng_state(),
            "next_row": self.next_row,
            "best": self.best,
            "evaluation": None if self.evaluation is None else self.evaluation.state_dict(),
            "episodes_csv_bytes": self.recorder.episodes_bytes,
        }
        self.checkpointer.save(self.model_snapshot(), state)

    def load(self) -> bool:
        """Continue from the saved state; False when there is none."""
        state = self.checkpointer.load()
        if state is None:
            return False
        self.recorder.start(state["episodes_csv_bytes"])
        self.clock.load_state_dict(state["clock"])
        exact = self.env.load_state_dict(state["env"])
        self.agent.load_state_dict(state["agent"])
        self.tracker.load_state_dict(state["tracker"])
        set_rng_state(state["rng"])
        self.next_row, self.best = state["next_row"], state["best"]
        if self.evaluation is not None:
            self.evaluation.load_state_dict(state["evaluation"])
        self.next_ckpt = self.next_checkpoint()
        if not exact:
            self.agent.episodes_restarted()
        logger.info(
            f"resumed at frame {self.clock.frame}"
            + (
                ""
                if exact
                else " (the simulator's state was not saved: the episodes in progress restart)"
            )
        )
        return True

    # -- the end -----------------------------------------------------------------------------
    def close(self) -> None:
        eval_rows = None if self.evaluation is None else self.evaluation.rows
        self.recorder.close(self.tracker.rows, eval_rows)
        self.env.close()
        if self.evaluation is not None:
            self.evaluation.close()

    def stop(self) -> None:
        """Save the full state at this step and stop (a Ctrl-C or SIGTERM asked for it)."""
        self.save()
        self.close()
        logger.info(f"saved at frame {self.clock.frame:,} and stopped")
        raise stop.SessionStopped(self.clock.frame)

    def finish(self) -> dict[str, float]:
        """Session metrics and graphs; the evaluation's first, as the training metrics file
        marks the session finished (a resumed trial keeps it)."""
        if self.evaluation is not None:
            metrics = self.recorder.analyze(self.evaluation.rows, self.baseline, EVAL_SUFFIX)
            logger.info(f"session_metrics{EVAL_SUFFIX}: {analysis.format_metrics(metrics)}")
        metrics = self.recorder.analyze(self.tracker.rows, self.baseline)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        logger.info(
            f"session_metrics: {analysis.format_metrics(metrics)} | peak_rss_mb:{peak_mb:.0f}"
        )
        return metrics


class SessionFailed(Exception):
    """A session raised; the message is its error's last line (the traceback is in its log)."""


def failure_line(e: Exception, task: SessionTask) -> str:
    """A session's error on one line; a full disk says so, where, and how to go on."""
    if not io.is_disk_full(e):
        return log_setup.last_line(e)
    search = is_search_dir(task.root.parent)  # a search trial's folder is in its search's
    again = f"search@{task.root.parent}" if search else f"train@{task.root}"
    return (
        f"the disk is full: no space left to write {e.filename or 'in ' + str(task.root)}; "
        f"free some space, then resume from the last checkpoint: uv run slm-lab run {again}"
    )


def run(
    task: SessionTask, log_level: str, publish: Callable[[Row], None] | None = None
) -> dict[str, float]:
    """Run one session, its log lines tagged with its prefix (e.g. `ppo_cartpole_t0_s1`) and
    also written to its own log file. Returns its metrics, or {"stopped_at": frame} when a
    signal stopped it; SessionFailed (one line) when it raised."""
    layout = task.layout
    log_setup.set_tag(task.prefix)
    sink = log_setup.add_file(str(layout.session_log(task.trial, task.session)), log_level)
    try:
        done_path = layout.session_metrics(task.trial, task.session)
        if task.resume and done_path.exists():
            done = io.read_metrics(done_path)
            if done["frame"] >= task.spec.env.max_frame:
                logger.info("already finished; keeping its results")
                return done
        return Session(task, publish).run()
    except stop.SessionStopped as e:
        return {"stopped_at": e.frame}
    except Exception as e:  # the traceback to the logs, one line to the console and the caller
        logger.opt(exception=e).bind(file_only=True).error("failed")
        raise SessionFailed(failure_line(e, task)) from None
    finally:
        log_setup.remove(sink)
        log_setup.set_tag("")
