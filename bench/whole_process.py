"""What a user sees from the shell: whole processes of SLM Lab and Stable-Baselines3, timed.

The in-process comparisons (`bench/vs_sb3.py compare`) time the training loop only. Here every
number is a whole process started from this script (imports, start-up, training, final analysis, exit):

- `pairs`: RL Zoo PPO CartPole-v1 (1e5 frames) and DQN CartPole-v1 (5e4 frames); on request
  (`--only`, not run by default: they are long) PPO Hopper-v5 at the shipped `ppo_mujoco`
  settings (98304 frames, three rollouts of 2048 x 16; `ppo_hopper`) and SAC Hopper-v5 at RL
  Zoo's settings but learning_starts 1e3 (5e4 frames, about 15 minutes a pair; `sac_hopper`);
  A/B alternating in pairs (which library goes first alternates from pair to pair), the same
  seed within a pair.
  SLM Lab runs through its real CLI, `slm-lab run <spec file> <name> train --log-level WARNING`,
  on a one-session spec file generated from bench/vs_sb3.py's record `slm_lab_spec(frames, seed)`,
  with a temporary folder as working directory (its data/ goes there); SB3 runs
  `bench/vs_sb3.py sb3 <work>`, which builds the record's env and model and learns as a user's
  script does (see that command's help). Per run: wall
  seconds, CPU seconds (user + system of the child and the descendants it waited for), the
  1-minute load average at launch, peak RSS, final return (SLM Lab: `total_reward` of the
  session CSV's last row and the trial's `total_reward_ma`; SB3: mean return of the last 100
  episodes). Per work: the medians of each side and the median of the per-pair ratios
  sb3_wall / slm_wall ("speedup"), and the same of CPU seconds (steadier than the wall when
  other work shares the machine).
- `cli`: wall seconds of `slm-lab --help` and `slm-lab check <ppo_cartpole.json>` next to a bare
  Typer CLI (bench/typer_hello.py) and `python -c pass`, run the same way with the same
  interpreter (no RSS: these processes are too small to read above the floor explained below).
- `startup`: seconds from launch to the first env step of a one-session `ppo_cartpole` run, split
  into the interpreter start, `import torch`, and the rest (bench/startup_probe.py is the child;
  the spec is a copy with meta.max_session 1, which `dev` implies anyway).
- `rss`: peak RSS of `python -c "import torch"` vs a one-session `slm-lab run ... dev` on a short
  copy of ppo_cartpole; the difference is the framework's share above torch.

Every child has one torch thread: OMP_NUM_THREADS=MKL_NUM_THREADS=1 here, and torch's own setting
by SLM Lab (one thread per session unless the spec says otherwise), by OMP_NUM_THREADS alone in
the SB3 process, as in a user's shell. Both libraries run on this interpreter's torch. The SB3
process also imports Typer (for its command line), which SLM Lab's CLI does too; `cli` shows what
that costs.

Peak RSS is the child's own ru_maxrss from os.wait4. Linux carries the launching process's peak
RSS into its child's (across the exec), so this parent stays small (no torch, numpy or pandas)
and records its own peak as the floor below which no child can read.

Raw numbers go to bench/out/whole_process.json (`pairs`; with `--only W`, whole_process_W.json;
with `--precision bf16-mixed`, SLM Lab's nets under bf16 autocast against SB3's float32, a
`_bf16-mixed` suffix) and bench/out/whole_process_<command>.json.

usage: uv run --group bench python bench/whole_process.py pairs [--pairs 3] [--only ppo|dqn|ppo_hopper|sac_hopper]
       [--frames-scale 1] [--precision float32|bf16-mixed]; ... cli [--repeats 10]; ... startup [--repeats 5]; ... rss [--repeats 3]
"""

import compileall
import csv
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

