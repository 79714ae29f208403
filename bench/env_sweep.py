"""Every Gymnasium env registered here, through the real CLI: a dev run, then its resume.

For the latest version of each env id (Gymnasium's registry grouped by namespace and name, the
highest -vN kept), writes a tiny PPO spec with the env's default kwargs into a work folder, runs
it as a user types it, `uv run slm-lab run SPEC sweep dev --data-dir DATA` (a dev run saves its
full state at its end), then extends it, `uv run slm-lab run SPEC sweep train@RUN --data-dir DATA
--max-frame 512`, and classifies the id:

- ok: both exit 0; the resume is `exact` (env simulation state restored) or `native` (episodes in
  progress restart), as the session logs it;
- refused: the dev run exits non-zero with an `error: ...` line and no traceback, before making
  a run folder (the line is quoted);
- FAILED: anything else (the last line of the failing command's stderr is quoted; its work
  folder is kept, with each command's output in dev.log and resume.log).

Prints one line per id and a summary, and writes the results as JSON to --out.

usage: uv run python bench/env_sweep.py [--only SUBSTRING] [--jobs N] [--out bench/out/env_sweep.json]
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import gymnasium as gym
import typer
from gymnasium.envs.registration import parse_env_id

ROOT = Path(__file__).resolve().parent.parent
SPEC_NAME = "sweep"
NUM_ENVS = 2
MAX_FRAME = 256
RESUME_MAX_FRAME = 512
LOG_FREQUENCY = 128
TIME_HORIZON = 32
MINIBATCH_SIZE = 32
TRAINING_EPOCH = 1
HID_LAYERS = [32]
COMMAND_TIMEOUT_S = 900
DEFAULT_OUT = ROOT / "bench" / "out" / "env_sweep.json"
RESUMED = re.compile(r"resumed at frame (\d+)( \(env simulation state is native)?")
NO_VERSION = -1  # an id without -vN sorts below every versioned one

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@dataclass
class Result:
    env_id: str
    outcome: str  # ok | refused | FAILED
    detail: str  # ok: exact | native; refused: the error line; FAILED: what failed and its line
    seconds: float
    work_dir: str | None = None  # kept for a FAILED id


def latest_env_ids() -> list[str]:
    """The highest version of each registered (namespace, name)."""
    latest: dict[tuple[str | None, str], tuple[int, str]] = {}
    for env_id in gym.registry:
        namespace, name, version = parse_env_id(env_id)
        version = NO_VERSION if version is None else version
        if (namespace, name) not in latest or version > latest[(namespace, name)][0]:
            latest[(namespace, name)] = (version, env_id)
    return sorted(env_id for _, env_id in latest.values())


def sweep_spec(env_id: str) -> dict[str, Any]:
    """A PPO spec small enough to run every env for a few checkpoints."""
    no_decay = {"name": "no_decay", "start_step": 0, "end_step": 0}
    return {
        SPEC_NAME: {
            "agent": {
                "name": "PPO",
                "algorithm": {
                    "name": "PPO",
                    "action_pdtype": "default",
                    "action_policy": "default",
                    "gamma": 0.99,
                    "lam": 0.95,
                    "time_horizon": TIME_HORIZON,
                    "minibatch_size": MINIBATCH_SIZE,
                    "training_epoch": TRAINING_EPOCH,
                    "val_loss_coef": 0.5,
                    "clip_eps_spec": {**no_decay, "start_val": 0.2, "end_val": 0.2},
                    "entropy_coef_spec": {**no_decay, "start_val": 0.01, "end_val": 0.01},
                },
                "memory": {"name": "OnPolicyBatchReplay"},
                "net": {
                    "type": "MLPNet",
                    "shared": False,
                    "hid_layers": HID_LAYERS,
                    "hid_layers_activation": "tanh",
                    "loss_spec": {"name": "MSELoss"},
                    "actor_optim_spec": {"name": "Adam", "lr": 3e-4},
                    "critic_optim_spec": {"name": "Adam", "lr": 1e-3},
                },
            },
            "env": {"name": env_id, "num_envs": NUM_ENVS, "max_frame": MAX_FRAME},
            "meta": {"log_frequency": LOG_FREQUENCY, "max_session": 1, "max_trial": 1},
        }
    }


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


@dataclass(frozen=True)
class Finished:
    """A command's exit status (None: killed at its timeout) and output."""

    returncode: int | None
    stdout: str
    stderr: str


def slm_lab(args: list[str], timeout_s: float, log_path: Path) -> Finished:
    """`uv run slm-lab run ARGS` from the repository root, its output also written to log_path.
    Past timeout_s its whole process group (uv, slm-lab, its sessions) is killed."""
    cmd = ["uv", "run", "slm-lab", "run", *args]
    with subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            returncode = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            returncode = None
    status = f"timed out after {timeout_s:.0f}s" if returncode is None else f"exit {returncode}"
    log_path.write_text(f"$ {' '.join(cmd)}\n{status}\n--- stdout\n{stdout}--- stderr\n{stderr}")
    return Finished(returncode, stdout, stderr)


