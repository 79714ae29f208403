"""SLM Lab against Stable-Baselines3 on the same settings: one `Comparison` record per work.

A record holds one algorithm on one env: the shared hyperparameters (under SB3's names), the SLM
Lab spec built from them, the SB3 model built from them, and the known mismatches that SLM Lab's
spec cannot remove. `COMPARISONS` names them:

- `ppo_cartpole`: PPO CartPole-v1 at RL Zoo's hyperparameters (1e5 frames; solved >= 475);
- `dqn_cartpole`: DQN CartPole-v1 at RL Zoo's hyperparameters (5e4 frames; solved >= 475);
- `sac_pendulum`: SAC Pendulum-v1 at RL Zoo's hyperparameters (2e4 frames), with memory figures;
- `sac_hopper`: SAC Hopper-v5 at RL Zoo's settings but learning_starts 1e3 (2e4 frames);
- `crossq_hopper`: CrossQ Hopper-v5 at crossq_hopper's settings vs sb3-contrib (4000 frames);
- `ppo_hopper`: PPO Hopper-v5 at the shipped ppo_mujoco settings (98304 frames: 3 rollouts);
- `a2c_lunar`: A2C LunarLander-v3 at the shipped a2c_gae_lunar settings, RL Zoo's (3e5 frames);
- `ppo_pong`: PPO ALE/Pong-v5 x16 at the shipped ppo_atari settings (4096 frames: 2 batches).

Commands:
- `compare WORK`: each library trains in its own fresh Python process (this script's hidden
  `child` command), one after the other, pinned to one torch thread (torch.set_num_threads(1),
  OMP_NUM_THREADS=MKL_NUM_THREADS=1). For each it prints frames, training wall seconds (the
  training loop only: SLM Lab's Session.run, SB3's model.learn), fps and the mean return of the
  last 100 finished training episodes, then the fps ratio slm_lab / sb3, and writes
  bench/out/<WORK>_vs_sb3.json.
- `sb3 WORK`: SB3 alone as a user's script runs it, in this process: build the model, learn,
  print frames, episodes and the mean return. bench/whole_process.py and bench/floor.py time this
  whole process against the `slm-lab` CLI. It imports only what such a script imports (SB3, and
  through it torch and gymnasium) and sets nothing a user would not: no torch.set_num_threads
  (the parent's OMP_NUM_THREADS=1 gives one thread), Monitor as SB3 adds it itself.
- `list`: the works, their default frames and settings.

usage: uv run --group bench python bench/vs_sb3.py compare ppo_cartpole [--frames N] [--seed 0]
       uv run --group bench python bench/vs_sb3.py sb3 dqn_cartpole --frames N [--seed 0]

Without the `bench` dependency group this module still imports and `--help` works: SB3 is
imported only where a run needs it.
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
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "bench" / "out"
SPEC_DIR = ROOT / "slm_lab" / "spec" / "benchmark"
LIBS = ("slm_lab", "sb3")
MIB = 1024**2


def write_report(
    name: str, results: dict[str, Any], load_before: tuple[float, ...], packages: tuple[str, ...]
) -> Path:
    """A benchmark's JSON report, bench/out/NAME.json: `results` with the machine's state around
    them (load averages before and after, CPU count, package versions, time); says where."""
    from importlib.metadata import version

    report = results | {
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "versions": {p: version(p) for p in packages},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = OUT_DIR / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    typer.echo(f"wrote {out.relative_to(ROOT)}")
    return out


Runner = Callable[[int, int], dict[str, Any]]  # (frames, seed) -> result dict
ModelBuilder = Callable[[int], tuple[Any, Any]]  # seed -> (SB3 model, its vector env)


@dataclass
class Comparison:
    algo: str  # as printed in the header, e.g. "PPO"
    env_id: str
    default_frames: int
    hyperparameters: dict[str, Any]
    slm_lab_spec: Callable[[int, int], dict[str, Any]]  # (frames, seed) -> spec with its name
    sb3_model: ModelBuilder  # the model (and env) as a user's SB3 script builds it
    mismatches: list[str]
    solved: float | None = None  # mean return that counts as solved; None: not reported
    run_slm_lab: Runner | None = None  # default: run_session(slm_lab_spec(frames, seed))
    run_sb3: Runner | None = None  # default: one torch thread, learn_and_close on sb3_model
    grad_steps: bool = False  # off-policy: both default runners report the gradient steps
    # result keys printed after the standard ones (and grad_steps) on each line, with formats
    extra_fields: dict[str, str] = field(default_factory=dict)
    report_extra: dict[str, Any] = field(default_factory=dict)  # more top-level JSON keys
    settings: str = "RL Zoo hyperparameters"  # whose settings both run, as the header says

    def runners(self) -> dict[str, Runner]:
        def slm(frames: int, seed: int) -> dict[str, Any]:
            extra = session_grad_steps if self.grad_steps else None
            return run_session(self.slm_lab_spec(frames, seed), extra=extra)

        def sb3(frames: int, seed: int) -> dict[str, Any]:
            pin_torch_threads()
            return learn_and_close(*self.sb3_model(seed), frames, grad_steps=self.grad_steps)

        return {"slm_lab": self.run_slm_lab or slm, "sb3": self.run_sb3 or sb3}


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


def shipped_spec(path: Path, name: str, env_id: str, frames: int, seed: int) -> dict[str, Any]:
    """Spec `name` of the shipped benchmark file `path` on env_id, as one seeded session of
    `frames` frames, with its name."""
    spec = json.loads(path.read_text())[name]
    spec["env"] |= {"name": env_id, "max_frame": frames}
    spec["meta"] |= {"max_session": 1, "max_trial": 1, "random_seed": seed}
    return {"name": name, **spec}


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


def session_grad_steps(session: Any) -> dict[str, Any]:
    """run_session's `extra` for off-policy comparisons: the session's gradient steps."""
    return {"grad_steps": int(session.clock.opt_step)}


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


def learn_and_close(model: Any, env: Any, frames: int, grad_steps: bool) -> dict[str, Any]:
    """Train an SB3 model for `frames` (timed_learn); sb3_result's keys, and the gradient steps
    of an off-policy model when `grad_steps`; the env is closed."""
    wall = timed_learn(model, frames)
    result = sb3_result(model, env, wall)
    if grad_steps:
        result["grad_steps"] = int(model._n_updates)
    env.close()
    return result


def make_env(env_id: str, n_envs: int, seed: int) -> Any:
    """SB3's DummyVecEnv of Monitor-wrapped envs, as make_vec_env builds it for a user."""
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env(env_id, n_envs=n_envs, seed=seed)


