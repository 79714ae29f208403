"""Shared helpers: small specs built in code, spec files in tmp_path, CLI invocation, log capture."""

import contextlib
import copy
import json
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import pandas as pd
import pytest
import torch
from loguru import logger
from typer.testing import CliRunner, Result

from slm_lab.agent.agent import Agent
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.net.config import NetConfig, NetSpec, parse_net
from slm_lab.cli.main import app
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.experiment.analysis import progress_priority
from slm_lab.lib import logger as log_setup
from slm_lab.lib.config import parse
from slm_lab.lib.schedule import ScheduleConfig
from slm_lab.spec import schema

# The tests' own Ray clusters (test_search's ray_address) run their workers on this Python, as a
# search's own cluster does (slm_lab.experiment.ray_cluster): without this, Ray's uv hook, which
# Ray reads when it is first imported, would start them with the `uv run` that runs pytest.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# The suite's processes (xdist workers, console scripts, spawned sessions, Ray workers: about 200)
# write Python's bytecode cache even where PYTHONDONTWRITEBYTECODE is set, so that the first to
# import torch, Ray or pandas compiles it and the others read the cache: in an environment synced
# without --compile-bytecode, each of them compiled its imports from source and the whole suite
# took 7.3 minutes on 2 idle cores instead of the 5 that README promises.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

SMALL_NET = {
    "type": "MLPNet",
    "shared": False,
    "hid_layers": [16],
    "hid_layers_activation": "tanh",
    "init_fn": "orthogonal_",
    "actor_init_std": 0.01,
    "critic_init_std": 1.0,
    "clip_grad_val": 0.5,
    "use_same_optim": False,
    "loss_spec": {"name": "MSELoss"},
    "actor_optim_spec": {"name": "Adam", "lr": 1e-3},
    "critic_optim_spec": {"name": "Adam", "lr": 1e-3},
    "gpu": False,
}
ENTROPY = {"name": "no_decay", "start_val": 0.01, "end_val": 0.01, "start_step": 0, "end_step": 0}
CLIP_EPS = {"name": "no_decay", "start_val": 0.2, "end_val": 0.2, "start_step": 0, "end_step": 0}

ALGORITHM_SPECS: dict[str, dict[str, Any]] = {
    "random": {"name": "Random"},
    "reinforce": {
        "name": "Reinforce",
        "gamma": 0.99,
        "center_return": True,
        "entropy_coef_spec": ENTROPY,
        "training_frequency": 1,
    },
    "a2c_gae": {
        "name": "ActorCritic",
        "gamma": 0.99,
        "lam": 0.95,
        "entropy_coef_spec": ENTROPY,
        "val_loss_coef": 0.5,
        "training_frequency": 16,
    },
    "a2c_nstep": {
        "name": "ActorCritic",
        "gamma": 0.99,
        "num_step_returns": 4,
        "entropy_coef_spec": ENTROPY,
        "val_loss_coef": 0.5,
        "training_frequency": 16,
    },
    "ppo": {
        "name": "PPO",
        "gamma": 0.99,
        "lam": 0.95,
        "time_horizon": 32,
        "minibatch_size": 32,
        "training_epoch": 2,
        "val_loss_coef": 0.5,
        "clip_vloss": False,
        "clip_eps_spec": CLIP_EPS,
        "entropy_coef_spec": ENTROPY,
    },
}
SIL_KEYS = {
    "sil_policy_loss_coef": 1.0,
    "sil_val_loss_coef": 0.01,
    "training_iter": 2,
    "training_batch_iter": 1,
}
ALGORITHM_SPECS["sil"] = {**ALGORITHM_SPECS["a2c_gae"], "name": "SIL", **SIL_KEYS}
ALGORITHM_SPECS["ppo_sil"] = {**ALGORITHM_SPECS["ppo"], "name": "PPOSIL", **SIL_KEYS}
SIL_MEMORY = {"sil_replay_name": "Replay", "max_size": 1000, "batch_size": 16, "use_cer": True}
MEMORY_OF = {
    "random": None,
    "reinforce": "OnPolicyReplay",
    "a2c_gae": "OnPolicyBatchReplay",
    "a2c_nstep": "OnPolicyBatchReplay",
    "ppo": "OnPolicyBatchReplay",
    "sil": "OnPolicyBatchReplay",
    "ppo_sil": "OnPolicyBatchReplay",
}
# columns that depend on the wall clock, so differ between otherwise identical runs
TIMING_COLUMNS = ["wall_t", "fps"]

