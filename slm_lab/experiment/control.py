"""Session (one seed), Trial (max_session seeds in parallel processes), and enjoy (replay).

A session's loop: act -> env.step -> agent.update -> checkpoint every `log_frequency` frames.
A checkpoint adds a metrics row, logs the progress line, writes TensorBoard scalars and appends
the row to the session CSV; session 0 also appends the episodes finished since the last
checkpoint to its episodes CSV. With `meta.rigorous_eval`, checkpoints also fall every
`eval_frequency` frames to run an evaluation (experiment/evaluation.py), whose rows are logged
and written the same way, to their own CSV. The latest and best checkpoint files are written
atomically at most every SAVE_INTERVAL_S seconds and at the end: at log_frequency 500 a write
per checkpoint cost more than the training on small nets. Resume restarts from the last write
and replays deterministically, so the rows it produces are the same; the episodes CSV is cut
back to what it held at that write, and the replay appends the same rows again.
"""

import ctypes
import math
import os
import random
import resource
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from slm_lab.agent.agent import Agent, MetricsTracker, rng_state, set_rng_state
from slm_lab.agent.net.config import env_seq_len
from slm_lab.env.vec_env import VecEnv
from slm_lab.experiment import analysis, stop
from slm_lab.experiment.analysis import EVAL_SUFFIX, baseline_of, prefix
from slm_lab.experiment.evaluation import Evaluation
from slm_lab.lib import io
from slm_lab.lib import logger as log_setup
from slm_lab.lib.logger import logger
from slm_lab.spec.schema import Spec

ENJOY_TRIAL_INDEX = 10**6  # enjoy seeds its env apart from every training session
SAVE_INTERVAL_S = (
    10.0  # write checkpoint files at most this often (and at the end); rows are kept in memory
)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


def session_seed(base: int, trial: int, session: int) -> int:
    """A session's seed from the run's seed, trial and session index.

    Hashed (numpy SeedSequence) rather than base + offset: sub-env i is seeded seed + i, so
    consecutive session seeds would give two sessions identical envs.
    """
    return int(np.random.SeedSequence([base, trial, session]).generate_state(1)[0])


def build(spec: Spec, seed: int, render: bool = False) -> tuple[VecEnv, Agent]:
    """A session's env and agent, with Python, numpy and torch seeded from `seed` first: the
    same construction for training and enjoy."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    env = VecEnv(spec.env, seed, spec.agent.algorithm.gamma, render, env_seq_len(spec.agent.net))
    return env, Agent(spec.agent, env)


def ckpt_paths(run_dir: Path, pre: str, tag: str) -> tuple[Path, Path]:
    return (
        run_dir / "model" / f"{pre}_ckpt-{tag}_model.pt",
        run_dir / "model" / f"{pre}_ckpt-{tag}_state.pt",
    )


class RowsCsv:
    """A CSV file of rows, kept open while a session appends to them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: Any = None

    def append(self, rows: list[dict[str, float]]) -> None:
        """Write the last of `rows`; the first call (re)writes the file from all of them (after
        a resume the file may hold rows past the state the session resumed from)."""
        if self.file is None:
            io.write_text(analysis.csv_text(rows), self.path)
            self.file = open(self.path, "a")  # noqa: SIM115  (kept open for the session)
            return
        self.file.write(analysis.csv_text(rows[-1:], header=False))
        self.file.flush()

    def close(self, rows: list[dict[str, float]]) -> None:
        if self.file is None:  # resumed after the last row: none was appended
            io.write_text(analysis.csv_text(rows), self.path)
        else:
            self.file.close()