def pick(settings: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The named settings, as keyword arguments of an SB3 model under the same names."""
    return {k: settings[k] for k in keys}


def linear(initial: float) -> Callable[[float], float]:
    """RL Zoo's lin_<x>: initial * progress_remaining."""
    return lambda progress_remaining: progress_remaining * initial


# -- PPO CartPole-v1 ---------------------------------------------------------------------------
# RL Zoo (hyperparams/ppo.yml, CartPole-v1), n_timesteps 1e5; everything else SB3's PPO/MlpPolicy
# defaults: separate [64, 64] tanh actor and critic, orthogonal init (gain sqrt 2 body, 0.01
# policy head, 1 value head), one Adam (eps 1e-5) over both nets, global grad-norm clip 0.5,
# advantages normalized per minibatch, no value clipping, no target_kl.
PPO_CARTPOLE = {
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


def ppo_cartpole_spec(frames: int, seed: int) -> dict[str, Any]:
    z = PPO_CARTPOLE
    clip_eps = {"name": "linear_decay", "start_val": z["clip_range"], "end_val": 0.0}
    entropy = {"name": "no_decay", "start_val": z["ent_coef"], "end_val": z["ent_coef"]}
    algorithm = {
        "name": "PPO",
        "action_pdtype": "default",
        "action_policy": "default",
        "gamma": z["gamma"],
        "lam": z["gae_lambda"],
        "time_horizon": z["n_steps"],
        "minibatch_size": z["batch_size"],
        "training_epoch": z["n_epochs"],
        "val_loss_coef": z["vf_coef"],
        "clip_vloss": False,
        "normalize_v_targets": False,
        "clip_eps_spec": clip_eps | {"start_step": 0, "end_step": frames},
        "entropy_coef_spec": entropy | {"start_step": 0, "end_step": 0},
    }
    net = {
        "type": "MLPNet",
        "shared": False,
        "hid_layers": [64, 64],
        "hid_layers_activation": "tanh",
        "init_fn": "orthogonal_",
        "actor_init_std": 0.01,
        "critic_init_std": 1.0,
        "clip_grad_val": z["max_grad_norm"],
        "use_same_optim": True,
        "loss_spec": {"name": "MSELoss"},
        "actor_optim_spec": {"name": "Adam", "lr": z["learning_rate"], "eps": z["adam_eps"]},
        "lr_scheduler_spec": {"name": "LinearToZero", "frame": frames},
        "gpu": False,
    }
    return {
        "name": "ppo_cartpole_zoo",
        "agent": {"name": "PPO", "algorithm": algorithm, "memory": {"name": "OnPolicyBatchReplay"}}
        | {"net": net},
        **env_and_meta("CartPole-v1", z["n_envs"], frames, seed),
    }


def ppo_cartpole_sb3(seed: int) -> tuple[Any, Any]:
    from stable_baselines3 import PPO

    z = PPO_CARTPOLE
    env = make_env("CartPole-v1", z["n_envs"], seed)
    model = PPO(
        "MlpPolicy",
        env,
        **pick(z, "n_steps", "batch_size", "gae_lambda", "gamma", "n_epochs", "ent_coef"),
        learning_rate=linear(z["learning_rate"]),
        clip_range=linear(z["clip_range"]),
        seed=seed,
        device="cpu",
    )
    return model, env


TANH_INIT_GAIN_MISMATCH = (
    "hidden-layer init gain: SLM Lab uses torch's recommended gain for tanh (5/3), SB3 sqrt(2); "
    "the spec has no key for the body's gain (heads match: 0.01 policy, 1.0 value)"
)
PPO_CARTPOLE_MISMATCHES = [
    TANH_INIT_GAIN_MISMATCH,
    "LR schedule timing: SLM Lab steps its LR scheduler after each training call, so a training call "
    "at frame f uses lr(f - 256); SB3 uses lr(f). clip_eps follows frames within one vector step",
    "frame count: SB3 trains on whole rollouts until num_timesteps >= frames "
    "(ceil(frames / 256) * 256 frames, all trained on; its last update runs at progress <= 0, "
    "i.e. lr and clip range 0, or slightly negative when frames is not a multiple of 256, "
    "as RL Zoo's linear schedule is not clamped); "
    "SLM Lab stops at frames and leaves a final partial batch untrained",
]

# -- DQN CartPole-v1 ---------------------------------------------------------------------------
# RL Zoo (hyperparams/dqn.yml, CartPole-v1), n_timesteps 5e4; everything else SB3's DQN defaults:
# n_envs 1, ReLU, torch's default init, Huber loss, grad-norm clip 10, Adam (eps 1e-8), tau 1 (the
# target net is copied), exploration_initial_eps 1, truncated episodes bootstrap.
DQN_CARTPOLE = {
    "n_envs": 1,
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "net_arch": [256, 256],
    # SB3 defaults
    "exploration_initial_eps": 1.0,
    "tau": 1.0,
    "max_grad_norm": 10.0,
    "loss": "smooth_l1 (Huber, delta 1)",
    "optimizer": "Adam (eps 1e-8)",
}
# SB3 trains only after whole train_freq rollouts once num_timesteps > learning_starts, i.e. at
# frames 1024, 1280, ...: SLM Lab's training_start_step is that first frame, so that both train
# at the same frames on the same number of stored transitions.
DQN_FIRST_TRAIN_FRAME = (
    DQN_CARTPOLE["learning_starts"] // DQN_CARTPOLE["train_freq"] + 1
) * DQN_CARTPOLE["train_freq"]


def dqn_cartpole_spec(frames: int, seed: int) -> dict[str, Any]:
    z = DQN_CARTPOLE
    return {
        "name": "dqn_cartpole_zoo",
        "agent": {
            "name": "DQN",
            "algorithm": {
                "name": "DQN",
                "action_pdtype": "Categorical",
                "action_policy": "epsilon_greedy",
                "explore_var_spec": {
                    "name": "linear_decay",
                    "start_val": z["exploration_initial_eps"],
                    "end_val": z["exploration_final_eps"],
                    "start_step": 0,
                    "end_step": z["exploration_fraction"] * frames,
                },
                "gamma": z["gamma"],
                "training_start_step": DQN_FIRST_TRAIN_FRAME,
                "training_frequency": z["train_freq"],
                "training_iter": z["gradient_steps"],
                "training_batch_iter": 1,
            },
            "memory": {
                "name": "Replay",
                "max_size": z["buffer_size"],
                "batch_size": z["batch_size"],
                "use_cer": False,
            },
            "net": {
                "type": "MLPNet",
                "hid_layers": z["net_arch"],
                "hid_layers_activation": "relu",
                "init_fn": None,
                "clip_grad_val": z["max_grad_norm"],
                "loss_spec": {"name": "SmoothL1Loss"},
                "optim_spec": {"name": "Adam", "lr": z["learning_rate"]},
                "lr_scheduler_spec": None,
                "update_type": "replace",
                "update_frequency": z["target_update_interval"],
                "gpu": False,
            },
        },
        **env_and_meta("CartPole-v1", z["n_envs"], frames, seed),
    }


def dqn_cartpole_sb3(seed: int) -> tuple[Any, Any]:
    from stable_baselines3 import DQN

    z = DQN_CARTPOLE
    env = make_env("CartPole-v1", z["n_envs"], seed)
    keys = ("learning_rate", "batch_size", "buffer_size", "learning_starts", "gamma")
    keys += ("target_update_interval", "train_freq", "gradient_steps", "exploration_fraction")
    model = DQN(
        "MlpPolicy",
        env,
        **pick(z, *keys, "exploration_final_eps"),
        policy_kwargs={"net_arch": z["net_arch"]},
        seed=seed,
        device="cpu",
    )
    return model, env


DQN_CARTPOLE_MISMATCHES = [
    "target net timing: SB3 copies the online net into the target every 10 env steps, between "
    "training calls, so all 128 gradient steps of a training call use the online net as it was "
    "at the call's start; SLM Lab checks after each gradient step, so the first step of a call "
    "uses the target copied after the first step of the previous call and steps 2-128 use the "
    "online net as it was after step 1 (a copy can only follow a gradient step)",
    "warm-up actions: SB3 acts uniformly at random for the first learning_starts (1000) steps; "
    "SLM Lab acts epsilon-greedily throughout, with epsilon falling from 1.0 to 0.88 over those "
    "steps (about 6% greedy actions)",
    "frame count: SB3 collects whole 256-step rollouts until num_timesteps >= frames "
    "(ceil(frames / 256) * 256 frames: 50176 for 5e4) and trains after the last one too "
    "(193 training calls at 5e4); SLM Lab stops at frames (192 training calls, at the same "
    "frames as SB3's first 192)",
    "optimizer kernel: SLM Lab builds fused Adam, SB3 torch's default (foreach) Adam: the same "
    "update up to float rounding",
    "random streams: replay sampling, exploration and env seeding draw from different RNGs, so "
    "equal seeds give different runs",
]

# -- SAC (Pendulum-v1 and Hopper-v5 differ only in env and settings) ---------------------------
# SB3's SAC defaults under its names, with RL Zoo's one env: learning_starts 100 (uniformly
# random actions until then), one gradient step per env step, polyak every step, ent_coef auto
# (initial 1), target_entropy -dim(A), [256, 256] ReLU actor and twin critics, torch's default
# init, tanh-squashed Gaussian with state-dependent log-std in [-20, 2], Adam (eps 1e-8), no
# gradient clipping, truncated episodes bootstrap.
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
SAC_PENDULUM = SB3_SAC_DEFAULTS | {"learning_rate": 1e-3}  # RL Zoo's Pendulum-v1, 2e4 frames
SAC_HOPPER_LEARNING_STARTS = 1_000  # RL Zoo's is 1e4; lowered for both so a short run trains
SAC_HOPPER = SB3_SAC_DEFAULTS | {"learning_starts": SAC_HOPPER_LEARNING_STARTS}


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


def sac_sb3(env_id: str, zoo: dict[str, Any]) -> ModelBuilder:
    """SB3's SAC("MlpPolicy") on env_id with the settings `zoo`, on the CPU: zoo's keys are
    SAC's arguments but n_envs (the env's) and net_arch (the policy's)."""

    def build(seed: int) -> tuple[Any, Any]:
        from stable_baselines3 import SAC

        env = make_env(env_id, zoo["n_envs"], seed)
        kwargs = {k: v for k, v in zoo.items() if k not in ("n_envs", "net_arch")}
        policy_kwargs = {"net_arch": zoo["net_arch"]}
        model = SAC(
            "MlpPolicy", env, **kwargs, policy_kwargs=policy_kwargs, seed=seed, device="cpu"
        )
        return model, env

    return build


SAC_MISMATCHES = [
    "temperature loss: SB3 minimizes -log_alpha * (log pi + target_entropy), SLM Lab "
    "-alpha * (log pi + target_entropy): the gradient on log_alpha is scaled by alpha, which "
    "Adam's normalization mostly, but not exactly, cancels as alpha changes",
    "critic loss scale: SB3 0.5 * (MSE(Q1, y) + MSE(Q2, y)), SLM Lab MSE(Q1, y) + MSE(Q2, y): "
    "a constant factor 2, which Adam cancels up to its eps (no gradient clipping on either side)",
    "tanh correction: SB3 subtracts sum log(1 - tanh(u)^2 + 1e-6), SLM Lab the exact "
    "2 * (log 2 - u - softplus(-2u)): they differ only where |tanh(u)| is near 1",
    "optimizer kernel: SLM Lab builds fused Adam, SB3 torch's default (foreach) Adam: the same "
    "update up to float rounding",
    "replay storage: SB3's buffer stores next observations (and dones, timeouts as float32) in "
    "arrays of their own; SLM Lab's stores each observation once plus a ring of final "
    "observations, so its arrays are smaller (a speed/memory difference, not a learning one)",
    "random streams: replay sampling, policy noise and env seeding draw from different RNGs, so "
    "equal seeds give different runs",
]
SAC_PENDULUM_MISMATCHES = [
    "training start: SB3 takes its first gradient step once num_timesteps > learning_starts "
    "(after 101 transitions, sampling 256 with replacement from them); SLM Lab's Replay is ready "
    "only once it holds batch_size transitions, so it starts at frame 256: 155 fewer gradient "
    "steps (19745 vs 19900 at 2e4 frames). Random warm-up actions match (the first 100)",
    *SAC_MISMATCHES,
]
SAC_HOPPER_MISMATCHES = [
    "training start: SB3 steps once num_timesteps > learning_starts, SLM Lab from "
    "training_start_step on: one gradient step apart",
    *SAC_MISMATCHES,
]


def memory_stats(memory: Any, capacity: int) -> dict[str, Any]:
    """After the run: peak RSS; the replay memory's array bytes; RSS now, and again once every
    page of those arrays is resident (as with a full buffer). np.zeros pages become resident only
    when written: building the buffer costs no RSS for them, filling it at most their bytes."""
    stats = {"peak_rss_mb": peak_rss_mb(), "rss_after_mb": current_rss_mb()}
    nbytes = array_nbytes(memory)
    touch_arrays(memory)
    return {
        **stats,
        "rss_full_buffer_mb": current_rss_mb(),
        "memory_capacity": capacity,
        "memory_array_bytes": nbytes,
        "memory_array_mb": nbytes / MIB,
    }


def sac_pendulum_slm_lab(frames: int, seed: int) -> dict[str, Any]:
    """SLM Lab's Pendulum child: the standard keys, gradient steps and memory figures."""

    def extra(session: Any) -> dict[str, Any]:
        memory = session.agent.algorithm.memory
        return {
            "grad_steps": int(session.clock.opt_step),
            **memory_stats(memory, memory.capacity),
        }

    return run_session(
        sac_spec("sac_pendulum_zoo", "Pendulum-v1", SAC_PENDULUM, frames, seed),
        extra=extra,
        before=lambda: {"rss_before_mb": current_rss_mb()},
        built=lambda session: {"rss_built_mb": current_rss_mb()},
    )


def sac_pendulum_sb3_child(frames: int, seed: int) -> dict[str, Any]:
    """SB3's Pendulum child: the standard keys, gradient steps and memory figures."""
    pin_torch_threads()
    rss_before = current_rss_mb()
    model, env = sac_sb3("Pendulum-v1", SAC_PENDULUM)(seed)
    rss_built = current_rss_mb()
    wall = timed_learn(model, frames)
    buffer = model.replay_buffer
    result = {
        **sb3_result(model, env, wall),
        "grad_steps": int(model._n_updates),
        "rss_before_mb": rss_before,
        "rss_built_mb": rss_built,
        **memory_stats(buffer, buffer.buffer_size * buffer.n_envs),
    }
    env.close()
    return result


# -- CrossQ Hopper-v5 (sb3-contrib) ------------------------------------------------------------
# crossq_hopper's settings (slm_lab/spec/benchmark/crossq/crossq_mujoco.json) where sb3-contrib
# can follow them, sb3-contrib's CrossQ defaults where SLM Lab can: a [256, 256] actor and a
# [512, 512] critic, both with batch renorm (sb3-contrib puts it in the actor too, so the SLM Lab
# side does here), the actor and alpha every policy_delay critic steps.
CROSSQ_HOPPER = {
    "n_envs": 1,
    "learning_rate": 1e-3,
    "betas": (0.5, 0.999),
    "buffer_size": 1_000_000,
    "learning_starts": 1_000,  # crossq_hopper's is 1e4; lowered for both so a short run trains
    "batch_size": 256,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    "policy_delay": 3,  # both libraries' default and crossq_hopper's
    "ent_coef": "auto",
    "target_entropy": "auto",
    "net_arch": {"pi": [256, 256], "qf": [512, 512]},
    "renorm_warmup_steps": 100_000,  # sb3-contrib's default and crossq_hopper's
}


def crossq_hopper_spec(frames: int, seed: int) -> dict[str, Any]:
    s = CROSSQ_HOPPER
    optim = {"name": "Adam", "lr": s["learning_rate"], "betas": list(s["betas"])}
    net = {
        "type": "MLPNet",
        "hid_layers_activation": "relu",
        "batch_renorm": True,
        "batch_renorm_warmup_steps": s["renorm_warmup_steps"],
        "init_fn": "orthogonal_",
        "clip_grad_val": None,
        "optim_spec": optim,
        "gpu": False,
    }
    return {
        "name": "crossq_hopper_vs_sb3",
        "agent": {
            "name": "CrossQ",
            "algorithm": {
                "name": "CrossQ",
                "action_pdtype": "default",
                "action_policy": "default",
                "gamma": s["gamma"],
                "training_start_step": s["learning_starts"],
                "training_frequency": s["train_freq"],
                "training_iter": s["gradient_steps"],
                "policy_delay": s["policy_delay"],
                "log_alpha_max": 0.5,
            },
            "memory": {
                "name": "Replay",
                "max_size": s["buffer_size"],
                "batch_size": s["batch_size"],
                "use_cer": False,
            },
            "net": {**net, "hid_layers": s["net_arch"]["pi"]},
            "critic_net": {
                **net,
                "hid_layers": s["net_arch"]["qf"],
                "loss_spec": {"name": "MSELoss"},
            },
        },
        **env_and_meta("Hopper-v5", s["n_envs"], frames, seed),
    }


def crossq_hopper_sb3(seed: int) -> tuple[Any, Any]:
    import torch
    from sb3_contrib import CrossQ

    s = CROSSQ_HOPPER
    env = make_env("Hopper-v5", s["n_envs"], seed)
    model = CrossQ(
        "MlpPolicy",
        env,
        **pick(s, "learning_rate", "buffer_size", "learning_starts", "batch_size", "gamma"),
        **pick(s, "train_freq", "gradient_steps", "policy_delay", "ent_coef", "target_entropy"),
        policy_kwargs={
            "net_arch": s["net_arch"],
            "renorm_warmup_steps": s["renorm_warmup_steps"],
            "optimizer_class": torch.optim.Adam,
            "optimizer_kwargs": {"betas": s["betas"]},
        },
        seed=seed,
        device="cpu",
    )
    return model, env


CROSSQ_HOPPER_MISMATCHES = [
    "batch renorm: SLM Lab's BatchRenorm1d has eps 1e-5, sb3-contrib's 1e-3 (both momentum "
    "0.01); the same work",
    "temperature: SLM Lab's crossq_hopper caps log alpha at 0.5 (log_alpha_max), sb3-contrib "
    "has no cap; the same work",
    "init: SLM Lab's orthogonal init (crossq_hopper's), sb3-contrib torch's default; the same work",
    "training start: sb3-contrib steps once num_timesteps > learning_starts, SLM Lab from "
    "training_start_step on: one gradient step apart",
    "the learning differences of sac_pendulum that CrossQ shares with SAC (temperature loss, "
    "exact tanh correction, fused vs foreach Adam, replay storage, random streams)",
]

# -- PPO Hopper-v5 (the shipped ppo_mujoco) ----------------------------------------------------
# The SLM Lab side is ppo_mujoco as shipped (env Hopper-v5, one session, sync vector env as SB3's
# DummyVecEnv): 16 envs, time_horizon 2048, 10 epochs of minibatches of 64, [256, 256] tanh
# actor and critic with one AdamW (lr 3e-4), clip 0.2, gamma 0.99, lam 0.95, observations and
# rewards normalized and clipped at 10. The SB3 side: 16 Monitor-wrapped envs under
# VecNormalize(clip 10), PPO("MlpPolicy") with the same settings under SB3's names.
PPO_MUJOCO_FILE = SPEC_DIR / "ppo" / "ppo_mujoco.json"
PPO_HOPPER = {
    "n_envs": 16,
    "n_steps": 2048,
    "batch_size": 64,
    "n_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "learning_rate": 3e-4,
    "clip_range": 0.2,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "net_arch": [256, 256],
    "activation": "tanh",
    "clip_obs": 10.0,
    "clip_reward": 10.0,
}


def ppo_hopper_spec(frames: int, seed: int) -> dict[str, Any]:
    spec = shipped_spec(PPO_MUJOCO_FILE, "ppo_mujoco", "Hopper-v5", frames, seed)
    spec["agent"]["net"]["gpu"] = False
    spec["env"]["vectorization_mode"] = "sync"  # one process, as SB3's DummyVecEnv
    return spec


def ppo_hopper_sb3(seed: int) -> tuple[Any, Any]:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    s = PPO_HOPPER
    env = VecNormalize(
        make_env("Hopper-v5", s["n_envs"], seed),
        gamma=s["gamma"],
        clip_obs=s["clip_obs"],
        clip_reward=s["clip_reward"],
    )
    keys = ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "learning_rate")
    keys += ("clip_range", "ent_coef", "vf_coef", "max_grad_norm")
    model = PPO(
        "MlpPolicy",
        env,
        **pick(s, *keys),
        policy_kwargs={
            "net_arch": {"pi": s["net_arch"], "vf": s["net_arch"]},
            "activation_fn": torch.nn.Tanh,
        },
        seed=seed,
        device="cpu",
    )
    return model, env  # sb3_result reads the Monitor envs through VecNormalize


PPO_HOPPER_MISMATCHES = [
    "optimizer: the spec's AdamW (weight decay 0.01) vs SB3's Adam (eps 1e-5)",
    "value targets: the spec normalizes them (normalize_v_targets), SB3 does not",
    "hidden-layer init gain: SLM Lab uses torch's recommended gain for tanh (5/3), SB3 sqrt(2)",
    "frame count: SB3 trains on whole rollouts until num_timesteps >= frames; SLM Lab stops at "
    "frames (the default frames are whole rollouts for both)",
]

# -- A2C LunarLander-v3 (the shipped a2c_gae_lunar) -------------------------------------------
# The shipped a2c_gae_lunar has RL Zoo's A2C settings for LunarLander (hyperparams/a2c.yml: 8
# envs, n_steps 5, gamma 0.995, lr lin_0.00083, ent_coef 1e-5; n_timesteps 2e5 there, the cell's
# 3e5 here); everything else SB3's A2C/MlpPolicy defaults: gae_lambda 1, vf_coef 0.5, global
# grad-norm clip 0.5, RMSprop (alpha 0.99, eps 1e-5), separate [64, 64] tanh actor and critic,
# orthogonal init, advantages not normalized, truncated episodes bootstrap. The question it
# answers: does SB3's A2C at these settings score more than the cell's runs here (45.13)?
A2C_LUNAR_FILE = SPEC_DIR / "a2c" / "a2c_gae_lunar.json"
A2C_LUNAR = {
    "n_envs": 8,
    "n_steps": 5,
    "gamma": 0.995,
    "learning_rate": 8.3e-4,  # lin_0.00083: times progress remaining
    "ent_coef": 1e-5,
    # SB3 defaults
    "gae_lambda": 1.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "rms_prop_eps": 1e-5,  # torch's RMSprop, alpha 0.99
}


def a2c_lunar_spec(frames: int, seed: int) -> dict[str, Any]:
    spec = shipped_spec(A2C_LUNAR_FILE, "a2c_gae_lunar", "LunarLander-v3", frames, seed)
    spec["agent"]["net"]["gpu"] = False
    return spec


def a2c_lunar_sb3(seed: int) -> tuple[Any, Any]:
    from stable_baselines3 import A2C

    z = A2C_LUNAR
    env = make_env("LunarLander-v3", z["n_envs"], seed)
    model = A2C(
        "MlpPolicy",
        env,
        **pick(
            z,
            "n_steps",
            "gamma",
            "ent_coef",
            "gae_lambda",
            "vf_coef",
            "max_grad_norm",
            "rms_prop_eps",
        ),
        learning_rate=linear(z["learning_rate"]),
        seed=seed,
        device="cpu",
    )
    return model, env


A2C_LUNAR_MISMATCHES = [
    TANH_INIT_GAIN_MISMATCH,
    "LR schedule timing: SLM Lab steps its LR scheduler after each training call, so a training "
    "call at frame f uses lr(f - 40); SB3 uses lr(f)",
    "frame count: SB3 trains on whole rollouts of 40 frames until num_timesteps >= frames; SLM "
    "Lab stops at frames (the default frames are whole rollouts for both)",
]

# -- PPO ALE/Pong-v5 (the shipped ppo_atari) --------------------------------------------------
# The SLM Lab side is ppo_atari as shipped on ALE/Pong-v5, one session on the CPU: ale-py's native
# vector env of 16 games (frameskip 4, 84x84 grey, 4 frames stacked), the Nature CNN with policy
# and value heads on one body, 128 steps x 16 envs a batch, 4 epochs of minibatches of 256,
# clip 0.1 (values too), fused AdamW (lr 2.5e-4 linear to 0, eps 1e-5). The SB3 side:
# make_atari_env + VecFrameStack(4), PPO("CnnPolicy") with the same settings under SB3's names.
# bench/atari_vs_sb3.py runs the same two (and DQN's) as whole processes in pairs.
ATARI_ENV_ID = "ALE/Pong-v5"
ATARI_NUM_ENVS = 16
PPO_ATARI_FILE = SPEC_DIR / "ppo" / "ppo_atari.json"
# SB3's counterparts of the ppo_atari spec (16 envs x 128 steps, minibatch 256, 4 epochs, ...)
PPO_PONG = {
    "n_steps": 128,
    "batch_size": 256,
    "n_epochs": 4,
    "learning_rate": 2.5e-4,  # linear to 0 over the run, as the spec's LinearToZero
    "clip_range": 0.1,
    "clip_range_vf": 0.1,  # the spec's clip_vloss: values clipped to within clip_eps
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "optimizer": "AdamW (eps 1e-5, torch's default weight_decay 0.01)",
}


def ppo_pong_spec(frames: int, seed: int) -> dict[str, Any]:
    spec = shipped_spec(PPO_ATARI_FILE, "ppo_atari", ATARI_ENV_ID, frames, seed)
    spec["agent"]["net"]["gpu"] = False  # the CPU, as SB3's side (the spec's "auto" takes a GPU)
    return spec


def atari_env(seed: int) -> Any:
    """16 ALE/Pong-v5 games under SB3's AtariWrapper, 4 frames stacked, as SB3 users build it."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = make_atari_env(
        ATARI_ENV_ID, n_envs=ATARI_NUM_ENVS, seed=seed, env_kwargs={"frameskip": 1}
    )
    return VecFrameStack(env, n_stack=4)


def ppo_pong_sb3(seed: int) -> tuple[Any, Any]:
    import torch
    from stable_baselines3 import PPO

    h = PPO_PONG
    env = atari_env(seed)
    model = PPO(
        "CnnPolicy",
        env,
        **pick(h, "n_steps", "batch_size", "n_epochs", "clip_range", "clip_range_vf", "ent_coef"),
        **pick(h, "vf_coef", "max_grad_norm", "gamma", "gae_lambda"),
        learning_rate=linear(h["learning_rate"]),
        policy_kwargs={"optimizer_class": torch.optim.AdamW, "optimizer_kwargs": {"eps": 1e-5}},
        seed=seed,
        device="cpu",
    )
    return model, env


PPO_PONG_MISMATCHES = [
    "values: both keep the log-probs and V(s) their acting forward computed; for V(s') SLM "
    "Lab runs the net on the last observations and the episodes' final ones (the rest is the "
    "next step's V(s)), SB3 on the last observations and truncated episodes' final ones",
    "value loss: SLM Lab's clip_vloss takes 1/2 the max of the clipped and unclipped squared "
    "errors (CleanRL); SB3's clip_range_vf takes the squared error of the clipped values only",
    "rollout buffer: both keep uint8 observations; SLM Lab also stores every next observation "
    "(its V(s') pass reads the final ones)",
    "frame count: both train on every full batch of 16 x 128 frames; --frames a multiple of "
    "2048 (the default 4096: 2 batches) leaves no partial batch",
]
ATARI_MISMATCHES = [
    "env stepping: SLM Lab steps ale-py's native AtariVectorEnv (C++ threads: one per core "
    "free at launch, by the 1-minute load average, at least 1; frameskip, max-pool, resize and "
    "frame stack in C++); SB3 steps 16 "
    "Python gym envs one after the other in the main thread (DummyVecEnv, make_atari_env's "
    "default) with AtariWrapper and VecFrameStack in Python/OpenCV. This is the difference the "
    "benchmark measures, not one to remove",
    "SB3 id: RL Zoo and SB3's docs use PongNoFrameskip-v4 (no sticky actions); this bench gives "
    "SB3 ALE/Pong-v5 with frameskip 1 so that ALE applies v5's sticky actions (0.25 per frame) "
    "as in SLM Lab's env; AtariWrapper's docstring asks for v4 ids, the wrappers work the same",
    "frame resize: ALE's native env and SB3's WarpFrame (cv2 INTER_AREA) may interpolate "
    "differently; the observations are 84x84 uint8 x4 in both",
    "optimizer kernel: SLM Lab builds fused AdamW, SB3 torch's default (foreach): the same "
    "update up to float rounding",
    "random streams: env seeds, actions and minibatches draw from different RNGs, so equal "
    "seeds give different runs",
    "convolutions: SLM Lab's ConvNet runs in channels_last (NHWC), SB3's NatureCNN in torch's "
    "default NCHW",
]

COMPARISONS: dict[str, Comparison] = {
    "ppo_cartpole": Comparison(
        algo="PPO",
        env_id="CartPole-v1",
        default_frames=100_000,
        hyperparameters=PPO_CARTPOLE,
        slm_lab_spec=ppo_cartpole_spec,
        sb3_model=ppo_cartpole_sb3,
        mismatches=PPO_CARTPOLE_MISMATCHES,
        solved=475.0,
    ),
    "dqn_cartpole": Comparison(
        algo="DQN",
        env_id="CartPole-v1",
        default_frames=50_000,
        hyperparameters=DQN_CARTPOLE,
        slm_lab_spec=dqn_cartpole_spec,
        sb3_model=dqn_cartpole_sb3,
        grad_steps=True,
        mismatches=DQN_CARTPOLE_MISMATCHES,
        solved=475.0,
    ),
    "sac_pendulum": Comparison(
        algo="SAC",
        env_id="Pendulum-v1",
        default_frames=20_000,
        hyperparameters=SAC_PENDULUM,
        slm_lab_spec=lambda frames, seed: sac_spec(
            "sac_pendulum_zoo", "Pendulum-v1", SAC_PENDULUM, frames, seed
        ),
        sb3_model=sac_sb3("Pendulum-v1", SAC_PENDULUM),
        run_slm_lab=sac_pendulum_slm_lab,
        run_sb3=sac_pendulum_sb3_child,
        mismatches=SAC_PENDULUM_MISMATCHES,
        extra_fields={
            "grad_steps": "d",
            "rss_before_mb": ".0f",
            "rss_built_mb": ".0f",
            "peak_rss_mb": ".0f",
            "rss_after_mb": ".0f",
            "rss_full_buffer_mb": ".0f",
            "memory_array_mb": ".1f",
        },
    ),
    "sac_hopper": Comparison(
        algo="SAC",
        env_id="Hopper-v5",
        default_frames=20_000,
        hyperparameters=SAC_HOPPER,
        slm_lab_spec=lambda frames, seed: sac_spec(
            "sac_hopper_zoo", "Hopper-v5", SAC_HOPPER, frames, seed
        ),
        sb3_model=sac_sb3("Hopper-v5", SAC_HOPPER),
        grad_steps=True,
        mismatches=SAC_HOPPER_MISMATCHES,
        settings="RL Zoo hyperparameters but learning_starts 1e3",
    ),
    "crossq_hopper": Comparison(
        algo="CrossQ",
        env_id="Hopper-v5",
        default_frames=4_000,
        hyperparameters=CROSSQ_HOPPER,
        slm_lab_spec=crossq_hopper_spec,
        sb3_model=crossq_hopper_sb3,
        grad_steps=True,
        mismatches=CROSSQ_HOPPER_MISMATCHES,
        settings="crossq_hopper's settings, vs sb3-contrib",
    ),
    "ppo_hopper": Comparison(
        algo="PPO",
        env_id="Hopper-v5",
        default_frames=3 * 16 * 2048,
        hyperparameters=PPO_HOPPER,
        slm_lab_spec=ppo_hopper_spec,
        sb3_model=ppo_hopper_sb3,
        mismatches=PPO_HOPPER_MISMATCHES,
        report_extra={"spec": f"{PPO_MUJOCO_FILE.relative_to(ROOT)}:ppo_mujoco"},
        settings="the shipped ppo_mujoco settings",
    ),
    "a2c_lunar": Comparison(
        algo="A2C",
        env_id="LunarLander-v3",
        default_frames=300_000,
        hyperparameters=A2C_LUNAR,
        slm_lab_spec=a2c_lunar_spec,
        sb3_model=a2c_lunar_sb3,
        mismatches=A2C_LUNAR_MISMATCHES,
        solved=200.0,
        report_extra={"spec": f"{A2C_LUNAR_FILE.relative_to(ROOT)}:a2c_gae_lunar"},
        settings="the shipped a2c_gae_lunar settings (RL Zoo's)",
    ),
    "ppo_pong": Comparison(
        algo="PPO",
        env_id=ATARI_ENV_ID,
        default_frames=2 * ATARI_NUM_ENVS * PPO_PONG["n_steps"],  # 2 batches of 16 x 128
        hyperparameters=PPO_PONG,
        slm_lab_spec=ppo_pong_spec,
        sb3_model=ppo_pong_sb3,
        mismatches=PPO_PONG_MISMATCHES + ATARI_MISMATCHES,
        report_extra={"spec": f"{PPO_ATARI_FILE.relative_to(ROOT)}:ppo_atari"},
        settings="the shipped ppo_atari settings",
    ),
}


# -- parent ------------------------------------------------------------------------------------
def out_path(work: str) -> Path:
    return OUT_DIR / f"{work}_vs_sb3.json"


def run_child(work: str, lib: str, frames: int, seed: int) -> dict[str, Any]:
    """Run one library's training in a fresh single-threaded Python process; its result dict."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix=f"vs_sb3_{work}_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "child", lib, work]
        cmd += ["--frames", str(frames), "--seed", str(seed), "--result-path", str(result_path)]
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=ROOT, check=False)
        if proc.returncode != 0 or not result_path.exists():
            raise SystemExit(f"{lib} run failed (exit code {proc.returncode})")
        result = json.loads(result_path.read_text())
    result["process_s"] = time.perf_counter() - start
    result["fps"] = result["frames"] / result["wall_s"]
    solved = COMPARISONS[work].solved
    if solved is not None:
        result["solved"] = result["mean_return"] >= solved
    return result