UV = os.environ.get("UV", "uv")  # the uv that runs the tests (uv run sets UV)


def make_spec(
    algo: str = "ppo",
    env: str = "CartPole-v1",
    max_frame: int = 400,
    num_envs: int = 2,
    log_frequency: int = 100,
    max_session: int = 1,
    random_seed: int | None = 42,
    max_t: int | None = None,
) -> dict[str, Any]:
    """A small valid spec for `algo` (a key of ALGORITHM_SPECS) on `env`."""
    agent: dict[str, Any] = {"name": algo, "algorithm": copy.deepcopy(ALGORITHM_SPECS[algo])}
    if MEMORY_OF[algo]:
        agent["memory"] = {"name": MEMORY_OF[algo]}
        if algo in ("sil", "ppo_sil"):
            agent["memory"].update(SIL_MEMORY)
        agent["net"] = copy.deepcopy(SMALL_NET)
    meta: dict[str, Any] = {
        "distributed": False,
        "log_frequency": log_frequency,
        "eval_frequency": log_frequency,
        "max_session": max_session,
        "max_trial": 1,
    }
    if random_seed is not None:
        meta["random_seed"] = random_seed
    return {
        "agent": agent,
        "env": {"name": env, "num_envs": num_envs, "max_t": max_t, "max_frame": max_frame},
        "meta": meta,
    }


# -- typed configs from the plain dicts tests write ------------------------------------------------
def load(spec: dict[str, Any]) -> schema.Spec:
    return schema.load(copy.deepcopy(spec), "test")


def net_config(net: dict[str, Any]) -> NetConfig:
    return parse(NetConfig, net, "agent.net")


def net_spec(net: dict[str, Any]) -> NetSpec:
    return parse_net(net, "agent.net")


def schedule(spec: dict[str, Any]) -> ScheduleConfig:
    return parse(ScheduleConfig, spec, "schedule")


def make_env(env: dict[str, Any], seed: int = 0, gamma: float = 0.99, **kwargs: Any) -> GymVecEnv:
    """A Gymnasium backend of an env section, on a clock of its own."""
    config = parse(EnvConfig, env, "env")
    return GymVecEnv(config, seed, Clock(config.max_frame, config.num_envs), gamma, **kwargs)


def make_env_agent(spec: dict[str, Any], seed: int = 0) -> tuple[GymVecEnv, Agent]:
    """The env and agent of a spec (agent and env sections), on one clock."""
    typed = load(spec)
    clock = Clock(typed.env.max_frame, typed.env.num_envs)
    env = GymVecEnv(typed.env, seed, clock, typed.agent.algorithm.gamma)
    return env, Agent(typed.agent, env.info, clock)


# the env each algorithm of make_algorithm acts on (an algorithm never holds its env)
_ENVS: "weakref.WeakKeyDictionary[Algorithm, GymVecEnv]" = weakref.WeakKeyDictionary()


def make_algorithm(spec: dict[str, Any], seed: int = 0) -> Algorithm:
    """The algorithm of a spec (agent and env sections), on its env (`env_of`)."""
    env, agent = make_env_agent(spec, seed)
    _ENVS[agent.algorithm] = env
    return agent.algorithm


def env_of(algo: Algorithm) -> GymVecEnv:
    """The env a make_algorithm algorithm acts on."""
    return _ENVS[algo]


def write_spec_file(path: Path, specs: dict[str, Any]) -> Path:
    """Write `{spec_name: spec}` as JSON (or the raw text if `specs` is a str)."""
    path.write_text(specs if isinstance(specs, str) else json.dumps(specs, indent=2))
    return path


