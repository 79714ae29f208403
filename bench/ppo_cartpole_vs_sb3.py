"""PPO on CartPole-v1 with RL Zoo's hyperparameters: SLM Lab vs Stable-Baselines3, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other. For each
the script prints frames, training wall seconds, fps (frames / training wall time) and the mean
return of the last 100 finished training episodes (solved: >= 475), then the fps ratio
slm_lab / sb3. Results also go to bench/out/ppo_cartpole_vs_sb3.json.

usage: uv run --group bench python bench/ppo_cartpole_vs_sb3.py [--frames 100000] [--seed 0]

RL Zoo (hyperparams/ppo.yml, CartPole-v1): n_envs 8, n_steps 32, batch_size 256,
gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0.0, learning_rate lin_1e-3,
clip_range lin_0.2, n_timesteps 1e5; everything else SB3's PPO/MlpPolicy defaults: separate
[64, 64] tanh actor and critic, orthogonal init (gain sqrt 2 body, 0.01 policy head, 1 value
head), one Adam (eps 1e-5) over both nets, global grad-norm clip 0.5, vf_coef 0.5, advantages
normalized per minibatch, no value clipping, no target_kl.

Known differences SLM Lab's spec cannot remove (see MISMATCHES below).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

ENV_ID = "CartPole-v1"
SOLVED = 475.0
ROOT = Path(__file__).resolve().parent.parent
OUT_PATH = ROOT / "bench" / "out" / "ppo_cartpole_vs_sb3.json"
LIBS = ("slm_lab", "sb3")

# RL Zoo's hyperparameters for PPO on CartPole-v1
ZOO = {
    "n_envs": 8,
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": 1e-3,  # lin_1e-3: times progress remaining
    "clip_range": 0.2,  # lin_0.2
    # SB3 defaults
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "adam_eps": 1e-5,
}

MISMATCHES = [
    "hidden-layer init gain: SLM Lab uses torch's recommended gain for tanh (5/3), SB3 sqrt(2); "
    "the spec has no key for the body's gain (heads match: 0.01 policy, 1.0 value)",
    "gradient clipping: SLM Lab clips the actor's and the critic's gradient norms to 0.5 each; "
    "SB3 clips the norm of all parameters together to 0.5",
    "LR schedule timing: SLM Lab steps its LR scheduler after each training call, so a training call "
    "at frame f uses lr(f - 256); SB3 uses lr(f). clip_eps follows frames within one vector step",
    "frame count: SB3 trains on whole rollouts until num_timesteps >= frames "
    "(ceil(frames / 256) * 256 frames, all trained on; its last update runs at progress <= 0, "
    "i.e. lr and clip range 0, or slightly negative when frames is not a multiple of 256, "
    "as RL Zoo's linear schedule is not clamped); "
    "SLM Lab stops at frames and leaves a final partial batch untrained",
]


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
    return {
        "name": "ppo_cartpole_zoo",
        "agent": {
            "name": "PPO",
            "algorithm": {
                "name": "PPO",
                "action_pdtype": "default",
                "action_policy": "default",
                "gamma": ZOO["gamma"],
                "lam": ZOO["gae_lambda"],
                "time_horizon": ZOO["n_steps"],
                "minibatch_size": ZOO["batch_size"],
                "training_epoch": ZOO["n_epochs"],
                "val_loss_coef": ZOO["vf_coef"],
                "clip_vloss": False,
                "normalize_v_targets": False,
                "clip_eps_spec": {
                    "name": "linear_decay",
                    "start_val": ZOO["clip_range"],
                    "end_val": 0.0,
                    "start_step": 0,
                    "end_step": frames,
                },
                "entropy_coef_spec": {
                    "name": "no_decay",
                    "start_val": ZOO["ent_coef"],
                    "end_val": ZOO["ent_coef"],
                    "start_step": 0,
                    "end_step": 0,
                },
            },
            "memory": {"name": "OnPolicyBatchReplay"},
            "net": {
                "type": "MLPNet",
                "shared": False,
                "hid_layers": [64, 64],
                "hid_layers_activation": "tanh",
                "init_fn": "orthogonal_",
                "actor_init_std": 0.01,
                "critic_init_std": 1.0,
                "clip_grad_val": ZOO["max_grad_norm"],
                "use_same_optim": True,
                "loss_spec": {"name": "MSELoss"},
                "actor_optim_spec": {
                    "name": "Adam",
                    "lr": ZOO["learning_rate"],
                    "eps": ZOO["adam_eps"],
                },
                "lr_scheduler_spec": {"name": "LinearToZero", "frame": frames},
                "gpu": False,
            },
        },
        "env": {
            "name": ENV_ID,
            "num_envs": ZOO["n_envs"],
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


# -- children: one library's training run, in its own process ---------------------------------
def run_slm_lab(frames: int, seed: int) -> dict[str, Any]:
    import torch

    from slm_lab.experiment.control import Session
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    torch.set_num_threads(1)
    log_setup.setup("WARNING")
    spec = slm_lab_spec(frames, seed)
    spec_util.validate(spec, spec["name"])
    with tempfile.TemporaryDirectory(prefix="slm_lab_vs_sb3_") as tmp:
        run_dir = Path(tmp)
        for sub in ("info", "graph", "log", "model"):
            (run_dir / sub).mkdir()
        session = Session(
            spec, run_dir, trial=0, session=0, dev=False, resume=False, render=False, threads=1
        )
        start = time.perf_counter()
        session.run()
        wall = time.perf_counter() - start
        return {
            "frames": int(session.env.clock.frame),
            "wall_s": wall,
            "mean_return": float(session.env.total_reward),
            "episodes": int(session.env.clock.epi),
            "torch_threads": torch.get_num_threads(),
        }


def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env(
        ENV_ID, n_envs=ZOO["n_envs"], seed=seed
    )  # DummyVecEnv of Monitor-wrapped envs

    def linear(initial: float) -> Any:  # RL Zoo's lin_<x>: initial * progress_remaining
        return lambda progress_remaining: progress_remaining * initial

    model = PPO(
        "MlpPolicy",
        env,
        n_steps=ZOO["n_steps"],
        batch_size=ZOO["batch_size"],
        gae_lambda=ZOO["gae_lambda"],
        gamma=ZOO["gamma"],
        n_epochs=ZOO["n_epochs"],
        ent_coef=ZOO["ent_coef"],
        learning_rate=linear(ZOO["learning_rate"]),
        clip_range=linear(ZOO["clip_range"]),
        vf_coef=ZOO["vf_coef"],
        max_grad_norm=ZOO["max_grad_norm"],
        seed=seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=frames)
    wall = time.perf_counter() - start
    returns = [info["r"] for info in model.ep_info_buffer]  # Monitor returns, the last 100 episodes
    episodes = sum(len(r) for r in env.env_method("get_episode_rewards"))
    env.close()
    return {
        "frames": int(model.num_timesteps),
        "wall_s": wall,
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
        "episodes": episodes,
        "torch_threads": torch.get_num_threads(),
    }


# -- parent ------------------------------------------------------------------------------------
def run_child(lib: str, frames: int, seed: int) -> dict[str, Any]:
    """Run one library's training in a fresh single-threaded Python process; its result dict."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="ppo_vs_sb3_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
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
    result["solved"] = result["mean_return"] >= SOLVED
    return result


