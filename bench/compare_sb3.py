"""Shared machinery of the SLM Lab vs Stable-Baselines3 comparisons in bench/.

A comparison script describes one algorithm on one env (`Comparison`: hyperparameters, the SLM
Lab spec, the SB3 run, the known mismatches) and calls `cli(comparison, default_frames)`. The
parent process then runs each library in a fresh Python process, one after the other: the script
itself again, with `--child <lib> --result-path <file>`, pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1). It prints frames, training wall
seconds, fps (frames / training wall time) and the mean return of the last 100 finished training
episodes for each, then the fps ratio slm_lab / sb3, and writes everything to
bench/out/<script name>.json.

The scripts run as `uv run --group bench python bench/<script>.py`: Python puts bench/ first on
sys.path, so `import compare_sb3` finds this module (the children are launched the same way).
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "bench" / "out"
LIBS = ("slm_lab", "sb3")

Runner = Callable[[int, int], dict[str, Any]]  # (frames, seed) -> result dict


@dataclass
class Comparison:
    algo: str  # as printed in the header, e.g. "PPO"
    env_id: str
    script: Path  # the comparison script; the children run it again
    hyperparameters: dict[str, Any]
    slm_lab_spec: Callable[[int, int], dict[str, Any]]  # (frames, seed) -> spec
    run_sb3: Runner
    mismatches: list[str]
    solved: float | None = None  # mean return that counts as solved; None: not reported
    run_slm_lab: Runner | None = None  # default: run_session(slm_lab_spec(frames, seed))
    # run_session's `extra` for that default, e.g. session_grad_steps
    slm_lab_extra: Callable[[Any], dict[str, Any]] | None = None
    # result keys printed after the standard ones on each library's line, with their formats
    extra_fields: dict[str, str] = field(default_factory=dict)
    report_extra: dict[str, Any] = field(default_factory=dict)  # more top-level JSON keys
    settings: str = "RL Zoo hyperparameters"  # whose settings both run, as the header says

    @property
    def out_path(self) -> Path:
        return OUT_DIR / f"{self.script.stem}.json"

    def runners(self) -> dict[str, Runner]:
        slm = self.run_slm_lab or (
            lambda frames, seed: run_session(
                self.slm_lab_spec(frames, seed), extra=self.slm_lab_extra
            )
        )
        return {"slm_lab": slm, "sb3": self.run_sb3}


# -- helpers the children use ------------------------------------------------------------------
def env_and_meta(env_id: str, num_envs: int, frames: int, seed: int) -> dict[str, Any]:
    """The env and meta sections every benchmark spec shares: one seeded session, no normalization."""
    return {
        "env": {
            "name": env_id,
            "num_envs": num_envs,
            "max_t": None,
            "max_frame": frames,
            "normalize_obs": False,
            "normalize_reward": False,
        },
        "meta": {
            "distributed": False,
            "log_frequency": 10000,
            "eval_frequency": 10000,
            "max_session": 1,
            "max_trial": 1,
            "random_seed": seed,
        },
    }


def pin_torch_threads() -> Any:
    """One torch thread in this process; returns the torch module."""
    import torch

    torch.set_num_threads(1)
    return torch


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    """This process's resident set size now, in MiB (VmRSS; NaN where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def numpy_arrays(obj: Any) -> list[Any]:
    """The numpy arrays reachable from obj through attributes, dicts, lists and tuples, each
    once (a view and its base are two entries)."""
    import numpy as np

    seen: set[int] = set()
    arrays = []
    stack = [obj]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, np.ndarray):
            arrays.append(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list | tuple):
            stack.extend(x)
        elif hasattr(x, "__dict__") and not isinstance(x, type):
            stack.extend(vars(x).values())
    return arrays


def array_nbytes(obj: Any) -> int:
    """Sum of nbytes of the numpy arrays reachable from obj (see `numpy_arrays`)."""
    return sum(a.nbytes for a in numpy_arrays(obj))


def touch_arrays(obj: Any, page: int = 4096) -> None:
    """Make every page of obj's contiguous numpy arrays resident, values unchanged: rewrite one
    byte per page. Pages of np.zeros arrays are mapped lazily, so this shows what the arrays
    cost in RSS once a run has written all of them (a full replay buffer)."""
    for a in numpy_arrays(obj):
        if a.flags.c_contiguous and a.flags.writeable and a.nbytes:
            flat = a.reshape(-1).view("uint8")
            flat[::page] = flat[::page].copy()