import typer
from vs_sb3 import COMPARISONS, Comparison

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
OUT_DIR = BENCH / "out"
PYTHON = Path(sys.executable)  # not resolved: the venv's python, whose site-packages hold both libs
SLM_LAB = PYTHON.parent / "slm-lab"  # the console script the venv installs next to its python
SB3_SCRIPT = BENCH / "vs_sb3.py"
TYPER_REFERENCE = BENCH / "typer_hello.py"
STARTUP_PROBE = BENCH / "startup_probe.py"
PPO_CARTPOLE_SPEC = ROOT / "slm_lab" / "spec" / "benchmark" / "ppo" / "ppo_cartpole.json"
PPO_CARTPOLE_NAME = "ppo_cartpole"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
LOG_LEVEL = "WARNING"
KIB_PER_MIB = 1024  # Linux reports ru_maxrss in KiB
TAIL_CHARS = 2000  # of a failed child's stderr, in the error message
LIBS = ("slm_lab", "sb3")

app = typer.Typer(
    help="Whole-process timings of SLM Lab (its CLI) vs Stable-Baselines3.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


class WorkName(StrEnum):
    ppo = "ppo"
    dqn = "dqn"
    ppo_hopper = "ppo_hopper"
    sac_hopper = "sac_hopper"


class Precision(StrEnum):
    float32 = "float32"
    bf16_mixed = "bf16-mixed"


@dataclass(frozen=True)
class Work:
    title: str
    comparison: str  # a bench/vs_sb3.py record: its slm_lab_spec and its SB3 model
    frames: int  # RL Zoo's n_timesteps

    @property
    def record(self) -> Comparison:
        return COMPARISONS[self.comparison]


WORKS = {
    WorkName.ppo: Work("PPO CartPole-v1", "ppo_cartpole", 100_000),
    WorkName.dqn: Work("DQN CartPole-v1", "dqn_cartpole", 50_000),
    WorkName.ppo_hopper: Work("PPO Hopper-v5", "ppo_hopper", 98_304),
    WorkName.sac_hopper: Work("SAC Hopper-v5", "sac_hopper", 50_000),
}
DEFAULT_WORKS = (WorkName.ppo, WorkName.dqn)  # the Hopper works only when asked: they are long


# -- one child process -------------------------------------------------------------------------
TIMED_MODULES = ("torch", "gymnasium", "matplotlib.figure", "slm_lab.experiment.session")


def require_bytecode(*modules: str, root: Path = ROOT) -> None:
    """Compile `root`'s slm_lab where its .pyc files are missing or stale, then exit with one line
    unless the installed `modules` (imported by the processes timed) have their .pyc files. A
    user's Python writes them at the first import; where it does not (PYTHONDONTWRITEBYTECODE,
    a `uv sync` without --compile-bytecode) every process compiles its imports from source,
    about 1.5 s of torch's start-up on the 2-core machine, paid by every side in its own amount
    (SB3's process compiled more than SLM Lab's), which skews every ratio."""
    compileall.compile_dir(root / "slm_lab", quiet=1)
    missing = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None:
            missing.append(name)
        elif spec.cached is not None and not Path(spec.cached).exists():
            missing.append(name)  # an extension or namespace package has none to compile
    if missing:
        raise SystemExit(
            f"error: no compiled bytecode for {', '.join(missing)}: run `uv sync --frozen "
            "--compile-bytecode --group bench --inexact` first, so that each timed process "
            "loads its imports as a user's would"
        )


def monotonic() -> float:
    """CLOCK_MONOTONIC is one clock for all processes, so a child's stamps compare with ours."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def own_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB


@dataclass
class Proc:
    launched_at: float  # monotonic(), just before the launch
    wall_s: float  # launch to exit
    peak_rss_mb: float
    stdout: str
    cpu_s: float  # user + system CPU seconds of the process and the descendants it waited for


def run_process(cmd: list[str | Path], cwd: Path) -> Proc:
    """Run cmd to its end with one torch thread; fail with its stderr if it fails."""
    env = {**os.environ, **ONE_THREAD}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        launched_at = monotonic()
        start = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not all children's
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(
                f"{' '.join(map(str, cmd))} (in {cwd}) exited with {proc.returncode}:\n"
                f"{err.read()[-TAIL_CHARS:]}"
            )
        cpu = usage.ru_utime + usage.ru_stime
        return Proc(launched_at, wall, usage.ru_maxrss / KIB_PER_MIB, out.read(), cpu)


def line_after(stdout: str, prefix: str) -> str:
    """The rest of the first stdout line that starts with prefix."""
    for line in stdout.splitlines():
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip()
    raise SystemExit(f"no {prefix!r} line in the output:\n{stdout[-TAIL_CHARS:]}")


def parse_metrics(text: str) -> dict[str, float]:
    """'frame:1.00e+05 | total_reward_ma:431.20 | ...' -> {'frame': 100000.0, ...}."""
    pairs = (part.split(":", 1) for part in text.split(" | "))
    return {k.strip(): float(v) for k, v in pairs}


def write_spec_file(spec: dict[str, Any], folder: Path) -> tuple[Path, str]:
    """Write spec (with its 'name') as a spec file in folder; the file and the spec's name."""
    spec = dict(spec)
    name = spec.pop("name")
    path = folder / f"{name}.json"
    path.write_text(json.dumps({name: spec}, indent=2) + "\n")
    return path, name


def slm_lab_run_cmd(spec_path: Path, name: str, mode: str) -> list[str | Path]:
    return [SLM_LAB, "run", spec_path, name, mode, "--log-level", LOG_LEVEL]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def write_report(path: Path, report: dict[str, Any]) -> None:
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    report |= {
        "versions": {
            "python": platform.python_version(),
            **{pkg: version(pkg) for pkg in ("slm-lab", "torch", "stable-baselines3", "typer")},
        },
        "git_sha": git.stdout.strip() or None,
        "torch_threads": 1,
        "cpu_count": os.cpu_count(),
        "peak_rss_floor_mb": own_peak_rss_mb(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    typer.echo(f"wrote {path.relative_to(ROOT)}")


# -- pairs -------------------------------------------------------------------------------------
def slm_lab_spec(work: Work, frames: int, seed: int, precision: Precision) -> dict[str, Any]:
    """The comparison's spec, its nets at `precision` (SB3 has float32 only)."""
    spec = work.record.slm_lab_spec(frames, seed)
    if precision is not Precision.float32:  # the float32 spec stays as earlier reports have it
        spec["agent"]["net"]["precision"] = precision.value
    return spec


def native_bf16() -> bool:
    """Whether this CPU has bfloat16 arithmetic (AVX512-BF16 or AMX); without it bf16-mixed is
    emulated and slower than float32 (read torch-free: this parent stays small)."""
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    return "avx512_bf16" in flags or "amx_bf16" in flags


def run_slm_lab(work: Work, frames: int, seed: int, precision: Precision) -> dict[str, Any]:
    """`slm-lab run ... train` on a one-session spec file of the comparison's spec."""
    spec = slm_lab_spec(work, frames, seed, precision)
    spec["meta"] |= {"max_session": 1, "random_seed": seed}
    with tempfile.TemporaryDirectory(prefix="whole_process_slm_lab_") as tmp:
        folder = Path(tmp)
        spec_path, name = write_spec_file(spec, folder)
        proc = run_process(slm_lab_run_cmd(spec_path, name, "train"), cwd=folder)
        metrics = parse_metrics(line_after(proc.stdout, "trial_metrics:"))
        run_dir = folder / line_after(proc.stdout, "run folder:")
        (session_csv,) = (run_dir / "info").glob("*_session_df.csv")
        with session_csv.open() as f:
            last = list(csv.DictReader(f))[-1]
    return {
        "wall_s": proc.wall_s,
        "cpu_s": proc.cpu_s,
        "peak_rss_mb": proc.peak_rss_mb,
        "return": float(last["total_reward"]),
        "total_reward_ma": metrics["total_reward_ma"],
        "frames": int(float(last["frame"])),
    }


def run_sb3(work: Work, frames: int, seed: int) -> dict[str, Any]:
    """`bench/vs_sb3.py sb3 <work>` in a fresh process."""
    cmd: list[str | Path] = [PYTHON, SB3_SCRIPT, "sb3", work.comparison, "--frames", str(frames)]
    cmd += ["--seed", str(seed)]
    with tempfile.TemporaryDirectory(prefix="whole_process_sb3_") as tmp:
        proc = run_process(cmd, cwd=Path(tmp))
    return {
        "wall_s": proc.wall_s,
        "cpu_s": proc.cpu_s,
        "peak_rss_mb": proc.peak_rss_mb,
        "return": float(line_after(proc.stdout, "mean_return:")),
        "frames": int(line_after(proc.stdout, "frames:")),
    }


def run_line(label: str, lib: str, r: dict[str, Any]) -> str:
    line = (
        f"{label} {lib:<7} wall {r['wall_s']:7.2f} s | cpu {r['cpu_s']:7.2f} s"
        f" | load {r['load']:.1f} | peak RSS {r['peak_rss_mb']:6.0f} MiB"
        f" | frames {r['frames']} | return {r['return']:.1f}"
    )
    if "total_reward_ma" in r:
        line += f" | total_reward_ma {r['total_reward_ma']:.1f}"
    return line


def summarize(work: Work, frames: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_lib = {lib: [r for r in runs if r["lib"] == lib] for lib in LIBS}
    walls = {lib: [r["wall_s"] for r in rs] for lib, rs in by_lib.items()}
    speedups = [sb3 / slm for slm, sb3 in zip(walls["slm_lab"], walls["sb3"], strict=True)]
    cpus = {lib: [r["cpu_s"] for r in rs] for lib, rs in by_lib.items()}
    cpu_speedups = [sb3 / slm for slm, sb3 in zip(cpus["slm_lab"], cpus["sb3"], strict=True)]
    summary = {
        "median_wall_s": {lib: median(w) for lib, w in walls.items()},
        "speedup_sb3_wall_over_slm_wall": median(speedups),
        "per_pair_speedups": speedups,
        # CPU seconds: less sensitive than the wall to what else runs on the machine
        "median_cpu_s": {lib: median(c) for lib, c in cpus.items()},
        "speedup_sb3_cpu_over_slm_cpu": median(cpu_speedups),
        "per_pair_cpu_speedups": cpu_speedups,
        "median_peak_rss_mb": {
            lib: median([r["peak_rss_mb"] for r in rs]) for lib, rs in by_lib.items()
        },
        "returns": {lib: [r["return"] for r in rs] for lib, rs in by_lib.items()},
        "slm_lab_total_reward_ma": [r["total_reward_ma"] for r in by_lib["slm_lab"]],
    }
    typer.echo(f"== {work.title}, {frames} frames, {len(speedups)} pairs")
    typer.echo(
        "median wall: "
        + " | ".join(f"{lib} {w:.2f} s" for lib, w in summary["median_wall_s"].items())
        + f" | speedup (median of per-pair sb3/slm_lab) {summary['speedup_sb3_wall_over_slm_wall']:.3f}"
    )
    typer.echo(
        "median CPU seconds: "
        + " | ".join(f"{lib} {c:.2f} s" for lib, c in summary["median_cpu_s"].items())
        + f" | speedup by CPU seconds {summary['speedup_sb3_cpu_over_slm_cpu']:.3f}"
    )
    typer.echo(
        "median peak RSS: "
        + " | ".join(f"{lib} {m:.0f} MiB" for lib, m in summary["median_peak_rss_mb"].items())
    )
    typer.echo(
        "returns: "
        + " | ".join(
            f"{lib} {', '.join(f'{x:.1f}' for x in xs)}" for lib, xs in summary["returns"].items()
        )
        + f" | slm_lab total_reward_ma {', '.join(f'{x:.1f}' for x in summary['slm_lab_total_reward_ma'])}"
    )
    return summary


@app.command()
def pairs(
    pairs: Annotated[int, typer.Option(min=1, help="A/B pairs per work")] = 3,
    only: Annotated[
        WorkName | None, typer.Option(help="one work instead of PPO and DQN CartPole")
    ] = None,
    frames_scale: Annotated[
        float, typer.Option(min=0, help="multiply the frame budgets (e.g. 0.05 to validate)")
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="seed of the first pair; pair i uses seed + i")] = 0,
    precision: Annotated[
        Precision, typer.Option(help="SLM Lab's agent.net.precision (SB3 runs float32)")
    ] = Precision.float32,
) -> None:
    """Whole SLM Lab CLI runs vs whole SB3 script runs, alternating, on RL Zoo works."""
    require_bytecode(*TIMED_MODULES, "stable_baselines3")
    report: dict[str, Any] = {
        "pairs": pairs,
        "frames_scale": frames_scale,
        "slm_lab_precision": precision.value,
        "native_bf16": native_bf16(),
        "works": {},
    }
    for work_name in [only] if only else DEFAULT_WORKS:
        work = WORKS[work_name]
        frames = max(1, round(work.frames * frames_scale))
        runs = []
        for i in range(pairs):
            order = LIBS if i % 2 == 0 else LIBS[::-1]
            for position, lib in enumerate(order):
                pair_seed = seed + i
                load = os.getloadavg()[0]
                r = (
                    run_slm_lab(work, frames, pair_seed, precision)
                    if lib == "slm_lab"
                    else run_sb3(work, frames, pair_seed)
                )
                r = {
                    "lib": lib,
                    "pair": i,
                    "seed": pair_seed,
                    "position": position,
                    "load": load,
                    **r,
                }
                runs.append(r)
                typer.echo(run_line(f"[{work_name.value} pair {i + 1}/{pairs}]", lib, r))
        report["works"][work_name.value] = {
            "title": work.title,
            "frames": frames,
            "slm_lab_spec": slm_lab_spec(work, frames, seed, precision),
            "runs": runs,
            "summary": summarize(work, frames, runs),
        }
    stem = f"whole_process_{only.value}" if only else "whole_process"
    if precision is not Precision.float32:
        stem += f"_{precision.value}"
    write_report(OUT_DIR / f"{stem}.json", report)


# -- cli ---------------------------------------------------------------------------------------
@app.command()
def cli(
    repeats: Annotated[int, typer.Option(min=1, help="runs of each command")] = 10,
) -> None:
    """Start-up of `slm-lab --help` and `slm-lab check`, next to a bare Typer CLI."""
    require_bytecode(*TIMED_MODULES)
    cases: dict[str, list[str | Path]] = {
        "slm-lab --help": [SLM_LAB, "--help"],
        "slm-lab check ppo_cartpole.json": [SLM_LAB, "check", PPO_CARTPOLE_SPEC],
        "typer_hello.py --help": [PYTHON, TYPER_REFERENCE, "--help"],
        "typer_hello.py": [PYTHON, TYPER_REFERENCE],
        "python -c pass": [PYTHON, "-c", "pass"],
    }
    names = list(cases)
    runs: dict[str, list[float]] = {name: [] for name in names}  # wall seconds
    for i in range(repeats):
        for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate who goes first
            proc = run_process(cases[name], cwd=ROOT)
            runs[name].append(proc.wall_s)
    summary = {}
    for name in names:
        walls = runs[name]
        summary[name] = {"median_wall_s": median(walls), "min_wall_s": min(walls)}
        typer.echo(f"{name:<32} median {median(walls):.3f} s | min {min(walls):.3f} s")
    write_report(
        OUT_DIR / "whole_process_cli.json",
        {"repeats": repeats, "commands": {n: list(map(str, c)) for n, c in cases.items()}}
        | {"runs": runs, "summary": summary},
    )


# -- startup -----------------------------------------------------------------------------------
@app.command()
def startup(
    repeats: Annotated[int, typer.Option(min=1, help="runs")] = 5,
    mode: Annotated[str, typer.Option(help="dev or train (one session either way)")] = "dev",
) -> None:
    """Seconds from launch to the first env step of `slm-lab run ppo_cartpole.json ppo_cartpole <mode>`."""
    require_bytecode(*TIMED_MODULES)
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="whole_process_startup_") as tmp:
            folder = Path(tmp)
            spec = json.loads(PPO_CARTPOLE_SPEC.read_text())[PPO_CARTPOLE_NAME]
            spec["meta"]["max_session"] = 1  # `train` would otherwise start 4 session processes
            spec_path, name = write_spec_file({"name": PPO_CARTPOLE_NAME, **spec}, folder)
            stamps_path = folder / "stamps.json"
            cmd: list[str | Path] = [PYTHON, STARTUP_PROBE, stamps_path, spec_path, name, mode]
            proc = run_process(cmd, cwd=folder)
            stamps = json.loads(stamps_path.read_text())
        r = {
            "interpreter_s": stamps["started"] - proc.launched_at,
            "torch_import_s": stamps["torch_imported"] - stamps["started"],
            "first_step_after_torch_s": stamps["first_step"] - stamps["torch_imported"],
            "total_to_first_step_s": stamps["first_step"] - proc.launched_at,
        }
        runs.append(r)
        typer.echo(" | ".join(f"{k} {v:.3f}" for k, v in r.items()))
    summary = {f"median_{k}": median([r[k] for r in runs]) for k in runs[0]}
    typer.echo(
        "median: "
        + " | ".join(f"{k.removeprefix('median_')} {v:.3f} s" for k, v in summary.items())
    )
    write_report(
        OUT_DIR / "whole_process_startup.json",
        {"repeats": repeats, "mode": mode, "spec": str(PPO_CARTPOLE_SPEC.relative_to(ROOT))}
        | {"runs": runs, "summary": summary},
    )


# -- rss ---------------------------------------------------------------------------------------
@app.command()
def rss(
    repeats: Annotated[int, typer.Option(min=1, help="runs of each process")] = 3,
    frames: Annotated[int, typer.Option(min=1, help="env.max_frame of the SLM Lab run")] = 20_000,
) -> None:
    """Peak RSS of `import torch` vs a one-session SLM Lab run (ppo_cartpole dev, short)."""
    runs: dict[str, list[dict[str, float]]] = {"import torch": [], "slm-lab dev": []}
    for i in range(repeats):
        for name in list(runs)[i % 2 :] + list(runs)[: i % 2]:  # alternate who goes first
            with tempfile.TemporaryDirectory(prefix="whole_process_rss_") as tmp:
                folder = Path(tmp)
                if name == "import torch":
                    proc = run_process([PYTHON, "-c", "import torch"], cwd=folder)
                else:
                    spec = json.loads(PPO_CARTPOLE_SPEC.read_text())[PPO_CARTPOLE_NAME]
                    spec["env"]["max_frame"] = frames
                    spec_path, spec_name = write_spec_file(
                        {"name": PPO_CARTPOLE_NAME, **spec}, folder
                    )
                    proc = run_process(slm_lab_run_cmd(spec_path, spec_name, "dev"), cwd=folder)
            runs[name].append({"wall_s": proc.wall_s, "peak_rss_mb": proc.peak_rss_mb})
            typer.echo(
                f"{name:<13} peak RSS {proc.peak_rss_mb:6.0f} MiB | wall {proc.wall_s:.2f} s"
            )
    medians = {name: median([r["peak_rss_mb"] for r in rs]) for name, rs in runs.items()}
    share = medians["slm-lab dev"] - medians["import torch"]
    typer.echo(
        f"median peak RSS: import torch {medians['import torch']:.0f} MiB | slm-lab dev "
        f"{medians['slm-lab dev']:.0f} MiB | framework's share above import torch {share:.0f} MiB"
    )
    write_report(
        OUT_DIR / "whole_process_rss.json",
        {"repeats": repeats, "max_frame": frames, "runs": runs}
        | {"median_peak_rss_mb": medians, "framework_share_mb": share},
    )


@app.command("require-bytecode", hidden=True)
def require_bytecode_command(root: Annotated[Path, typer.Option()] = ROOT) -> None:
    """`require_bytecode` in this Python's environment for the checkout `root` (ab.py runs it
    with each checkout's own Python)."""
    require_bytecode(*TIMED_MODULES, root=root)


if __name__ == "__main__":
    app()