def main(
    frames: Annotated[
        int, typer.Option(help="training frames (env steps over all envs) per library")
    ] = 100_000,
    seed: Annotated[int, typer.Option(help="random seed for both libraries")] = 0,
    child: Annotated[str | None, typer.Option(hidden=True)] = None,
    result_path: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """Train PPO on CartPole-v1 (RL Zoo hyperparameters) in SLM Lab and in SB3; compare fps and return."""
    if child is not None:
        runners = {"slm_lab": run_slm_lab, "sb3": run_sb3}
        if child not in runners or result_path is None:
            raise typer.BadParameter(
                f"--child must be one of {', '.join(LIBS)}, with --result-path"
            )
        result_path.write_text(json.dumps(runners[child](frames, seed)))
        return

    import stable_baselines3
    import torch

    print(
        f"PPO {ENV_ID}, RL Zoo hyperparameters, frames {frames}, seed {seed}, 1 torch thread per run",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    for lib in LIBS:
        print(f"[{lib}] training ...", flush=True)
        r = results[lib] = run_child(lib, frames, seed)
        print(
            f"[{lib}] frames {r['frames']} | wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f}"
            f" | mean_return(last 100) {r['mean_return']:.1f} | solved (>= {SOLVED:g}): {'yes' if r['solved'] else 'no'}",
            flush=True,
        )
    ratio = results["slm_lab"]["fps"] / results["sb3"]["fps"]
    print(f"fps ratio slm_lab / sb3: {ratio:.3f}")

    report = {
        "env": ENV_ID,
        "frames": frames,
        "seed": seed,
        "torch_threads": 1,
        "solved_threshold": SOLVED,
        "results": results,
        "fps_ratio_slm_lab_over_sb3": ratio,
        "hyperparameters": ZOO,
        "slm_lab_spec": slm_lab_spec(frames, seed),
        "mismatches": MISMATCHES,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
        },
        "cpu_count": os.cpu_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    OUT_PATH.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    typer.run(main)