def format_line(cmp: Comparison, lib: str, r: dict[str, Any]) -> str:
    line = (
        f"[{lib}] frames {r['frames']} | wall_s {r['wall_s']:.1f} | fps {r['fps']:.0f}"
        f" | mean_return(last 100) {r['mean_return']:.1f}"
    )
    if cmp.solved is not None:
        line += f" | solved (>= {cmp.solved:g}): {'yes' if r['solved'] else 'no'}"
    fields = ({"grad_steps": "d"} if cmp.grad_steps else {}) | cmp.extra_fields
    for key, fmt in fields.items():
        if key in r:
            line += f" | {key} {r[key]:{fmt}}"
    return line


def run_comparison(work: str, frames: int, seed: int) -> None:
    """Parent: run both libraries, print their lines and the fps ratio, write the JSON report."""
    import stable_baselines3
    import torch

    cmp = COMPARISONS[work]
    typer.echo(
        f"{cmp.algo} {cmp.env_id}, {cmp.settings}, frames {frames}, seed {seed}, "
        f"1 torch thread per run, load average {os.getloadavg()[0]:.1f}"
    )
    results: dict[str, dict[str, Any]] = {}
    for lib in LIBS:
        typer.echo(f"[{lib}] training ...")
        r = results[lib] = run_child(work, lib, frames, seed)
        typer.echo(format_line(cmp, lib, r))
    ratio = results["slm_lab"]["fps"] / results["sb3"]["fps"]
    typer.echo(f"fps ratio slm_lab / sb3: {ratio:.3f}")

    report: dict[str, Any] = {"algorithm": cmp.algo, "env": cmp.env_id, "frames": frames}
    report |= {"seed": seed, "torch_threads": 1}
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
        "load_average_end": os.getloadavg(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = out_path(work)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    typer.echo(f"wrote {path.relative_to(ROOT)}")


app = typer.Typer(
    help="SLM Lab against Stable-Baselines3 on the same settings, one record per work.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


WorkName = StrEnum("WorkName", {name: name for name in COMPARISONS})
Work = Annotated[WorkName, typer.Argument(help="a record of COMPARISONS")]
Seed = Annotated[int, typer.Option(help="random seed for both libraries")]


@app.command()
def compare(
    work: Work,
    frames: Annotated[
        int | None, typer.Option(min=1, help="training frames per library (default: the work's)")
    ] = None,
    seed: Seed = 0,
) -> None:
    """Train WORK in SLM Lab and in SB3, each in a fresh one-thread process; compare fps."""
    run_comparison(work, frames or COMPARISONS[work].default_frames, seed)


@app.command()
def sb3(
    work: Work,
    frames: Annotated[int, typer.Option(min=1, help="training frames (env steps over all envs)")],
    seed: Seed = 0,
) -> None:
    """SB3 alone as a user's script runs it: build the model, learn, print the mean return."""
    model, env = COMPARISONS[work].sb3_model(seed)
    model.learn(total_timesteps=frames)
    result = sb3_result(model, env, float("nan"))
    env.close()
    typer.echo(f"frames: {result['frames']}")
    typer.echo(f"episodes: {result['episodes']}")
    typer.echo(f"mean_return: {result['mean_return']}")


@app.command(name="list")
def list_works() -> None:
    """The works, their default frames and settings."""
    for name, cmp in COMPARISONS.items():
        typer.echo(
            f"{name:<14} {cmp.algo} {cmp.env_id}, {cmp.default_frames} frames, {cmp.settings}"
        )


@app.command(hidden=True)
def child(
    lib: str,
    work: Work,
    frames: Annotated[int, typer.Option()],
    result_path: Annotated[Path, typer.Option()],
    seed: Seed = 0,
) -> None:
    """One library's training run in this process; its result JSON at --result-path."""
    runners = COMPARISONS[work].runners()
    if lib not in runners:
        raise typer.BadParameter(f"lib: one of {', '.join(LIBS)}, got {lib!r}")
    result_path.write_text(json.dumps(runners[lib](frames, seed)))


if __name__ == "__main__":
    app()
