"""CrossQ on Hopper-v5: SLM Lab vs sb3-contrib's CrossQ, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other; the script
prints frames, training wall seconds, fps (frames / training wall time), the mean return of the
last 100 finished training episodes and the gradient steps taken, then the fps ratio
slm_lab / sb3. Results also go to bench/out/crossq_hopper_vs_sb3.json. This measures the speed
of a MuJoCo-sized CrossQ (batch renorm in both nets, one critic step per env step), not
learning: a short run is nowhere near Hopper's returns.

usage: uv run --group bench python bench/crossq_hopper_vs_sb3.py [--frames 4000] [--seed 0]

The settings are SLM Lab's crossq_hopper (slm_lab/spec/benchmark/crossq/crossq_mujoco.json)
where sb3-contrib can follow them, and sb3-contrib's CrossQ defaults where SLM Lab can follow
them: one env, Adam lr 1e-3 with betas (0.5, 0.999) for the actor, the critics and alpha, batch
256, gamma 0.99, one critic step per env step, the actor and alpha every POLICY_DELAY critic
steps, target entropy -dim(A), a [256, 256] actor and a [512, 512] critic (crossq_hopper's;
sb3-contrib's default is [1024, 1024]), both with batch renorm (sb3-contrib puts it in the
actor too, so the SLM Lab side does here, where crossq_hopper's actor has none), renorm warm-up
RENORM_WARMUP steps. learning_starts is LEARNING_STARTS for both, so that a short run is mostly
gradient steps.
"""

from pathlib import Path
from typing import Any

from compare_sb3 import (
    Comparison,
    cli,
    env_and_meta,
    learn_counting_grad_steps,
    pin_torch_threads,
    session_grad_steps,
)

ENV_ID = "Hopper-v5"
LEARNING_STARTS = (
    1_000  # crossq_hopper's is 1e4; lowered for both so a short run is mostly training
)
POLICY_DELAY = 3  # both libraries' default and crossq_hopper's
RENORM_WARMUP = 100_000  # sb3-contrib's default and crossq_hopper's

SETTINGS = {
    "n_envs": 1,
    "learning_rate": 1e-3,
    "betas": (0.5, 0.999),
    "buffer_size": 1_000_000,
    "learning_starts": LEARNING_STARTS,
    "batch_size": 256,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    "policy_delay": POLICY_DELAY,
    "ent_coef": "auto",
    "target_entropy": "auto",
    "net_arch": {"pi": [256, 256], "qf": [512, 512]},
    "renorm_warmup_steps": RENORM_WARMUP,
}

MISMATCHES = [
    "batch renorm: SLM Lab's BatchRenorm1d has eps 1e-5, sb3-contrib's 1e-3 (both momentum "
    "0.01); the same work",
    "temperature: SLM Lab's crossq_hopper caps log alpha at 0.5 (log_alpha_max), sb3-contrib "
    "has no cap; the same work",
    "init: SLM Lab's orthogonal init (crossq_hopper's), sb3-contrib torch's default; the same work",
    "training start: sb3-contrib steps once num_timesteps > learning_starts, SLM Lab from "
    "training_start_step on: one gradient step apart",
    "the learning differences of bench/sac_pendulum_vs_sb3.py that CrossQ shares with SAC "
    "(temperature loss, exact tanh correction, fused vs foreach Adam, replay storage, random "
    "streams)",
]


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
    optim = {"name": "Adam", "lr": SETTINGS["learning_rate"], "betas": list(SETTINGS["betas"])}
    net = {
        "type": "MLPNet",
        "hid_layers_activation": "relu",
        "batch_renorm": True,
        "batch_renorm_warmup_steps": RENORM_WARMUP,
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
                "gamma": SETTINGS["gamma"],
                "training_start_step": LEARNING_STARTS,
                "training_frequency": SETTINGS["train_freq"],
                "training_iter": SETTINGS["gradient_steps"],
                "policy_delay": POLICY_DELAY,
                "log_alpha_max": 0.5,
            },
            "memory": {
                "name": "Replay",
                "max_size": SETTINGS["buffer_size"],
                "batch_size": SETTINGS["batch_size"],
                "use_cer": False,
            },
            "net": {**net, "hid_layers": SETTINGS["net_arch"]["pi"]},
            "critic_net": {
                **net,
                "hid_layers": SETTINGS["net_arch"]["qf"],
                "loss_spec": {"name": "MSELoss"},
            },
        },
        **env_and_meta(ENV_ID, SETTINGS["n_envs"], frames, seed),
    }


def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    pin_torch_threads()
    import torch
    from sb3_contrib import CrossQ
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(ENV_ID, n_envs=SETTINGS["n_envs"], seed=seed)  # DummyVecEnv of Monitor envs
    model = CrossQ(
        "MlpPolicy",
        env,
        learning_rate=SETTINGS["learning_rate"],
        buffer_size=SETTINGS["buffer_size"],
        learning_starts=LEARNING_STARTS,
        batch_size=SETTINGS["batch_size"],
        gamma=SETTINGS["gamma"],
        train_freq=SETTINGS["train_freq"],
        gradient_steps=SETTINGS["gradient_steps"],
        policy_delay=POLICY_DELAY,
        ent_coef=SETTINGS["ent_coef"],
        target_entropy=SETTINGS["target_entropy"],
        policy_kwargs={
            "net_arch": SETTINGS["net_arch"],
            "renorm_warmup_steps": RENORM_WARMUP,
            "optimizer_class": torch.optim.Adam,
            "optimizer_kwargs": {"betas": SETTINGS["betas"]},
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return learn_counting_grad_steps(model, env, frames)


COMPARISON = Comparison(
    algo="CrossQ",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=SETTINGS,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    slm_lab_extra=session_grad_steps,
    mismatches=MISMATCHES,
    solved=None,
    extra_fields={"grad_steps": "d"},
    report_extra={"algorithm": "CrossQ"},
    settings="crossq_hopper's settings (see the docstring)",
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=4_000,
        doc="Train CrossQ on Hopper-v5 (crossq_hopper's settings) in SLM Lab and in sb3-contrib; compare fps.",
    )