def invoke(args: list[str]) -> Result:
    """The Typer app in-process, stdout and stderr apart."""
    return CliRunner().invoke(app, args)


def read_session_df(run_dir: Path, session: int = 0) -> pd.DataFrame:
    [path] = list((run_dir / "info").glob(f"*_t0_s{session}_session_df.csv"))
    return pd.read_csv(path)


def progress_lines(log: str) -> list[str]:
    """A run's progress lines, one per checkpoint, as logged: `<time> INFO <tag> | 25% eta 1s |
    frame:100 | ...`."""
    return [line for line in log.splitlines() if "% eta " in line]


def progress_values(line: str) -> dict[str, str]:
    """The `column:value` items of a progress line."""
    _, _, *items = line.split(" | ")
    return dict(item.split(":", 1) for item in items)


def session_log(run_dir: Path, session: int = 0) -> str:
    """A session's log file: its lines in full, as the console has them before fitting."""
    [path] = list((run_dir / "log").glob(f"*_t0_s{session}.log"))
    return path.read_text()


def check_progress_lines(console: str, run_dir: Path, tag: str, df: pd.DataFrame) -> None:
    """One line per checkpoint, after the building line, in the console and in the session's
    log: the session tag once, the percentage done; in the log every column of the row that has
    a value (a NaN one left out), in the console the first of them by `progress_priority` that
    fit its width, in the row's order."""
    log = session_log(run_dir)
    for text in (console, log):
        lines = progress_lines(text)
        [building] = [line for line in text.splitlines() if "building env" in line]
        assert text.index(building) < text.index(lines[0])
        assert [line.split(" | ")[1].split(" eta ")[0] for line in lines] == [
            f"{100 * f // df['frame'].iloc[-1]}%" for f in df["frame"]
        ]
        assert all(line.count(tag) == 1 for line in lines)
    for line, (_, row) in zip(progress_lines(log), df.iterrows(), strict=True):
        assert list(progress_values(line)) == [k for k, v in row.items() if pd.notna(v)]
    for line, full in zip(progress_lines(console), progress_lines(log), strict=True):
        values, full_values = progress_values(line), progress_values(full)
        assert set(values) == set(progress_priority(list(full_values))[: len(values)])
        assert list(values.items()) == [(k, v) for k, v in full_values.items() if k in values]


def files_of(run_dir: Path) -> set[str]:
    """Every file a run folder holds, relative to it; TensorBoard's event files (their names
    carry the host and the time) by their folder."""
    return {
        str(p.parent.relative_to(run_dir) if "tfevents" in p.name else p.relative_to(run_dir))
        for p in run_dir.rglob("*")
        if p.is_file()
    }


def assert_same_run_files(a: Path, b: Path) -> None:
    """Two run folders of the same spec and seed hold the same files with the same data: every
    CSV (less its wall-clock columns), metrics JSON and spec (less run_info), the episodes, the
    model weights; graphs, logs and checkpoint states by name (their bytes carry times)."""
    names = files_of(a)
    assert names == files_of(b)
    for name in sorted(names):
        fa, fb = a / name, b / name
        if name.endswith(".csv"):
            df_a, df_b = pd.read_csv(fa), pd.read_csv(fb)
            timing = [c for c in TIMING_COLUMNS if c in df_a]
            pd.testing.assert_frame_equal(df_a.drop(columns=timing), df_b.drop(columns=timing))
        elif name.endswith("_spec.json"):
            ja, jb = json.loads(fa.read_text()), json.loads(fb.read_text())
            ja.pop("run_info", None), jb.pop("run_info", None)
            assert ja == jb, name
        elif name.endswith(".json"):
            ja, jb = json.loads(fa.read_text()), json.loads(fb.read_text())
            assert ja == pytest.approx(jb, nan_ok=True, rel=0, abs=0), name
        elif name.endswith("_model.pt"):
            ma = torch.load(fa, weights_only=True)
            mb = torch.load(fb, weights_only=True)
            assert_same_tensors(ma, mb, name)


