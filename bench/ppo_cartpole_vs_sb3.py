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

from pathlib import Path
from typing import Any

from compare_sb3 import Comparison, cli, env_and_meta, learn_and_close, pin_torch_threads

ENV_ID = "CartPole-v1"
SOLVED = 475.0

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
        **env_and_meta(ENV_ID, ZOO["n_envs"], frames, seed),
    }


# -- the SB3 child (the SLM Lab child is compare_sb3.run_session of slm_lab_spec) ---------------
def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    pin_torch_threads()
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

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
    return learn_and_close(model, env, frames)


COMPARISON = Comparison(
    algo="PPO",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=ZOO,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    mismatches=MISMATCHES,
    solved=SOLVED,
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=100_000,
        doc="Train PPO on CartPole-v1 (RL Zoo hyperparameters) in SLM Lab and in SB3; compare fps and return.",
    )