def run_session(
    spec: dict[str, Any],
    extra: Callable[[Any], dict[str, Any]] | None = None,
    before: Callable[[], dict[str, Any]] | None = None,
    built: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train one SLM Lab Session of `spec` in a temporary run folder, with one torch thread.

    Returns frames, wall_s (Session.run only), mean_return (last 100 episodes), episodes and
    torch_threads; `before()` (called just before the Session is built), `built(session)` (just
    after, before it runs) and `extra(session)` (after it ran) add more keys.
    """
    torch = pin_torch_threads()

    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.session import Session
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    log_setup.setup("WARNING")
    config = spec_util.validate(spec, spec["name"]).with_values({"meta.num_threads": 1})
    with tempfile.TemporaryDirectory(prefix="slm_lab_vs_sb3_") as tmp:
        RunLayout(Path(tmp), config.name).make()
        pre = before() if before is not None else {}
        session = Session(SessionTask(config, Path(tmp), trial=0, session=0))
        post = built(session) if built is not None else {}
        start = time.perf_counter()
        session.run()
        wall = time.perf_counter() - start
        return {
            "frames": int(session.clock.frame),
            "wall_s": wall,
            "mean_return": float(session.env.total_reward),
            "episodes": int(session.clock.epi),
            "torch_threads": torch.get_num_threads(),
            **pre,
            **post,
            **(extra(session) if extra is not None else {}),
        }


def sb3_result(model: Any, env: Any, wall: float) -> dict[str, Any]:
    """The standard result keys of a finished SB3 run on a Monitor-wrapped vector env."""
    import numpy as np
    import torch

    returns = [info["r"] for info in model.ep_info_buffer]  # Monitor returns, the last 100 episodes
    episodes = sum(len(r) for r in env.env_method("get_episode_rewards"))
    return {
        "frames": int(model.num_timesteps),
        "wall_s": wall,
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
        "episodes": episodes,
        "torch_threads": torch.get_num_threads(),
    }


def timed_learn(model: Any, frames: int) -> float:
    """model.learn(total_timesteps=frames); its wall seconds."""
    start = time.perf_counter()
    model.learn(total_timesteps=frames)
    return time.perf_counter() - start


def learn_and_close(model: Any, env: Any, frames: int) -> dict[str, Any]:
    """Train an SB3 model for `frames` (timed_learn); sb3_result's keys; the env is closed."""
    wall = timed_learn(model, frames)
    result = sb3_result(model, env, wall)
    env.close()
    return result


def learn_counting_grad_steps(model: Any, env: Any, frames: int) -> dict[str, Any]:
    """learn_and_close for an SB3 off-policy model, with its gradient steps."""
    return {**learn_and_close(model, env, frames), "grad_steps": int(model._n_updates)}


def session_grad_steps(session: Any) -> dict[str, Any]:
    """run_session's `extra` for off-policy comparisons: the session's gradient steps."""
    return {"grad_steps": int(session.clock.opt_step)}


# -- SAC: sac_pendulum_vs_sb3.py and sac_hopper_vs_sb3.py differ only in env and settings -----
# SB3's SAC defaults under its names, with RL Zoo's one env
SB3_SAC_DEFAULTS = {
    "n_envs": 1,
    "learning_rate": 3e-4,
    "buffer_size": 1_000_000,
    "learning_starts": 100,
    "batch_size": 256,
    "tau": 0.005,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    "ent_coef": "auto",
    "target_entropy": "auto",
    "target_update_interval": 1,
    "net_arch": [256, 256],
}


def sac_spec(name: str, env_id: str, zoo: dict[str, Any], frames: int, seed: int) -> dict[str, Any]:
    """SLM Lab's SoftActorCritic spec for SB3's SAC settings `zoo` (under SB3's names): torch's
    default init, Adam at zoo's learning_rate for the actor, the critics and alpha."""
    return {
        "name": name,
        "agent": {
            "name": "SoftActorCritic",
            "algorithm": {
                "name": "SoftActorCritic",
                "action_pdtype": "default",
                "action_policy": "default",
                "gamma": zoo["gamma"],
                "training_start_step": zoo["learning_starts"],
                "training_frequency": zoo["train_freq"],
                "training_iter": zoo["gradient_steps"],
                "training_batch_iter": 1,
                "policy_delay": 1,
                "target_entropy": zoo["target_entropy"],
                "alpha_lr": zoo["learning_rate"],
            },
            "memory": {
                "name": "Replay",
                "max_size": zoo["buffer_size"],
                "batch_size": zoo["batch_size"],
                "use_cer": False,
            },
            "net": {
                "type": "MLPNet",
                "hid_layers": zoo["net_arch"],
                "hid_layers_activation": "relu",
                "init_fn": None,
                "clip_grad_val": None,
                "loss_spec": {"name": "MSELoss"},
                "actor_optim_spec": {"name": "Adam", "lr": zoo["learning_rate"]},
                "critic_optim_spec": {"name": "Adam", "lr": zoo["learning_rate"]},
                "lr_scheduler_spec": None,
                "update_type": "polyak",
                "polyak_coef": zoo["tau"],
                "gpu": False,
            },
        },
        **env_and_meta(env_id, zoo["n_envs"], frames, seed),
    }


def sb3_sac(env: Any, zoo: dict[str, Any], seed: int) -> Any:
    """SB3's SAC("MlpPolicy") on `env` with the settings `zoo`, on the CPU: zoo's keys are SAC's
    arguments but n_envs (the env's) and net_arch (the policy's)."""
    from stable_baselines3 import SAC

    kwargs = {k: v for k, v in zoo.items() if k not in ("n_envs", "net_arch")}
    policy_kwargs = {"net_arch": zoo["net_arch"]}
    return SAC(
        "MlpPolicy", env, **kwargs, policy_kwargs=policy_kwargs, seed=seed, device="cpu", verbose=0
    )


# -- parent ------------------------------------------------------------------------------------
def run_child(cmp: Comparison, lib: str, frames: int, seed: int) -> dict[str, Any]:
    """Run one library's training in a fresh single-threaded Python process; its result dict."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix=f"{cmp.script.stem}_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            str(cmp.script.resolve()),
            "--frames",
            str(frames),
            "--seed",
            str(seed),
        ]
        cmd += ["--child", lib, "--result-path", str(result_path)]
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=ROOT, check=False)
        if proc.returncode != 0 or not result_path.exists():
            raise SystemExit(f"{lib} run failed (exit code {proc.returncode})")
        result = json.loads(result_path.read_text())
    result["process_s"] = time.perf_counter() - start
    result["fps"] = result["frames"] / result["wall_s"]
    if cmp.solved is not None:
        result["solved"] = result["mean_return"] >= cmp.solved
    return result


def format_line(cmp: Comparison, lib: str, r: dict[str, Any]) -> str:
    line = (
        f"[{lib}] frames {r['frames']} | wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f}"
        f" | mean_return(last 100) {r['mean_return']:.1f}"
    )
    if cmp.solved is not None:
        line += f" | solved (>= {cmp.solved:g}): {'yes' if r['solved'] else 'no'}"
    for key, fmt in cmp.extra_fields.items():
        if key in r:
            line += f" | {key} {r[key]:{fmt}}"
    return line


def compare(cmp: Comparison, frames: int, seed: int) -> None:
    """Parent: run both libraries, print their lines and the fps ratio, write the JSON report."""
    import stable_baselines3
    import torch

    print(
        f"{cmp.algo} {cmp.env_id}, {cmp.settings}, frames {frames}, seed {seed}, 1 torch thread per run",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    for lib in LIBS:
        print(f"[{lib}] training ...", flush=True)
        r = results[lib] = run_child(cmp, lib, frames, seed)
        print(format_line(cmp, lib, r), flush=True)
    ratio = results["slm_lab"]["fps"] / results["sb3"]["fps"]
    print(f"fps ratio slm_lab / sb3: {ratio:.3f}")

    report: dict[str, Any] = {
        "env": cmp.env_id,
        "frames": frames,
        "seed": seed,
        "torch_threads": 1,
    }
    if cmp.solved is not None:
        report["solved_threshold"] = cmp.solved
    report |= {
        "results": results,
        "fps_ratio_slm_lab_over_sb3": ratio,
        "hyperparameters": cmp.hyperparameters,
        "slm_lab_spec": cmp.slm_lab_spec(frames, seed),
        "mismatches": cmp.mismatches,
        **cmp.report_extra,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
        },
        "cpu_count": os.cpu_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out_path = cmp.out_path
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out_path.relative_to(ROOT)}")


def cli(cmp: Comparison, default_frames: int, doc: str) -> None:
    """Run the comparison's command line: the parent by default, a child with --child."""

    def main(
        frames: Annotated[
            int, typer.Option(help="training frames (env steps over all envs) per library")
        ] = default_frames,
        seed: Annotated[int, typer.Option(help="random seed for both libraries")] = 0,
        child: Annotated[str | None, typer.Option(hidden=True)] = None,
        result_path: Annotated[Path | None, typer.Option(hidden=True)] = None,
    ) -> None:
        if child is not None:
            runners = cmp.runners()
            if child not in runners or result_path is None:
                raise typer.BadParameter(
                    f"--child must be one of {', '.join(LIBS)}, with --result-path"
                )
            result_path.write_text(json.dumps(runners[child](frames, seed)))
            return
        compare(cmp, frames, seed)

    main.__doc__ = doc
    typer.run(main)