def assert_same_tensors(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_tensors(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


def run_dirs(data_dir: Path) -> list[Path]:
    return sorted(p for p in data_dir.iterdir() if p.is_dir()) if data_dir.exists() else []


@pytest.fixture(autouse=True)
def _reset_logger() -> Iterator[None]:
    """A CLI call points loguru at its captured stderr; point it back at the real one afterwards."""
    yield
    log_setup.setup("WARNING")


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run with the working directory at tmp_path, so `data/` is local to the test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def log_messages() -> Iterator[list[str]]:
    """Loguru messages (WARNING and up) logged during the test."""
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="WARNING")
    yield messages
    with contextlib.suppress(ValueError):  # a CLI call's logger setup may have removed it
        logger.remove(sink)


# -- bad input: each case gives (spec_file, spec_name, -s sets) and a fragment of its one-line error
SPEC_NAME = "ppo_cartpole"
EXPLORE = {
    "name": "linear_decay",
    "start_val": 1.0,
    "end_val": 0.1,
    "start_step": 0,
    "end_step": 1000,
}
BAD_SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown_key": (
        {"agent.algorithm.clip_vlos": True},
        "agent.algorithm.clip_vlos: unknown key; did you mean clip_vloss?",
    ),
    "wrong_type": ({"env.num_envs": "four"}, "env.num_envs: expected int, got 'four'"),
    "negative_max_frame": ({"env.max_frame": -100}, "env.max_frame: must be > 0, got -100"),
    "zero_max_frame": ({"env.max_frame": 0}, "env.max_frame: must be > 0, got 0"),
    "unresolved_var": (
        {"env.name": "${env}"},
        f"{SPEC_NAME}.env.name: unresolved ${{env}}; pass it with -s env=VALUE",
    ),
    "unknown_env": (
        {"env.name": "CartPol-v1"},
        "env.name: 'CartPol-v1' is not a Gymnasium env id; did you mean CartPole-v1?",
    ),
    "minibatch_too_large": (
        {"agent.algorithm.minibatch_size": 1000},
        "agent.algorithm.minibatch_size: 1000 is larger than the batch of 64",
    ),
    "minibatch_of_one": (
        {"agent.algorithm.minibatch_size": 1},
        "agent.algorithm.minibatch_size: 1 gives one advantage per minibatch, which standardizing makes NaN (one sample has no std), skipping every update; use 2 or more, normalize_advantages percentile, or normalize_advs false",
    ),
    "epsilon_greedy_continuous": (
        {
            "env.name": "Pendulum-v1",
            "agent.algorithm.action_policy": "epsilon_greedy",
            "agent.algorithm.explore_var_spec": EXPLORE,
        },
        "agent.algorithm.action_policy: epsilon_greedy needs a discrete action space; Pendulum-v1 has a continuous (Box) one",
    ),
    "unknown_algorithm": (
        {"agent.algorithm.name": "PPOO"},
        "agent.algorithm.name: 'PPOO' is not available; did you mean PPO?",
    ),
}
BAD_FILES: dict[str, str] = {
    "missing_file": "spec file not found: ",
    "spec_not_in_file": f"spec 'ppo_cartpol' not in {{dir}}/good.json; did you mean {SPEC_NAME}?",
    "invalid_json": "{dir}/bad.json: invalid JSON at line 2 column 13: Expecting value",
    "invalid_yaml": "{dir}/bad.yaml: invalid YAML at line 3 column 4: expected ',' or ']'",
    "malformed_set": "-s max_frame: expected KEY=VALUE",
}
BAD_INPUTS = [*BAD_SPECS, *BAD_FILES]


