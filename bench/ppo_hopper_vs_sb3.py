"""PPO on Hopper-v5 at the `ppo_mujoco` settings: SLM Lab vs Stable-Baselines3, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other; the script
prints frames, training wall seconds, fps (frames / training wall time) and the mean return of
the last 100 finished training episodes, then the fps ratio slm_lab / sb3. Results also go to
bench/out/ppo_hopper_vs_sb3.json. This measures speed, not learning: a short run is nowhere near
Hopper's returns.

usage: uv run --group bench python bench/ppo_hopper_vs_sb3.py [--frames 98304] [--seed 0]

The SLM Lab side is slm_lab/spec/benchmark/ppo/ppo_mujoco.json's ppo_mujoco as shipped (env
Hopper-v5, one session): 16 envs stepped in one process, time_horizon 2048, 10 epochs of
minibatches of 64, [256, 256] tanh actor and critic with one AdamW (lr 3e-4), clip 0.2,
gamma 0.99, lam 0.95, observations and rewards normalized and clipped at 10. The SB3 side is the
same settings as SB3 writes them: a DummyVecEnv of 16 Monitor-wrapped envs under
VecNormalize(clip 10), PPO("MlpPolicy", n_steps 2048, batch_size 64, n_epochs 10,
net_arch pi/vf [256, 256], Tanh). The default frames are three rollouts of 32768 frames.
"""

import json
from pathlib import Path
from typing import Any

from compare_sb3 import ROOT, Comparison, cli, learn_and_close, pin_torch_threads

ENV_ID = "Hopper-v5"
SPEC_FILE = ROOT / "slm_lab" / "spec" / "benchmark" / "ppo" / "ppo_mujoco.json"
SPEC_NAME = "ppo_mujoco"

# ppo_mujoco's settings under SB3's names
SETTINGS = {
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

MISMATCHES = [
    "optimizer: the spec's AdamW (weight decay 0.01) vs SB3's Adam (eps 1e-5)",
    "value targets: the spec normalizes them (normalize_v_targets), SB3 does not",
    "gradient clipping: SLM Lab clips the actor's and the critic's gradient norms to 0.5 each; "
    "SB3 clips the norm of all parameters together",
    "hidden-layer init gain: SLM Lab uses torch's recommended gain for tanh (5/3), SB3 sqrt(2)",
    "frame count: SB3 trains on whole rollouts until num_timesteps >= frames; SLM Lab stops at "
    "frames (the default frames are whole rollouts for both)",
]


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
    text = SPEC_FILE.read_text().replace("${env}", ENV_ID)
    text = text.replace('"${max_frame}"', str(frames))
    spec = json.loads(text)[SPEC_NAME]
    spec["name"] = SPEC_NAME
    spec["agent"]["net"]["gpu"] = False
    spec["env"]["vectorization_mode"] = "sync"  # one process, as SB3's DummyVecEnv
    spec["meta"] |= {"max_session": 1, "max_trial": 1, "random_seed": seed}
    return spec


def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    torch = pin_torch_threads()
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(
        make_vec_env(ENV_ID, n_envs=SETTINGS["n_envs"], seed=seed),  # DummyVecEnv of Monitor envs
        gamma=SETTINGS["gamma"],
        clip_obs=SETTINGS["clip_obs"],
        clip_reward=SETTINGS["clip_reward"],
    )
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=SETTINGS["n_steps"],
        batch_size=SETTINGS["batch_size"],
        n_epochs=SETTINGS["n_epochs"],
        gamma=SETTINGS["gamma"],
        gae_lambda=SETTINGS["gae_lambda"],
        learning_rate=SETTINGS["learning_rate"],
        clip_range=SETTINGS["clip_range"],
        ent_coef=SETTINGS["ent_coef"],
        vf_coef=SETTINGS["vf_coef"],
        max_grad_norm=SETTINGS["max_grad_norm"],
        policy_kwargs={
            "net_arch": {"pi": SETTINGS["net_arch"], "vf": SETTINGS["net_arch"]},
            "activation_fn": torch.nn.Tanh,
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return learn_and_close(model, env, frames)  # it reads the Monitor envs through VecNormalize


COMPARISON = Comparison(
    algo="PPO",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=SETTINGS,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    mismatches=MISMATCHES,
    solved=None,
    report_extra={"spec": f"{SPEC_FILE.relative_to(ROOT)}:{SPEC_NAME}"},
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=3 * 16 * 2048,
        doc="Train PPO on Hopper-v5 (ppo_mujoco settings) in SLM Lab and in SB3; compare fps.",
    )