class Session:
    def __init__(
        self,
        spec: Spec,
        run_dir: Path,
        trial: int,
        session: int,
        dev: bool = False,
        resume: bool = False,
        render: bool = False,
        threads: int = 1,
        publish: Callable[[dict[str, float]], None] | None = None,
    ) -> None:
        self.seed = session_seed(spec.meta.random_seed, trial, session)
        # the first line of a session, before the slow part (env processes, nets) starts
        logger.info(
            f"building env {spec.env.name} x{spec.env.num_envs} and agent "
            f"{spec.agent.algorithm.name} (seed {self.seed})"
        )
        self.spec = spec
        self.publish = publish  # given each metrics row as it is made (a search reports them)
        self.run_dir = run_dir
        self.trial, self.index = trial, session
        self.prefix = prefix(spec, trial, session)
        self.dev = dev
        self.resume = resume
        self.log_frequency = spec.meta.log_frequency
        # Flush denormal floats to zero. Adam's moment estimates of weights whose gradient stays
        # zero (dead ReLU units) decay into the denormal range, where x86 arithmetic is many times
        # slower: a fused Adam step on a 2x256 MLP took 464 us with 18% of exp_avg denormal and
        # 179 us flushed. Values below 1.2e-38 are zero to any learning rule here.
        torch.set_flush_denormal(True)
        torch.set_num_threads(threads)  # after the flush: pool threads start with it set
        self.env, self.agent = build(spec, self.seed, render)
        self.tracker = MetricsTracker(self.env, self.agent)
        self.evaluation = (
            Evaluation(spec, self.env, self.agent, self.seed)
            if spec.meta.eval_every is not None
            else None
        )
        # session 0 writes every finished episode (frame, index, return, length)
        self.episodes_path = (
            run_dir / "info" / f"{self.prefix}_episodes.csv" if session == 0 else None
        )
        if self.episodes_path is not None:
            self.env.record_episodes()
        self.episodes_file: Any = None
        self.best = -math.inf
        self.best_model: dict[str, Any] | None = (
            None  # snapshot of the best weights, not yet written
        )
        self.next_row = self.log_frequency
        self.next_ckpt = self.next_checkpoint()
        self.last_save = time.monotonic()
        info_dir = run_dir / "info"
        self.csv = RowsCsv(info_dir / f"{self.prefix}_session_df.csv")
        self.eval_csv = RowsCsv(info_dir / f"{self.prefix}_eval_df.csv")
        self.writer: Any = None  # TensorBoard's SummaryWriter, made at the first checkpoint
        self.baseline = baseline_of(spec.env)

    # -- checkpoints -------------------------------------------------------------------------
    def model_snapshot(self) -> dict[str, Any]:
        """What acting needs: the nets' weights and the observation normalizer's statistics."""
        rms = self.env.obs_norm.rms
        return {
            "nets": self.agent.model_state(),
            "obs_rms": None
            if rms is None
            else {
                "mean": torch.from_numpy(rms.mean.copy()),
                "var": torch.from_numpy(rms.var.copy()),
                "count": float(rms.count),
            },
        }

    def save(self) -> None:
        """Write the best model (if it changed) and the latest model + full training state."""
        if self.best_model is not None:
            io.save_torch(self.best_model, ckpt_paths(self.run_dir, self.prefix, "best")[0])
            self.best_model = None
        model_path, state_path = ckpt_paths(self.run_dir, self.prefix, "latest")
        io.save_torch(self.model_snapshot(), model_path)
        state = {
            "agent": self.agent.state_dict(),
            "env": self.env.state_dict(),
            "tracker": self.tracker.state_dict(),
            "rng": rng_state(),
            "next_row": self.next_row,
            "best": self.best,
            "evaluation": None if self.evaluation is None else self.evaluation.state_dict(),
            "episodes_csv_bytes": None if self.episodes_file is None else self.episodes_file.tell(),
        }
        io.save_torch(state, state_path)
        self.last_save = time.monotonic()

    def load_latest(self) -> bool:
        _, state_path = ckpt_paths(self.run_dir, self.prefix, "latest")
        if not state_path.exists():
            return False
        state = io.load_torch(state_path)
        if self.episodes_path is not None:
            self.open_episodes_csv(state["episodes_csv_bytes"])
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
            f"resumed at frame {self.env.clock.frame}"
            + ("" if exact else " (env simulation state is native: episodes in progress restart)")
        )
        return True

    def next_checkpoint(self) -> int:
        """The frame of the next metrics row or evaluation, whichever comes first."""
        if self.evaluation is None:
            return self.next_row
        return min(self.next_row, self.evaluation.next_frame)

    def checkpoint(self) -> None:
        """The metrics row and the evaluation due at this frame (both at the end of the run)."""
        frame, done = self.env.clock.frame, self.env.done()
        if frame >= self.next_row or done:
            self.add_row()
        if self.evaluation is not None and (frame >= self.evaluation.next_frame or done):
            self.evaluate()
        self.next_ckpt = self.next_checkpoint()
        if done or time.monotonic() - self.last_save >= SAVE_INTERVAL_S:
            self.save()

    def add_row(self) -> None:
        row = self.tracker.add_row()
        logger.info(analysis.progress_line(row, self.env.max_frame))
        writer = self.tb_writer()
        for k, v in row.items():
            if isinstance(v, int | float) and not math.isnan(v):
                writer.add_scalar(k, v, row["frame"])
        self.csv.append(self.tracker.rows)
        if self.episodes_file is not None:
            self.episodes_file.write(analysis.episodes_csv_text(self.env.pop_episodes()))
            self.episodes_file.flush()
        if self.publish is not None:
            self.publish(row)
        if self.dev:
            self.dev_check_params()
        self.next_row = (self.env.clock.frame // self.log_frequency + 1) * self.log_frequency
        if not math.isnan(row["total_reward"]) and row["total_reward"] > self.best:
            self.best = row["total_reward"]
            self.best_model = self.model_snapshot()

    def evaluate(self) -> None:
        row = self.evaluation.run()
        logger.info(
            f"eval | frame:{row['frame']:,} | episodes:{self.evaluation.episodes}"
            f" | total_reward:{row['total_reward']:.2f} | total_reward_ma:{row['total_reward_ma']:.2f}"
        )
        writer = self.tb_writer()
        for k in ("total_reward", "total_reward_ma"):
            writer.add_scalar(f"eval/{k}", row[k], row["frame"])
        self.eval_csv.append(self.evaluation.rows)

    def tb_writer(self) -> Any:
        if self.writer is None:
            # tensorboard loads at the first checkpoint, so the env starts stepping sooner
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "log" / "tb" / self.prefix))
        return self.writer

    def open_episodes_csv(self, size: int | None = None) -> None:
        """Open the episodes CSV for appending: a new one (its header), or on resume the one
        there cut back to the `size` it had when the state was saved."""
        if size is None:
            io.write_text(analysis.EPISODES_HEADER, self.episodes_path)
        else:
            os.truncate(self.episodes_path, size)
        self.episodes_file = open(self.episodes_path, "a")  # noqa: SIM115  (kept open for the session)

    # -- dev-mode checks ---------------------------------------------------------------------
    def dev_check_step(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> None:
        for name, x in (("observation", obs), ("action", actions), ("reward", rewards)):
            if not np.all(np.isfinite(x)):
                raise FloatingPointError(
                    f"dev check: non-finite {name} at frame {self.env.clock.frame}"
                )
        if not self.env.is_discrete and actions.shape[1:] != self.env.action_space.shape:
            raise ValueError(
                f"dev check: action shape {actions.shape} does not match the action space"
            )

    def dev_check_params(self) -> None:
        if bad := self.agent.nonfinite_param():
            raise FloatingPointError(
                f"dev check: non-finite parameter {bad} at frame {self.env.clock.frame}"
            )

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> dict[str, float]:
        if not (self.resume and self.load_latest()):
            self.env.reset()
            if self.episodes_path is not None:
                self.open_episodes_csv()
        agent, env, request = self.agent, self.env, stop.REQUEST
        while not env.done():
            if request.signum is not None:
                self.stop()
            t = env.step(agent.act(env.obs))
            if self.dev:
                self.dev_check_step(env.obs, t.actions, t.rewards)
            agent.update(t)
            if env.clock.frame >= self.next_ckpt or env.done():
                self.checkpoint()
        self.close()
        return self.finish()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.csv.close(self.tracker.rows)
        if self.episodes_file is not None:
            self.episodes_file.close()
        self.env.close()
        if self.evaluation is not None:
            self.eval_csv.close(self.evaluation.rows)
            self.evaluation.close()

    def stop(self) -> None:
        """Save the full state at this step and stop (a Ctrl-C or SIGTERM asked for it)."""
        self.save()
        self.close()
        logger.info(f"saved at frame {self.env.clock.frame:,} and stopped")
        raise stop.SessionStopped(self.env.clock.frame)

    def finish(self) -> dict[str, float]:
        """Session metrics and graphs; the evaluation's first, as the training metrics file
        marks the session finished (a resumed trial keeps it)."""
        if self.evaluation is not None:
            metrics = self.analyze(self.evaluation.rows, EVAL_SUFFIX)
            logger.info(f"session_metrics{EVAL_SUFFIX}: {analysis.format_metrics(metrics)}")
        metrics = self.analyze(self.tracker.rows, "")
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        logger.info(
            f"session_metrics: {analysis.format_metrics(metrics)} | peak_rss_mb:{peak_mb:.0f}"
        )
        return metrics

    def analyze(self, rows: list[dict[str, float]], suffix: str) -> dict[str, float]:
        """Write the session metrics and graph of `rows` (training's, or with EVAL_SUFFIX the
        evaluation's); returns the metrics."""
        table = analysis.rows_table(rows)
        metrics = analysis.session_metrics(table, self.baseline)
        pre = self.prefix
        io.write_json(metrics, self.run_dir / "info" / f"{pre}_session_metrics{suffix}.json")
        analysis.plot_session(
            table, pre + suffix, self.run_dir / "graph" / f"{pre}_session_graph{suffix}.png"
        )
        return metrics


class SessionFailed(Exception):
    """A session raised; the message is its error's last line (the traceback is in its log)."""


def run_session(
    spec: Spec,
    run_dir: str,
    trial: int,
    session: int,
    dev: bool,
    resume: bool,
    render: bool,
    threads: int,
    log_level: str,
    own_process: bool,
    publish: Callable[[dict[str, float]], None] | None = None,
) -> dict[str, float]:
    """Run one session: in its own process (`own_process`, a parallel trial) or in the caller's;
    `publish` gets each metrics row.

    Its log lines carry its tag (the prefix, e.g. `ppo_cartpole_t0_s1`), which the messages
    therefore leave out."""
    pre = prefix(spec, trial, session)
    if own_process:
        log_setup.setup(log_level, tag=pre)
        stop.install(pass_on=False, give_up=False)  # the parent may pass a signal on twice
    else:
        log_setup.set_tag(pre)
    sink = log_setup.add_file(str(Path(run_dir) / "log" / f"{pre}.log"), log_level)
    try:
        done_path = Path(run_dir) / "info" / f"{pre}_session_metrics.json"
        if resume and done_path.exists() and io.read_json(done_path)["frame"] >= spec.env.max_frame:
            logger.info("already finished; keeping its results")
            return io.read_json(done_path)
        return Session(
            spec, Path(run_dir), trial, session, dev, resume, render, threads, publish
        ).run()
    except stop.SessionStopped as e:
        return {"stopped_at": e.frame}
    except Exception as e:  # the traceback to the logs, one line to the console and the caller
        logger.opt(exception=e).bind(file_only=True).error("failed")
        raise SessionFailed(log_setup.last_line(e)) from None
    finally:
        log_setup.remove(sink)
        if not own_process:
            log_setup.set_tag("")


def publishing_session(
    rows: Queue, trial_pid: int, spec: Spec, run_dir: str, trial: int, session: int, log_level: str
) -> None:
    """A session process of a search trial: runs the session, putting ("row", session, (frame,
    total_reward_ma)) on `rows` for each metrics row, then ("done", session, its metrics) or
    ("failed", session, the error's last line)."""
    if sys.platform.startswith("linux"):
        # SIGTERM (save and stop) when the process that started this one ends for any reason,
        # e.g. the search killed: no session outlives its trial
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if not psutil.pid_exists(trial_pid):  # the trial ended before the line above took effect
        return

    def publish(row: dict[str, float]) -> None:
        rows.put(("row", session, (int(row["frame"]), float(row["total_reward_ma"]))))

    try:
        metrics = run_session(
            spec,
            run_dir,
            trial,
            session,
            dev=False,
            resume=False,
            render=False,
            threads=spec.meta.num_threads,
            log_level=log_level,
            own_process=True,
            publish=publish,
        )
        rows.put(("done", session, metrics))
    except SessionFailed as e:
        rows.put(("failed", session, str(e)))


class Trial:
    """`max_session` sessions of one spec, with seeds differing by session index."""

    def __init__(
        self,
        spec: Spec,
        run_dir: Path,
        trial: int = 0,
        dev: bool = False,
        resume: bool = False,
        render: bool = False,
        log_level: str = "INFO",
    ) -> None:
        self.spec, self.run_dir, self.trial = spec, run_dir, trial
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
        threads = self.spec.meta.num_threads
        args = [
            (
                self.spec,
                str(self.run_dir),
                self.trial,
                s,
                self.dev,
                self.resume,
                self.render,
                threads,
                self.log_level,
            )
            for s in range(self.max_session)
        ]
        results: dict[int, dict[str, float]] = {}
        if self.max_session == 1:
            try:
                results[0] = run_session(*args[0], own_process=False)
            except SessionFailed as e:
                self.fail(0, str(e))
        else:
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = str(threads)
            with ProcessPoolExecutor(self.max_session, mp_context=get_context("spawn")) as pool:
                futures = {
                    s: pool.submit(run_session, *a, own_process=True) for s, a in enumerate(args)
                }
                for s, fut in futures.items():
                    try:
                        results[s] = fut.result()
                    except SessionFailed as e:  # a failed session is reported; the others go on
                        self.fail(s, str(e))
                    except BrokenProcessPool as e:  # the process died (killed, out of memory)
                        self.fail(s, log_setup.last_line(e))
        return results

    def fail(self, session: int, reason: str) -> None:
        self.errors[session] = reason
        logger.error(f"{prefix(self.spec, self.trial, session)} failed: {reason}")

    def analyze(self, sessions: list[int]) -> dict[str, float] | None:
        pre = prefix(self.spec, self.trial)
        if not sessions:
            logger.error(f"{pre}: no session completed")
            return None
        if len(sessions) < self.max_session:
            logger.warning(
                f"{pre}: {len(sessions)} of {self.max_session} sessions completed; trial metrics cover those"
            )
        metrics, self.eval_metrics = analysis.write_trial(
            self.spec, self.run_dir, self.trial, sessions
        )
        return metrics


def enjoy(
    spec: Spec, run_dir: Path, episodes: int, render: bool, session: int = 0, trial: int = 0
) -> dict[str, float]:
    """Replay the best checkpoint of a session without training; writes to its own folder."""
    pre = prefix(spec, trial, session)
    model_path, _ = ckpt_paths(run_dir, pre, "best")
    if not model_path.exists():
        model_path, _ = ckpt_paths(run_dir, pre, "latest")
    model = io.load_torch(model_path)
    seed = session_seed(spec.meta.random_seed, ENJOY_TRIAL_INDEX, session)  # fresh episodes
    env, agent = build(spec, seed, render)
    if model["obs_rms"] is not None:
        for k, v in model["obs_rms"].items():
            setattr(env.obs_norm.rms, k, v.numpy() if isinstance(v, torch.Tensor) else v)
    env.obs_norm.update_running_mean = False
    agent.load_model(model["nets"])
    agent.set_eval()
    env.reset()
    while env.clock.epi < episodes:
        env.step(agent.act(env.obs))
    returns = list(env.stats.return_queue)[-episodes:]
    env.close()
    result = {
        "episodes": len(returns),
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "checkpoint": str(model_path),
    }
    out_dir = io.DATA_DIR / f"{run_dir.name}_enjoy_{io.timestamp()}"
    io.write_json(result, out_dir / "enjoy_metrics.json")
    return result