def set_path(spec: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = spec
    for key in parents:
        node = node[key]
    node[leaf] = value


def bad_input(case: str, directory: Path) -> tuple[str, str, list[str], str]:
    """Write the files of a bad-input case; returns (spec_file, spec_name, sets, error fragment)."""
    if case in BAD_SPECS:
        changes, fragment = BAD_SPECS[case]
        spec = make_spec("ppo")
        for path, value in changes.items():
            set_path(spec, path, value)
        path = write_spec_file(directory / f"{case}.json", {SPEC_NAME: spec})
        return str(path), SPEC_NAME, [], fragment
    good = str(write_spec_file(directory / "good.json", {SPEC_NAME: make_spec("ppo")}))
    fragment = BAD_FILES[case].format(dir=directory)
    if case == "missing_file":
        missing = str(directory / "nope.json")
        return missing, SPEC_NAME, [], fragment + missing
    if case == "spec_not_in_file":
        return good, "ppo_cartpol", [], fragment
    if case == "invalid_json":
        return (
            str(write_spec_file(directory / "bad.json", '{"ppo_cartpole":\n  {"agent": }\n}')),
            SPEC_NAME,
            [],
            fragment,
        )
    if case == "invalid_yaml":
        return (
            str(write_spec_file(directory / "bad.yaml", "ppo_cartpole:\n  agent: [1, 2\nenv: {")),
            SPEC_NAME,
            [],
            fragment,
        )
    assert case == "malformed_set"
    return good, SPEC_NAME, ["max_frame"], fragment


# -- test tiers --------------------------------------------------------------------------------
# The slow families (markers registered in pyproject.toml): a test of any of them is also `slow`,
# so `pytest -m "not slow"` is the fast tier.
SLOW_FAMILIES = ("cli", "subprocess", "ray", "box2d", "mujoco", "atari", "playground")
# an env's family by the module of its entry point; classic control and the tests' own envs: none
ENV_FAMILIES = {
    "gymnasium.envs.box2d.": "box2d",
    "gymnasium.envs.mujoco.": "mujoco",
    "ale_py.": "atari",
}


def family_marks(*env_ids: str) -> list[pytest.MarkDecorator]:
    """The family markers of the envs a test builds (none for an id Gymnasium does not know)."""
    families = set()
    for env_id in env_ids:
        try:
            entry_point = str(gym.spec(env_id).entry_point)
        except gym.error.Error:
            continue
        families |= {f for prefix, f in ENV_FAMILIES.items() if entry_point.startswith(prefix)}
    return [getattr(pytest.mark, f) for f in sorted(families)]


# under xdist, the tests that use a shared run (a module- or session-scoped fixture that trains or
# starts Ray) go to one worker, the one that makes it: fixture name -> xdist_group
SHARED_RUNS = {
    "ray_address": "ray",
    "two_session_run": "two_sessions",
    "run_a": "control_runs",
    "run_eval": "control_runs",
    "atari_console_run": "atari_console",
    "video_run": "video_runs",
    "trained_runs": "trained_runs",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects and xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(family) for family in SLOW_FAMILIES):
            item.add_marker(pytest.mark.slow)
        for group in {SHARED_RUNS[f] for f in item.fixturenames if f in SHARED_RUNS}:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure() -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # one torch thread, as a session has (meta.num_threads): workers share the cores
        torch.set_num_threads(1)


# -- shared runs: one small run of a kind, for the tests that assert different things about it --
SLM_LAB = str(Path(sys.executable).parent / "slm-lab")  # the installed console script
TWO_SESSIONS = "ppo_cartpole"


class ConsoleRun(NamedTuple):
    spec_file: Path
    run_dir: Path
    proc: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def two_session_run(tmp_path_factory: pytest.TempPathFactory) -> ConsoleRun:
    """`slm-lab run ... train` of a PPO CartPole spec in a fresh process: 2 sessions in
    parallel (spawned processes), 400 frames each."""
    workdir = tmp_path_factory.mktemp("two_sessions")
    spec = make_spec("ppo", max_session=2, random_seed=7)
    spec_file = write_spec_file(workdir / "spec.json", {TWO_SESSIONS: spec})
    proc = subprocess.run(
        [SLM_LAB, "run", str(spec_file), TWO_SESSIONS, "train", "--log-level", "WARNING"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_dir] = run_dirs(workdir / "data")
    return ConsoleRun(spec_file, run_dir, proc)
