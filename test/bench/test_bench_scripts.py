"""Smoke tests of bench/: every script (bench/archive/ aside) imports, shows its help, and names
only slm_lab modules and attributes that exist, so a library refactor cannot silently break one.

In-process and without Stable-Baselines3: the `bench` dependency group is blocked here whether
or not it is installed, so a script that needs SB3 at import (instead of where a run uses it)
fails on every machine alike.
"""

import ast
import dataclasses
import importlib
import importlib.util
import math
import py_compile
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
import typer
from typer.testing import CliRunner

from slm_lab.spec import spec_util

BENCH = Path(__file__).resolve().parents[2] / "bench"
MODULES = sorted(BENCH.glob("*.py"))
SCRIPTS = [p for p in MODULES if not p.name.startswith("_")]  # `_name.py`: shared by scripts
SHELL_SCRIPTS = sorted(BENCH.glob("*.sh"))
BENCH_GROUP = ("stable_baselines3", "sb3_contrib")  # pyproject.toml's `bench` dependency group


@pytest.fixture
def bench_import(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Import a bench script as `python bench/<script>.py` would see its siblings (bench/ on the
    path), with the bench group unimportable; bench's own modules are dropped afterwards."""
    monkeypatch.syspath_prepend(str(BENCH))
    for name in BENCH_GROUP:
        monkeypatch.setitem(sys.modules, name, None)  # `import stable_baselines3` raises

    def load(path: Path) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield load
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").parent == BENCH:
            del sys.modules[name]


def command_line(module: ModuleType) -> typer.Typer:
    """The script's command line: its Typer `app`, or the `main` it hands to typer.run."""
    if isinstance(getattr(module, "app", None), typer.Typer):
        return module.app
    assert callable(getattr(module, "main", None)), "no Typer `app` and no `main` for typer.run"
    app = typer.Typer(add_completion=False)
    app.command()(module.main)
    return app


def subcommands(app: typer.Typer) -> list[list[str]]:
    """[] for the app itself, then [name] for each registered command of a multi-command app."""
    infos = app.registered_commands
    if len(infos) <= 1:
        return [[]]
    return [[]] + [[info.name or info.callback.__name__.replace("_", "-")] for info in infos]


def test_bench_has_scripts() -> None:
    assert {p.name for p in SCRIPTS} >= {
        "vs_sb3.py",
        "whole_process.py",
        "floor.py",
        "ab.py",
        "hogwild_speed.py",
    }
    assert not (BENCH / "ab_cli.py").exists()  # merged into ab.py


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_imports_and_shows_help(bench_import: object, path: Path) -> None:
    module = bench_import(path)
    app = command_line(module)
    runner = CliRunner()
    for args in subcommands(app):
        result = runner.invoke(app, [*args, "--help"])
        assert result.exit_code == 0, f"{path.name} {' '.join(args)} --help: {result.output}"
        assert "Usage" in result.output


def slm_lab_imports(path: Path) -> Iterator[tuple[str, str | None]]:
    """(module, name) of every `from slm_lab... import name` and (module, None) of every
    `import slm_lab...` in the file, inside functions too (the scripts import lazily)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("slm_lab"):
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("slm_lab"):
                    yield alias.name, None


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_slm_lab_names_exist(path: Path) -> None:
    for module_name, name in slm_lab_imports(path):
        module = importlib.import_module(module_name)
        if name is not None:
            submodule = hasattr(module, "__path__") and importlib.util.find_spec(
                f"{module_name}.{name}"
            )
            assert hasattr(module, name) or submodule, f"{path.name}: no {module_name}.{name}"


def test_shared_rollout_steps_the_backend_into_the_memory(bench_import: object) -> None:
    """The rollout benches' SLM Lab side: each step ticks the clock by the envs stepped and adds
    to the spec's memory; a drained on-policy batch of `horizon` steps starts over when full, a
    replay (not drained) keeps every step."""
    rollout = bench_import(BENCH / "_rollout.py")
    specs = BENCH.parent / "slm_lab" / "spec" / "benchmark"
    steps = 5
    for spec_file, name, horizon, drain in (
        ("ppo/ppo_cartpole.json", "ppo_cartpole", 2, True),
        ("dqn/dqn_cartpole.json", "dqn_cartpole", 1, False),
    ):
        spec = spec_util.load_spec(str(specs / spec_file), name).spec
        step, env, memory = rollout.slm_lab_rollout(spec, 0, 10**9, horizon, drain)
        try:
            for _ in range(steps):
                step()
            assert env.clock.frame == steps * spec.env.num_envs, name
            if drain:  # two full batches taken, the fifth step's row written
                assert memory.ptr == steps % horizon == 1
            else:
                assert memory.size == steps * spec.env.num_envs
        finally:
            env.close()


def test_ab_reads_a_trial_without_a_finished_episode_as_nan(bench_import: object) -> None:
    """A short run with no finished episode writes total_reward_ma as null; `ab.py cli` prints
    it as nan instead of failing on it."""
    ab = bench_import(BENCH / "ab.py")
    assert math.isnan(ab.reward_ma({"total_reward_ma": None}))
    assert ab.reward_ma({"total_reward_ma": 12.5}) == 12.5


def test_comparison_specs_validate(bench_import: object) -> None:
    """Every vs_sb3 record's SLM Lab spec (built in code) passes the spec schema."""
    vs_sb3 = bench_import(BENCH / "vs_sb3.py")
    assert set(vs_sb3.COMPARISONS) == {
        "ppo_cartpole",
        "dqn_cartpole",
        "sac_pendulum",
        "sac_hopper",
        "crossq_hopper",
        "ppo_hopper",
        "a2c_lunar",
        "ppo_pong",
    }
    for work, cmp in vs_sb3.COMPARISONS.items():
        spec = cmp.slm_lab_spec(cmp.default_frames, 0)
        config = spec_util.validate(spec, spec["name"])
        assert config.env.max_frame == cmp.default_frames, work


@pytest.mark.parametrize("path", SHELL_SCRIPTS, ids=[p.name for p in SHELL_SCRIPTS])
def test_shell_script_parses(path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# (work, frames) -> the floor's counts, by hand from the spec: PPO trains every 32 x 8 = 256
# frames, 20 epochs of one 256-row minibatch, and acts once per 8-env step; DQN trains every 256
# frames from frame 1024, 128 gradient steps a call (SLM Lab's measured 24576 at 5e4); SAC acts
# and steps once per frame after the first 100 (SB3's measured 19900 at 2e4). PPO Pong trains
# every 128 x 16 = 2048 frames, 4 epochs of 2048 / 256 = 8 minibatches, and acts once per
# 16-env step, on 4 stacked 84x84 frames with the spec's Nature CNN shared by both heads.
FLOOR_COUNTS = {
    ("ppo_cartpole", 100_000): {"act_calls": 12_500, "train_calls": 390, "train_steps": 7_800},
    ("dqn_cartpole", 50_000): {"train_calls": 192, "train_steps": 24_576, "batch": 64},
    ("sac_pendulum", 20_000): {"act_calls": 19_900, "train_steps": 19_900, "batch": 256},
    ("ppo_pong", 4096): {
        "act_calls": 256,
        "train_calls": 2,
        "train_steps": 64,
        "batch": 256,
        "obs_shape": (4, 84, 84),
        "act_dim": 6,
        "conv_layers": [[32, 8, 4, 0, 1], [64, 4, 2, 0, 1], [64, 3, 1, 0, 1]],
        "hid_layers": [512],
        "shared": True,
        "clip_vloss": True,
        "optim": "AdamW",
    },
}


@pytest.mark.parametrize(("work", "frames"), list(FLOOR_COUNTS), ids=[w for w, _ in FLOOR_COUNTS])
def test_floor_counts_follow_the_spec(bench_import: object, work: str, frames: int) -> None:
    floor = bench_import(BENCH / "floor.py")
    plan = floor.plan(work, frames)
    assert {k: getattr(plan, k) for k in FLOOR_COUNTS[work, frames]} == FLOOR_COUNTS[work, frames]


def test_floor_dqn_greedy_actions(bench_import: object) -> None:
    """Epsilon 1 -> 0 over frames 0..10: greedy actions 0 + 0.1 + ... + 0.9, then 1 a frame."""
    floor = bench_import(BENCH / "floor.py")
    assert floor.linear_sum(1.0, 0.0, 0, 10, 20) == pytest.approx(4.5 + 10)


@pytest.mark.parametrize("work", ["ppo_cartpole", "dqn_cartpole", "sac_pendulum", "ppo_pong"])
def test_floor_arithmetic_runs(bench_import: object, work: str) -> None:
    """A few of each work's torch calls, so a floor that no longer runs fails here."""
    floor = bench_import(BENCH / "floor.py")
    plan = dataclasses.replace(floor.plan(work, 300), act_calls=2, train_calls=1, train_steps=2)
    floor.ARITHMETIC[plan.algo](torch, plan)


def test_floor_pong_env_steps(bench_import: object) -> None:
    """The floor's Pong env is ale-py's native vector env of the spec's 16 games, built, reset
    and stepped: the env part's seconds include the building, which every implementation pays."""
    floor = bench_import(BENCH / "floor.py")
    plan = dataclasses.replace(floor.plan("ppo_pong", 4096), vector_steps=3)
    result = floor.child_env(plan)
    assert result["ale_threads"] >= 1
    for clock in floor.CLOCKS:
        assert 0 < result[f"build_{clock}"] < result[clock]


@pytest.mark.parametrize("config", ["a3c_2w", "a3c_1w", "a2c"])
def test_hogwild_speed_configs_validate(bench_import: object, config: str) -> None:
    """Each configuration's -s sets on the shipped spec validate: Hogwild workers of the spec's
    envs, or A2C (no Hogwild) stepping both workers' envs in one session."""
    bench = bench_import(BENCH / "hogwild_speed.py")
    args = bench.CONFIGS[config]
    sets = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-s")
    spec = spec_util.load_spec(str(bench.SPEC), bench.NAME, sets).spec
    assert spec.meta.hogwild == (config != "a2c")
    assert spec.env.num_envs == bench.SPEC_NUM_ENVS * (2 if config == "a2c" else 1)


def test_timing_refuses_modules_without_bytecode(
    bench_import: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timed process that compiles its imports from source measures the compiler: the benches
    compile the checkout's own slm_lab, say which installed modules lack their .pyc (or are not
    installed) and how to make them, and run once they exist."""
    whole_process = bench_import(BENCH / "whole_process.py")
    project = tmp_path / "checkout"
    (project / "slm_lab").mkdir(parents=True)
    (project / "slm_lab" / "session.py").write_text("X = 1\n")
    (tmp_path / "fresh_module_for_bench.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit, match="no compiled bytecode for fresh_module_for_bench"):
        whole_process.require_bytecode("fresh_module_for_bench", root=project)
    assert Path(importlib.util.cache_from_source(str(project / "slm_lab" / "session.py"))).exists()
    with pytest.raises(SystemExit, match="no compiled bytecode for no_such_module_here"):
        whole_process.require_bytecode("no_such_module_here", root=project)
    py_compile.compile(str(tmp_path / "fresh_module_for_bench.py"))
    whole_process.require_bytecode("fresh_module_for_bench", "_ctypes", root=project)
