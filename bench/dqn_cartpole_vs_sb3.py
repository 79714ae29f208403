"""DQN on CartPole-v1 with RL Zoo's hyperparameters: SLM Lab vs Stable-Baselines3, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other. For each
the script prints frames, training wall seconds, fps (frames / training wall time) and the mean
return of the last 100 finished training episodes (solved: >= 475), then the fps ratio
slm_lab / sb3. Results also go to bench/out/dqn_cartpole_vs_sb3.json.

usage: uv run --group bench python bench/dqn_cartpole_vs_sb3.py [--frames 50000] [--seed 0]

RL Zoo (hyperparams/dqn.yml, CartPole-v1): n_timesteps 5e4, MlpPolicy, learning_rate 2.3e-3,
batch_size 64, buffer_size 100000, learning_starts 1000, gamma 0.99, target_update_interval 10,
train_freq 256, gradient_steps 128, exploration_fraction 0.16, exploration_final_eps 0.04,
policy_kwargs net_arch [256, 256]; everything else SB3's DQN defaults: n_envs 1, ReLU, torch's
default layer init, Huber loss (smooth L1), grad-norm clip 10, Adam (eps 1e-8), tau 1 (the
target net is copied), exploration_initial_eps 1, truncated episodes bootstrap.

The SLM Lab spec (`slm_lab_spec`) mirrors these: DQN, Replay (max_size 100000, batch 64),
training_frequency 256, training_iter 128, training_batch_iter 1, epsilon-greedy with
explore_var linear_decay 1.0 -> 0.04 over frames 0 .. 0.16 * frames, target net replaced every
10 frames, MLPNet [256, 256] relu with torch's default init, SmoothL1Loss, clip_grad_val 10,
Adam lr 2.3e-3, num_envs 1. One translation: SB3 trains only after whole 256-step rollouts, once
num_timesteps > learning_starts, i.e. at frames 1024, 1280, ...; training_start_step is set to
that first frame (1024, not 1000) so that SLM Lab trains at the same frames on the same number
of stored transitions.

Known differences SLM Lab's spec cannot remove (see MISMATCHES below).
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

ENV_ID = "CartPole-v1"
SOLVED = 475.0

# RL Zoo's hyperparameters for DQN on CartPole-v1
ZOO = {
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

# the first frame SB3 trains at: the end of the first train_freq rollout past learning_starts
FIRST_TRAIN_FRAME = (ZOO["learning_starts"] // ZOO["train_freq"] + 1) * ZOO["train_freq"]

MISMATCHES = [
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


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
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
                    "start_val": ZOO["exploration_initial_eps"],
                    "end_val": ZOO["exploration_final_eps"],
                    "start_step": 0,
                    "end_step": ZOO["exploration_fraction"] * frames,
                },
                "gamma": ZOO["gamma"],
                "training_start_step": FIRST_TRAIN_FRAME,
                "training_frequency": ZOO["train_freq"],
                "training_iter": ZOO["gradient_steps"],
                "training_batch_iter": 1,
            },
            "memory": {
                "name": "Replay",
                "max_size": ZOO["buffer_size"],
                "batch_size": ZOO["batch_size"],
                "use_cer": False,
            },
            "net": {
                "type": "MLPNet",
                "hid_layers": ZOO["net_arch"],
                "hid_layers_activation": "relu",
                "init_fn": None,
                "clip_grad_val": ZOO["max_grad_norm"],
                "loss_spec": {"name": "SmoothL1Loss"},
                "optim_spec": {"name": "Adam", "lr": ZOO["learning_rate"]},
                "lr_scheduler_spec": None,
                "update_type": "replace",
                "update_frequency": ZOO["target_update_interval"],
                "gpu": False,
            },
        },
        **env_and_meta(ENV_ID, ZOO["n_envs"], frames, seed),
    }


# -- the SB3 child (the SLM Lab child is compare_sb3.run_session of slm_lab_spec) ---------------
def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    pin_torch_threads()
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(ENV_ID, n_envs=ZOO["n_envs"], seed=seed)  # DummyVecEnv of Monitor envs
    model = DQN(
        "MlpPolicy",
        env,
        learning_rate=ZOO["learning_rate"],
        batch_size=ZOO["batch_size"],
        buffer_size=ZOO["buffer_size"],
        learning_starts=ZOO["learning_starts"],
        gamma=ZOO["gamma"],
        target_update_interval=ZOO["target_update_interval"],
        train_freq=ZOO["train_freq"],
        gradient_steps=ZOO["gradient_steps"],
        exploration_fraction=ZOO["exploration_fraction"],
        exploration_initial_eps=ZOO["exploration_initial_eps"],
        exploration_final_eps=ZOO["exploration_final_eps"],
        tau=ZOO["tau"],
        max_grad_norm=ZOO["max_grad_norm"],
        policy_kwargs={"net_arch": ZOO["net_arch"]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return learn_counting_grad_steps(model, env, frames)


COMPARISON = Comparison(
    algo="DQN",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=ZOO,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    slm_lab_extra=session_grad_steps,
    mismatches=MISMATCHES,
    solved=SOLVED,
    extra_fields={"grad_steps": "d"},
    report_extra={"algorithm": "DQN"},
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=50_000,
        doc="Train DQN on CartPole-v1 (RL Zoo hyperparameters) in SLM Lab and in SB3; compare fps and return.",
    )
