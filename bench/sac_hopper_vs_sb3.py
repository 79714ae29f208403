"""SAC on Hopper-v5 at RL Zoo-like MuJoCo settings: SLM Lab vs Stable-Baselines3, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other; the script
prints frames, training wall seconds, fps (frames / training wall time), the mean return of the
last 100 finished training episodes and the gradient steps taken, then the fps ratio
slm_lab / sb3. Results also go to bench/out/sac_hopper_vs_sb3.json. This measures the speed of a
MuJoCo-sized SAC (256x256 nets, batch 256, one gradient step per env step), not learning: a
short run is nowhere near Hopper's returns.

usage: uv run --group bench python bench/sac_hopper_vs_sb3.py [--frames 20000] [--seed 0]

RL Zoo (hyperparams/sac.yml, Hopper-v4): n_timesteps 1e6, MlpPolicy, learning_starts 1e4;
everything else SB3's SAC defaults: n_envs 1, learning_rate 3e-4, buffer_size 1e6, batch_size
256, tau 0.005, gamma 0.99, train_freq 1, gradient_steps 1, ent_coef auto, target_entropy
-dim(A), net_arch [256, 256] ReLU. Here learning_starts is LEARNING_STARTS (1e3, for both
libraries) so that a short run is mostly gradient steps.

The SLM Lab spec (`slm_lab_spec`) is slm_lab/spec/benchmark/sac/sac_mujoco.json's sac_hopper
with this schedule: one env, training_start_step LEARNING_STARTS, training_frequency 1,
training_iter 1, policy_delay 1, target_entropy auto, torch's default init, Adam lr 3e-4 for the
actor, the critics and alpha, polyak 0.005. The known learning differences are those of
sac_pendulum_vs_sb3.py's MISMATCHES (temperature loss, critic loss scale, tanh correction,
fused vs foreach Adam, replay storage, random streams).
"""

from pathlib import Path
from typing import Any

from compare_sb3 import (
    SB3_SAC_DEFAULTS,
    Comparison,
    cli,
    learn_counting_grad_steps,
    pin_torch_threads,
    sac_spec,
    sb3_sac,
    session_grad_steps,
)

ENV_ID = "Hopper-v5"
LEARNING_STARTS = 1_000  # RL Zoo's is 1e4; lowered for both so a short run is mostly training

# RL Zoo-like hyperparameters for SAC on Hopper (SB3 defaults but learning_starts)
ZOO = SB3_SAC_DEFAULTS | {"learning_starts": LEARNING_STARTS}

MISMATCHES = [
    "training start: SB3 steps once num_timesteps > learning_starts, SLM Lab from "
    "training_start_step on: one gradient step apart",
    "the learning differences of bench/sac_pendulum_vs_sb3.py (temperature loss, critic loss "
    "scale 2, exact tanh correction, fused vs foreach Adam, replay storage, random streams)",
]


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
    return sac_spec("sac_hopper_zoo", ENV_ID, ZOO, frames, seed)


def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    pin_torch_threads()
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(ENV_ID, n_envs=ZOO["n_envs"], seed=seed)  # DummyVecEnv of Monitor envs
    return learn_counting_grad_steps(sb3_sac(env, ZOO, seed), env, frames)


COMPARISON = Comparison(
    algo="SAC",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=ZOO,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    slm_lab_extra=session_grad_steps,
    mismatches=MISMATCHES,
    solved=None,
    extra_fields={"grad_steps": "d"},
    report_extra={"algorithm": "SAC"},
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=20_000,
        doc="Train SAC on Hopper-v5 (RL Zoo-like settings) in SLM Lab and in SB3; compare fps.",
    )
