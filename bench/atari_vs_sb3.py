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
  (see vs_sb3.py's PPO_PONG, DQN_SB3 here, and the mismatches).

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
from vs_sb3 import (
    ATARI_ENV_ID,
    ATARI_MISMATCHES,
    ATARI_NUM_ENVS,
    OUT_DIR,
    PPO_ATARI_FILE,
    PPO_PONG,
    PPO_PONG_MISMATCHES,
    SPEC_DIR,
    ModelBuilder,
    atari_env,
    pick,
    pin_torch_threads,
    ppo_pong_sb3,
    shipped_spec,
    timed_learn,
)
from whole_process import (
    PYTHON,
    TIMED_MODULES,
    line_after,
    require_bytecode,
    run_process,
    slm_lab_run_cmd,
    write_report,
)
from whole_process import write_spec_file as write_named_spec

LIBS = ("slm_lab", "sb3")
PRECISIONS = ("float32", "bf16-mixed")  # agent.net.precision's values
EXPLORE_END_FRAC = 0.1  # DQN: epsilon reaches its end value at this fraction of the frames

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
    spec = shipped_spec(work.spec_file, work.spec_name, ATARI_ENV_ID, frames, seed)
    if precision is not None:
        spec["agent"]["net"]["precision"] = precision
    algorithm = spec["agent"]["algorithm"]
    if algorithm["name"] == "DQN":
        algorithm["training_start_step"] = learning_starts
        algorithm["explore_var_spec"] |= {"start_step": 0, "end_frac": EXPLORE_END_FRAC}
    return spec


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
def train_cnn_policy(build: ModelBuilder, frames: int, seed: int) -> tuple[Any, dict[str, Any]]:
    """Train the CnnPolicy model `build(seed)` builds with its env (vs_sb3.atari_env) on the CPU
    for `frames`: the model, and frames, session_wall_s (from building the env to the end of
    training) and learn_wall_s."""
    start = time.perf_counter()
    model, env = build(seed)
    learn_wall = timed_learn(model, frames)
    session_wall = time.perf_counter() - start
    env.close()
    return model, {
        "frames": int(model.num_timesteps),
        "session_wall_s": session_wall,
        "learn_wall_s": learn_wall,
    }


def run_sb3_ppo(frames: int, seed: int, learning_starts: int) -> dict[str, Any]:
    pin_torch_threads()
    h = PPO_PONG
    model, result = train_cnn_policy(ppo_pong_sb3, frames, seed)
    minibatches = h["n_steps"] * ATARI_NUM_ENVS // h["batch_size"]  # _n_updates counts epochs
    return {**result, "grad_steps": int(model._n_updates) * minibatches}


def run_sb3_dqn(frames: int, seed: int, learning_starts: int) -> dict[str, Any]:
    torch = pin_torch_threads()
    from stable_baselines3 import DQN

    h = DQN_SB3

    def build(seed: int) -> tuple[Any, Any]:
        env = atari_env(seed)
        model = DQN(
            "CnnPolicy",
            env,
            buffer_size=h["buffer_size"],
            # SB3 trains once num_timesteps > learning_starts: from the step reaching learning_starts
            learning_starts=learning_starts - ATARI_NUM_ENVS,
            **pick(h, "batch_size", "learning_rate", "gamma", "train_freq", "gradient_steps"),
            **pick(h, "target_update_interval", "exploration_initial_eps", "exploration_final_eps"),
            **pick(h, "exploration_fraction", "max_grad_norm"),
            policy_kwargs={
                "optimizer_class": torch.optim.AdamW,
                "features_extractor_kwargs": {"features_dim": h["features_dim"]},
            },
            seed=seed,
            device="cpu",
        )
        return model, env

    model, result = train_cnn_policy(build, frames, seed)
    return {**result, "grad_steps": int(model._n_updates)}


WORKS = {
    "ppo": Work(
        "PPO",
        PPO_ATARI_FILE,
        "ppo_atari",
        4096,  # 2 batches of 16 x 128
        PPO_PONG,
        PPO_PONG_MISMATCHES + ATARI_MISMATCHES,
        run_sb3_ppo,
    ),
    "dqn": Work(
        "DQN",
        SPEC_DIR / "dqn" / "dqn_atari.json",
        "dqn_atari",
        2048,
        DQN_SB3,
        DQN_MISMATCHES + ATARI_MISMATCHES,
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
    title = f"{work.title} {ATARI_ENV_ID} x{ATARI_NUM_ENVS}, {frames} frames, {pairs} pairs"
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
        "env": ATARI_ENV_ID,
        "num_envs": ATARI_NUM_ENVS,
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
    int, typer.Option(min=ATARI_NUM_ENVS, help="DQN: frames before the first training step (both)")
]
DEFAULT_LEARNING_STARTS = 512  # a short bench's; dqn_atari's own is 10000


@app.command()
def ppo(
    pairs: Pairs = 2, frames: Frames = None, seed: Seed = 0, precision: Precision = None
) -> None:
    """ppo_atari (SLM Lab CLI) vs SB3 PPO CnnPolicy on ALE/Pong-v5 x16."""
    require_bytecode(*TIMED_MODULES, "stable_baselines3", "ale_py")
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
    require_bytecode(*TIMED_MODULES, "stable_baselines3", "ale_py")
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
