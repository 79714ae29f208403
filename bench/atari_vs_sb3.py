"""Atari training speed, whole processes: SLM Lab's ppo_atari / dqn_atari vs Stable-Baselines3.

Both libraries train on ALE/Pong-v5 with 16 envs, A/B alternating in pairs (which library goes
first alternates from pair to pair; pair i uses seed + i), every run a fresh process with one
torch thread (OMP_NUM_THREADS=MKL_NUM_THREADS=1; SLM Lab sets torch's threads from
meta.num_threads, 1; the SB3 child calls torch.set_num_threads(1)), on this interpreter's torch.

- SLM Lab runs through its real CLI, `slm-lab run <spec file> <name> train --log-level WARNING`,
  in a temporary working directory, on a one-session copy of the benchmark spec
  (slm_lab/spec/benchmark/ppo/ppo_atari.json `ppo_atari`, .../dqn/dqn_atari.json `dqn_atari`)
  with env.name ALE/Pong-v5, env.max_frame --frames, meta.max_session 1 and meta.random_seed;
  for DQN also training_start_step --learning-starts and explore_var_spec starting at frame 0
  (1.0 -> 0.01 over the first tenth of the frames, as SB3's exploration_fraction 0.1).
- SB3 runs this script's hidden `sb3` command: `make_atari_env("ALE/Pong-v5", n_envs=16,
  env_kwargs={"frameskip": 1})` (DummyVecEnv of Monitor + AtariWrapper envs: 30 no-ops, frame
  skip 4 with max-pooling, life loss terminal, FIRE reset, 84x84 grey, rewards clipped to their
  sign; ALE keeps v5's sticky actions 0.25 per frame, as SLM Lab's) + `VecFrameStack(4)`, and
  `PPO("CnnPolicy", ...)` or `DQN("CnnPolicy", ...)` with the SLM Lab spec's hyperparameters
  (see PPO_SB3 / DQN_SB3 and the mismatches below).

Per run: whole-process wall seconds (launch to exit: interpreter, imports, env and net
construction, training, SLM Lab's final checkpoint, analysis and exit), fps = frames / wall
(the goal: SLM Lab >= 1.5x SB3); build+train fps, frames over the seconds from the env's
construction to the end of training (SLM Lab: the session clock's wall_t at its last metrics
row; the clock starts just before the session builds its env and agent; SB3: from
`make_atari_env` to the end of `model.learn`), which leaves out the interpreter, the imports and
what follows training; frames per CPU second (user + system of the process and the children it
waited for, ALE's threads included: less sensitive to what else runs on the machine); peak RSS;
gradient steps; the 1-minute load average at launch. Per algorithm: the medians of each library
and the medians of the per-pair ratios slm_lab / sb3 of the three rates. Raw numbers go to
bench/out/atari_vs_sb3_<algo>.json.

The frame budgets are short (the whole comparison takes minutes on 2 cores), so start-up is a
large share of the whole-process wall (about 15-30 s of it on a loaded 2-core machine: `import
torch`, and torch's first optimizer importing torch._dynamo, in both libraries); longer runs
weigh it less. A run this short measures speed only; returns in Pong stay at -21 after a few thousand frames.

usage: uv run --group bench python bench/atari_vs_sb3.py ppo [--pairs 2] [--frames 4096]
       [--precision float32|bf16-mixed]
       uv run --group bench python bench/atari_vs_sb3.py dqn [--pairs 2] [--frames 2048]
       [--learning-starts 512]
"""

import copy
import csv
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from vs_sb3 import OUT_DIR, ROOT, pick, pin_torch_threads, timed_learn
from whole_process import PYTHON, line_after, run_process, slm_lab_run_cmd, write_report
from whole_process import write_spec_file as write_named_spec

ENV_ID = "ALE/Pong-v5"
NUM_ENVS = 16
SPEC_DIR = ROOT / "slm_lab" / "spec" / "benchmark"
LIBS = ("slm_lab", "sb3")
PRECISIONS = ("float32", "bf16-mixed")  # agent.net.precision's values
EXPLORE_END_FRAC = 0.1  # DQN: epsilon reaches its end value at this fraction of the frames