def classify_dev(proc: Finished, data_dir: Path) -> tuple[str, str]:
    """(outcome, detail) of a dev run that did not succeed."""
    error = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    made_run = data_dir.exists() and any(data_dir.iterdir())
    if "Traceback" not in proc.stderr and len(error) == 1 and not made_run:
        return "refused", error[0]
    return "FAILED", f"dev exit {proc.returncode}: {last_line(proc.stderr)}"


def sweep_one(env_id: str, work_root: Path, timeout_s: float) -> Result:
    started = time.monotonic()
    work_dir = Path(tempfile.mkdtemp(prefix=re.sub(r"\W", "_", env_id) + "_", dir=work_root))
    spec_file, data_dir = work_dir / "spec.json", work_dir / "data"
    spec_file.write_text(json.dumps(sweep_spec(env_id), indent=2))
    common = [str(spec_file), SPEC_NAME]
    outcome, detail = "FAILED", ""
    dev = slm_lab([*common, "dev", "--data-dir", str(data_dir)], timeout_s, work_dir / "dev.log")
    if dev.returncode is None:
        detail = f"dev timed out after {timeout_s:.0f}s"
    elif dev.returncode != 0:
        outcome, detail = classify_dev(dev, data_dir)
    elif len(run_dirs := [p for p in data_dir.iterdir() if p.is_dir()]) != 1:
        detail = f"dev made {len(run_dirs)} run folders in {data_dir}, expected 1"
    else:
        resume = slm_lab(
            [*common, f"train@{run_dirs[0]}", "--data-dir", str(data_dir)]
            + ["--max-frame", str(RESUME_MAX_FRAME)],
            timeout_s,
            work_dir / "resume.log",
        )
        resumed = RESUMED.search(resume.stderr)
        if resume.returncode is None:
            detail = f"resume timed out after {timeout_s:.0f}s"
        elif resume.returncode != 0:
            detail = f"resume exit {resume.returncode}: {last_line(resume.stderr)}"
        elif resumed is None or int(resumed[1]) != MAX_FRAME:
            detail = (
                f"resume did not log 'resumed at frame {MAX_FRAME}': {last_line(resume.stderr)}"
            )
        else:
            outcome, detail = "ok", "native" if resumed[2] else "exact"
    kept = outcome == "FAILED"
    if not kept:
        shutil.rmtree(work_dir)
    return Result(
        env_id, outcome, detail, time.monotonic() - started, str(work_dir) if kept else None
    )


def summary(results: list[Result]) -> str:
    counts = Counter(r.outcome for r in results)
    resumes = Counter(r.detail for r in results if r.outcome == "ok")
    return (
        f"{len(results)} ids | ok {counts['ok']} (exact {resumes['exact']}, native {resumes['native']})"
        f" | refused {counts['refused']} | FAILED {counts['FAILED']}"
    )


@app.command()
def main(
    only: Annotated[str | None, typer.Option(help="only the ids containing this")] = None,
    jobs: Annotated[int, typer.Option(help="ids run in parallel", min=1)] = 1,
    out: Annotated[Path, typer.Option(help="results as JSON")] = DEFAULT_OUT,
    timeout: Annotated[
        float, typer.Option(help="seconds each slm-lab command may run")
    ] = COMMAND_TIMEOUT_S,
    work_root: Annotated[
        Path | None, typer.Option(help="where the work folders go (default: a new temp folder)")
    ] = None,
) -> None:
    env_ids = [env_id for env_id in latest_env_ids() if only is None or only in env_id]
    if not env_ids:
        typer.echo(f"no registered env id contains {only!r}", err=True)
        raise typer.Exit(2)
    own_root = work_root is None
    if work_root is None:
        work_root = Path(tempfile.mkdtemp(prefix="slm_lab_env_sweep_"))
    work_root.mkdir(parents=True, exist_ok=True)
    typer.echo(f"{len(env_ids)} env ids, {jobs} at a time, work folders in {work_root}")
    width = max(map(len, env_ids))
    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(sweep_one, env_id, work_root, timeout) for env_id in env_ids]
        for future in as_completed(futures):
            r = future.result()
            results.append(r)
            typer.echo(f"{r.env_id:<{width}}  {r.outcome:<7}  {r.seconds:5.0f}s  {r.detail}")
    results.sort(key=lambda r: r.env_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    typer.echo(f"summary: {summary(results)}")
    typer.echo(f"results: {out}")
    if own_root and not any(work_root.iterdir()):  # only FAILED ids keep their work folders
        work_root.rmdir()


if __name__ == "__main__":
    app()
