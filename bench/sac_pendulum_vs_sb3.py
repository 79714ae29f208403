"""SAC on Pendulum-v1 with RL Zoo's hyperparameters: SLM Lab vs Stable-Baselines3, side by side.

Each library trains in its own fresh Python process pinned to one torch thread
(torch.set_num_threads(1), OMP_NUM_THREADS=MKL_NUM_THREADS=1), one after the other. For each
the script prints frames, training wall seconds, fps (frames / training wall time), the mean
return of the last 100 finished training episodes (Pendulum has no solved threshold) and the
gradient steps taken; then memory figures of the child process: RSS (VmRSS, MiB) just before and
just after the agent, env and replay memory were built, peak RSS of the training run (getrusage
ru_maxrss), RSS after the run, RSS once every page of the replay memory's numpy arrays has been
made resident (what a full 1e6 buffer holds; the values are left unchanged), and the bytes of
those arrays. np.zeros pages become resident only when written: building the buffer costs no
RSS for them, a 2e4-frame run touches 2% of them, and filling it costs at most their bytes.
Then the fps ratio slm_lab / sb3. Results also go to bench/out/sac_pendulum_vs_sb3.json.

usage: uv run --group bench python bench/sac_pendulum_vs_sb3.py [--frames 20000] [--seed 0]

RL Zoo (hyperparams/sac.yml, Pendulum-v1): n_timesteps 2e4, MlpPolicy, learning_rate 1e-3;
everything else SB3's SAC defaults: n_envs 1, buffer_size 1e6, learning_starts 100 (uniformly
random actions until then), batch_size 256, tau 0.005 (polyak every gradient step), gamma 0.99,
train_freq 1, gradient_steps 1 (one gradient step per env step), ent_coef auto (initial 1,
learned with Adam at the same lr), target_entropy -dim(A) = -1, net_arch [256, 256] ReLU for the
actor and each of the 2 critics, torch's default layer init, tanh-squashed Gaussian with
state-dependent log-std clamped to [-20, 2], Adam (eps 1e-8), no gradient clipping, truncated
episodes bootstrap.

The SLM Lab spec (`slm_lab_spec`) is slm_lab/spec/benchmark/sac/sac_pendulum.json with the Zoo's
schedule and one env: SoftActorCritic, training_start_step 100 (random actions until then),
training_frequency 1, training_iter 1, training_batch_iter 1, policy_delay 1, target_entropy
auto, alpha_lr 1e-3, Replay max_size 1e6 batch_size 256, MLPNet [256, 256] relu with torch's
default init, MSELoss, actor and critic Adam lr 1e-3, polyak 0.005, num_envs 1.

Known differences SLM Lab's spec cannot remove (see MISMATCHES below).
"""

from pathlib import Path
from typing import Any

from compare_sb3 import (
    SB3_SAC_DEFAULTS,
    Comparison,
    array_nbytes,
    cli,
    current_rss_mb,
    peak_rss_mb,
    pin_torch_threads,
    run_session,
    sac_spec,
    sb3_result,
    sb3_sac,
    timed_learn,
    touch_arrays,
)

ENV_ID = "Pendulum-v1"
MIB = 1024**2

# RL Zoo's hyperparameters for SAC on Pendulum-v1 (SB3 defaults but learning_rate)
ZOO = SB3_SAC_DEFAULTS | {"learning_rate": 1e-3}

MISMATCHES = [
    "training start: SB3 takes its first gradient step once num_timesteps > learning_starts "
    "(after 101 transitions, sampling 256 with replacement from them); SLM Lab's Replay is ready "
    "only once it holds batch_size transitions, so it starts at frame 256: 155 fewer gradient "
    "steps (19745 vs 19900 at 2e4 frames). Random warm-up actions match (the first 100)",
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


def slm_lab_spec(frames: int, seed: int) -> dict[str, Any]:
    return sac_spec("sac_pendulum_zoo", ENV_ID, ZOO, frames, seed)


# -- children: one library's training run, in its own process ---------------------------------
def memory_stats(memory: Any, capacity: int) -> dict[str, Any]:
    """After the run: peak RSS; the replay memory's array bytes; RSS now, and again once every
    page of those arrays is resident (as with a full buffer)."""
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


def run_slm_lab(frames: int, seed: int) -> dict[str, Any]:
    def extra(session: Any) -> dict[str, Any]:
        memory = session.agent.algorithm.memory
        return {
            "grad_steps": int(session.clock.opt_step),
            **memory_stats(memory, memory.capacity),
        }

    return run_session(
        slm_lab_spec(frames, seed),
        extra=extra,
        before=lambda: {"rss_before_mb": current_rss_mb()},
        built=lambda session: {"rss_built_mb": current_rss_mb()},
    )


def run_sb3(frames: int, seed: int) -> dict[str, Any]:
    pin_torch_threads()
    from stable_baselines3.common.env_util import make_vec_env

    rss_before = current_rss_mb()
    env = make_vec_env(ENV_ID, n_envs=ZOO["n_envs"], seed=seed)  # DummyVecEnv of Monitor envs
    model = sb3_sac(env, ZOO, seed)
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


COMPARISON = Comparison(
    algo="SAC",
    env_id=ENV_ID,
    script=Path(__file__),
    hyperparameters=ZOO,
    slm_lab_spec=slm_lab_spec,
    run_sb3=run_sb3,
    run_slm_lab=run_slm_lab,
    mismatches=MISMATCHES,
    solved=None,
    extra_fields={
        "grad_steps": "d",
        "rss_before_mb": ".0f",
        "rss_built_mb": ".0f",
        "peak_rss_mb": ".0f",
        "rss_after_mb": ".0f",
        "rss_full_buffer_mb": ".0f",
        "memory_array_mb": ".1f",
    },
    report_extra={"algorithm": "SAC"},
)

if __name__ == "__main__":
    cli(
        COMPARISON,
        default_frames=20_000,
        doc="Train SAC on Pendulum-v1 (RL Zoo hyperparameters) in SLM Lab and in SB3; compare fps, return and memory.",
    )