# SB3's counterparts of the ppo_atari spec (16 envs x 128 steps, minibatch 256, 4 epochs, ...)
PPO_SB3 = {
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
# SB3's counterparts of the dqn_atari spec. SLM Lab trains training_iter (4) batches whenever
# training_frequency (4) frames have passed, i.e. at every vector step of 16 frames: one
# gradient step per 4 frames. SB3's train_freq counts vector steps, so train_freq 1 with
# gradient_steps 4 is the same schedule (train_freq 4, gradient_steps 1 would be 1 per 64).
DQN_SB3 = {
    "buffer_size": 200_000,
    "batch_size": 32,
    "learning_rate": 1e-4,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 4,
    "target_update_interval": 1000,  # SB3: every 1000 // 16 = 62 vector steps (992 frames)
    "exploration_initial_eps": 1.0,
    "exploration_final_eps": 0.01,
    "exploration_fraction": EXPLORE_END_FRAC,
    "max_grad_norm": 10.0,
    "features_dim": 256,  # the spec's fc_hid_layers [256]
    "loss": "smooth_l1 (Huber)",
    "optimizer": "AdamW (torch's defaults but lr)",
}

COMMON_MISMATCHES = [
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
PPO_MISMATCHES = [
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
DQN_MISMATCHES = [
    "acting: SLM Lab runs the Q-net on every step and draws epsilon per env; SB3 acts at random "
    "(no forward pass) for its first learning_starts steps and, after them, with probability "
    "epsilon for the whole vector at once, and runs the net otherwise",
    "warm-up: SB3 acts uniformly at random before learning_starts; SLM Lab acts epsilon-greedily "
    "from frame 0 (epsilon falls from 1.0 over the first tenth of the run in both)",
    "learning start: SB3 trains once num_timesteps > learning_starts; it is given "
    "--learning-starts - 16 so that both first train at the vector step reaching "
    "--learning-starts frames, and both train 4 batches at every vector step after it",
    "replay: both buffers hold 2e5 transitions of uint8 frames, allocated lazily (a short run "
    "touches only what it writes); SLM Lab stores each frame stack once and final observations "
    "apart, SB3 (optimize_memory_usage False, its default) stores observations and next "
    "observations",
    "target net: SLM Lab copies it once 1000 frames have passed since the last copy, after a "
    "gradient step; SB3 every 62 vector steps (992 frames)",
]


@dataclass(frozen=True)
class Work:
    title: str
    spec_file: Path
    spec_name: str
    frames: int  # the default --frames
    hyperparameters: dict[str, Any]
    mismatches: list[str]
    run_sb3: Callable[[int, int, int], dict[str, Any]]  # (frames, seed, learning_starts)


# -- the SLM Lab side --------------------------------------------------------------------------
def slm_lab_spec(
    work: Work, frames: int, seed: int, learning_starts: int, precision: str | None
) -> dict[str, Any]:
    """The benchmark spec as one session on ALE/Pong-v5 for `frames`, with its name; its
    net's `precision` set when given."""
    spec = copy.deepcopy(json.loads(work.spec_file.read_text())[work.spec_name])
    spec["env"] |= {"name": ENV_ID, "max_frame": frames}
    spec["meta"] |= {"max_session": 1, "random_seed": seed}
    if precision is not None:
        spec["agent"]["net"]["precision"] = precision
    algorithm = spec["agent"]["algorithm"]
    if algorithm["name"] == "DQN":
        algorithm["training_start_step"] = learning_starts
        algorithm["explore_var_spec"] |= {"start_step": 0, "end_frac": EXPLORE_END_FRAC}
    return {"name": work.spec_name, **spec}


def run_slm_lab(
    work: Work, frames: int, seed: int, learning_starts: int, precision: str | None
) -> dict[str, Any]:
    spec = slm_lab_spec(work, frames, seed, learning_starts, precision)
    with tempfile.TemporaryDirectory(prefix="atari_vs_sb3_slm_lab_") as tmp:
        folder = Path(tmp)
        spec_path, name = write_named_spec(spec, folder)
        load = os.getloadavg()[0]
        proc = run_process(slm_lab_run_cmd(spec_path, name, "train"), cwd=folder)
        run_dir = folder / line_after(proc.stdout, "run folder:")
        (session_csv,) = (run_dir / "info").glob("*_session_df.csv")
        with session_csv.open() as f:
            last = list(csv.DictReader(f))[-1]
    return {
        "frames": int(float(last["frame"])),
        "wall_s": proc.wall_s,
        "session_wall_s": float(last["wall_t"]),
        "cpu_s": proc.cpu_s,
        "peak_rss_mb": proc.peak_rss_mb,
        "grad_steps": int(float(last["opt_step"])),
        "load_1min": load,
    }


# -- the SB3 side (the `sb3` command, in its own process) --------------------------------------
def sb3_env(seed: int) -> Any:
    """16 ALE/Pong-v5 games under SB3's AtariWrapper, 4 frames stacked, as SB3 users build it."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = make_atari_env(ENV_ID, n_envs=NUM_ENVS, seed=seed, env_kwargs={"frameskip": 1})
    return VecFrameStack(env, n_stack=4)


def train_cnn_policy(
    algo_class: Any, frames: int, seed: int, **kwargs: Any
) -> tuple[Any, dict[str, Any]]:
    """Train `algo_class("CnnPolicy", sb3_env(seed), **kwargs)` on the CPU for `frames`: the
    model, and frames, session_wall_s (from building the env to the end of training) and
    learn_wall_s."""
    start = time.perf_counter()
    env = sb3_env(seed)
    model = algo_class("CnnPolicy", env, **kwargs, seed=seed, device="cpu", verbose=0)
    learn_wall = timed_learn(model, frames)
    session_wall = time.perf_counter() - start
    env.close()
    return model, {
        "frames": int(model.num_timesteps),
        "session_wall_s": session_wall,
        "learn_wall_s": learn_wall,
    }


def run_sb3_ppo(frames: int, seed: int, learning_starts: int) -> dict[str, Any]:
    torch = pin_torch_threads()
    from stable_baselines3 import PPO

    h = PPO_SB3
    model, result = train_cnn_policy(
        PPO,
        frames,
        seed,
        **pick(h, "n_steps", "batch_size", "n_epochs", "clip_range", "clip_range_vf", "ent_coef"),
        **pick(h, "vf_coef", "max_grad_norm", "gamma", "gae_lambda"),
        learning_rate=lambda progress_remaining: progress_remaining * h["learning_rate"],
        policy_kwargs={"optimizer_class": torch.optim.AdamW, "optimizer_kwargs": {"eps": 1e-5}},
    )
    minibatches = h["n_steps"] * NUM_ENVS // h["batch_size"]  # _n_updates counts epochs
    return {**result, "grad_steps": int(model._n_updates) * minibatches}


def run_sb3_dqn(frames: int, seed: int, learning_starts: int) -> dict[str, Any]:
    torch = pin_torch_threads()
    from stable_baselines3 import DQN

    h = DQN_SB3
    model, result = train_cnn_policy(
        DQN,
        frames,
        seed,
        buffer_size=h["buffer_size"],
        # SB3 trains once num_timesteps > learning_starts: from the step reaching learning_starts
        learning_starts=learning_starts - NUM_ENVS,
        **pick(h, "batch_size", "learning_rate", "gamma", "train_freq", "gradient_steps"),
        **pick(h, "target_update_interval", "exploration_initial_eps", "exploration_final_eps"),
        **pick(h, "exploration_fraction", "max_grad_norm"),
        policy_kwargs={
            "optimizer_class": torch.optim.AdamW,
            "features_extractor_kwargs": {"features_dim": h["features_dim"]},
        },
    )
    return {**result, "grad_steps": int(model._n_updates)}


WORKS = {
    "ppo": Work(
        "PPO",
        SPEC_DIR / "ppo" / "ppo_atari.json",
        "ppo_atari",
        4096,  # 2 batches of 16 x 128
        PPO_SB3,
        PPO_MISMATCHES + COMMON_MISMATCHES,
        run_sb3_ppo,
    ),
    "dqn": Work(
        "DQN",
        SPEC_DIR / "dqn" / "dqn_atari.json",
        "dqn_atari",
        2048,
        DQN_SB3,
        DQN_MISMATCHES + COMMON_MISMATCHES,
        run_sb3_dqn,
    ),
}


def run_sb3(algo: str, frames: int, seed: int, learning_starts: int) -> dict[str, Any]:
    """`python bench/atari_vs_sb3.py sb3 <algo> ...` as a whole process."""
    cmd: list[str | Path] = [PYTHON, Path(__file__).resolve(), "sb3", algo, "--frames", str(frames)]
    cmd += ["--seed", str(seed), "--learning-starts", str(learning_starts)]
    with tempfile.TemporaryDirectory(prefix="atari_vs_sb3_sb3_") as tmp:
        load = os.getloadavg()[0]
        proc = run_process(cmd, cwd=Path(tmp))
    result = json.loads(line_after(proc.stdout, "result:"))
    return {
        "frames": result["frames"],
        "wall_s": proc.wall_s,
        "session_wall_s": result["session_wall_s"],
        "sb3_learn_wall_s": result["learn_wall_s"],
        "cpu_s": proc.cpu_s,
        "peak_rss_mb": proc.peak_rss_mb,
        "grad_steps": result["grad_steps"],
        "load_1min": load,
    }


# -- the parent --------------------------------------------------------------------------------
def with_rates(r: dict[str, Any]) -> dict[str, Any]:
    return r | {
        "fps": r["frames"] / r["wall_s"],
        "session_fps": r["frames"] / r["session_wall_s"],
        "cpu_fps": r["frames"] / r["cpu_s"],
    }


def run_line(label: str, lib: str, r: dict[str, Any]) -> str:
    return (
        f"{label} {lib:<7} frames {r['frames']} | wall {r['wall_s']:6.1f} s | fps {r['fps']:5.0f}"
        f" | build+train fps {r['session_fps']:5.0f} | cpu {r['cpu_s']:6.1f} s"
        f" | frames/cpu s {r['cpu_fps']:5.0f}"
        f" | peak RSS {r['peak_rss_mb']:5.0f} MiB | grad steps {r['grad_steps']}"
        f" | load {r['load_1min']:.1f}"
    )


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_lib = {lib: [r for r in runs if r["lib"] == lib] for lib in LIBS}

    def med(lib: str, key: str) -> float:
        return statistics.median(r[key] for r in by_lib[lib])

    def ratios(key: str) -> list[float]:
        return [
            slm[key] / sb3[key] for slm, sb3 in zip(by_lib["slm_lab"], by_lib["sb3"], strict=True)
        ]

    keys = ("fps", "session_fps", "cpu_fps", "wall_s", "cpu_s", "peak_rss_mb")
    return {
        "median": {lib: {k: med(lib, k) for k in keys} for lib in LIBS},
        "per_pair_fps_ratios": ratios("fps"),
        "fps_ratio_slm_lab_over_sb3": statistics.median(ratios("fps")),
        "per_pair_session_fps_ratios": ratios("session_fps"),
        "session_fps_ratio_slm_lab_over_sb3": statistics.median(ratios("session_fps")),
        "per_pair_cpu_fps_ratios": ratios("cpu_fps"),
        "cpu_fps_ratio_slm_lab_over_sb3": statistics.median(ratios("cpu_fps")),
    }


def print_summary(title: str, s: dict[str, Any]) -> None:
    typer.echo(f"== {title}: medians")
    typer.echo(
        f"{'':8}| {'fps':>6} | {'build+train fps':>15} | {'frames/cpu s':>12} | {'wall s':>7} |"
        f" {'cpu s':>7} | {'peak RSS MiB':>12}"
    )
    for lib in LIBS:
        m = s["median"][lib]
        typer.echo(
            f"{lib:<8}| {m['fps']:6.0f} | {m['session_fps']:15.0f} | {m['cpu_fps']:12.0f} |"
            f" {m['wall_s']:7.1f} | {m['cpu_s']:7.1f} | {m['peak_rss_mb']:12.0f}"
        )
    typer.echo("ratio slm_lab / sb3, median of the per-pair ratios (the pairs in brackets):")
    for label, key in (
        ("fps (whole process)", "fps"),
        ("build+train fps", "session_fps"),
        ("frames per CPU second", "cpu_fps"),
    ):
        per_pair = ", ".join(f"{x:.2f}" for x in s[f"per_pair_{key}_ratios"])
        typer.echo(f"  {label:<22} {s[f'{key}_ratio_slm_lab_over_sb3']:.2f} ({per_pair})")


def compare(
    algo: str,
    pairs: int,
    frames: int | None,
    seed: int,
    learning_starts: int,
    precision: str | None,
) -> None:
    if precision not in (None, *PRECISIONS):
        raise typer.BadParameter(f"--precision: one of {', '.join(PRECISIONS)}, got {precision!r}")
    work = WORKS[algo]
    frames = frames or work.frames
    title = f"{work.title} {ENV_ID} x{NUM_ENVS}, {frames} frames, {pairs} pairs"
    if precision is not None:
        title += f", SLM Lab's precision {precision}"
    typer.echo(f"{title}, 1 torch thread per run, load average {os.getloadavg()[0]:.1f}")
    runs = []
    for i in range(pairs):
        for position, lib in enumerate(LIBS if i % 2 == 0 else LIBS[::-1]):
            pair_seed = seed + i
            if lib == "slm_lab":
                r = run_slm_lab(work, frames, pair_seed, learning_starts, precision)
            else:
                r = run_sb3(algo, frames, pair_seed, learning_starts)
            r = {"lib": lib, "pair": i, "seed": pair_seed, "position": position, **with_rates(r)}
            runs.append(r)
            typer.echo(run_line(f"[{algo} pair {i + 1}/{pairs}]", lib, r))
    summary = summarize(runs)
    print_summary(title, summary)
    report = {
        "env": ENV_ID,
        "num_envs": NUM_ENVS,
        "frames": frames,
        "pairs": pairs,
        "slm_lab_spec": slm_lab_spec(work, frames, seed, learning_starts, precision),
        "sb3_hyperparameters": work.hyperparameters,
        "mismatches": work.mismatches,
        "runs": runs,
        "summary": summary,
        "load_average_end": os.getloadavg(),
    }
    if algo == "dqn":
        report["learning_starts"] = learning_starts
    suffix = f"_{precision}" if precision is not None else ""
    write_report(OUT_DIR / f"atari_vs_sb3_{algo}{suffix}.json", report)


app = typer.Typer(
    help="Atari training speed, whole processes: SLM Lab vs Stable-Baselines3.",
    add_completion=False,
    pretty_exceptions_enable=False,
)
Pairs = Annotated[int, typer.Option(min=1, help="A/B pairs")]
Frames = Annotated[int | None, typer.Option(help="training frames per run (default: per algo)")]
Seed = Annotated[int, typer.Option(help="seed of the first pair; pair i uses seed + i")]
Precision = Annotated[
    str | None,
    typer.Option(help="SLM Lab's agent.net.precision: float32 or bf16-mixed (default: the spec's)"),
]
LearningStarts = Annotated[
    int, typer.Option(min=NUM_ENVS, help="DQN: frames before the first training step (both)")
]
DEFAULT_LEARNING_STARTS = 512  # a short bench's; dqn_atari's own is 10000


@app.command()
def ppo(
    pairs: Pairs = 2, frames: Frames = None, seed: Seed = 0, precision: Precision = None
) -> None:
    """ppo_atari (SLM Lab CLI) vs SB3 PPO CnnPolicy on ALE/Pong-v5 x16."""
    compare("ppo", pairs, frames, seed, DEFAULT_LEARNING_STARTS, precision)


@app.command()
def dqn(
    pairs: Pairs = 2,
    frames: Frames = None,
    seed: Seed = 0,
    learning_starts: LearningStarts = DEFAULT_LEARNING_STARTS,
    precision: Precision = None,
) -> None:
    """dqn_atari (SLM Lab CLI) vs SB3 DQN CnnPolicy on ALE/Pong-v5 x16."""
    compare("dqn", pairs, frames, seed, learning_starts, precision)


@app.command(hidden=True)
def sb3(
    algo: str,
    frames: Annotated[int, typer.Option()],
    seed: Annotated[int, typer.Option()] = 0,
    learning_starts: Annotated[int, typer.Option()] = DEFAULT_LEARNING_STARTS,
) -> None:
    """One SB3 training run in this process; prints `result: {...}`."""
    if algo not in WORKS:
        raise typer.BadParameter(f"algo: one of {', '.join(WORKS)}, got {algo!r}")
    result = WORKS[algo].run_sb3(frames, seed, learning_starts)
    typer.echo(f"result: {json.dumps(result)}")


if __name__ == "__main__":
    app()
