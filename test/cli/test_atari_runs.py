"""Every shipped Atari spec through the CLI on Breakout, cheaply (2 envs, a tiny ConvNet, a few
hundred frames): the run folder's files, an episodes CSV of games (not lives), ppo_atari through
`uv run slm-lab`, its resume with the one line that says the games in progress restart, and the
bad Atari inputs that `check` and `run` refuse in one line."""

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ale_py
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import invoke, read_session_df, run_dirs, session_log

from slm_lab import ROOT_DIR
from slm_lab.env import state as env_state
from slm_lab.env.atari_backend import AtariVecEnv
from slm_lab.experiment import analysis
from slm_lab.spec import random_baseline

pytestmark = pytest.mark.atari

UV = os.environ.get("UV", "uv")  # the uv that runs the tests (uv run sets UV)
GAME = "ALE/Breakout-v5"  # a life goes every ~30 random steps
MAX_T = 100  # every game ends within the run: over, or cut at MAX_T steps
MAX_FRAME = 256
LOG_FREQUENCY = 128
SEED = "1"
RANDOM_BREAKOUT = 1.55  # Breakout's random baseline, given so no run computes it (20 games)
BASELINES = {  # the cache entries the runs read (see slm_lab.spec.random_baseline)
    random_baseline.baseline_key(GAME, kwargs, MAX_T): RANDOM_BREAKOUT
    for kwargs in ({}, {"continuous": True}, {"repeat_action_probability": 0.0})
}
SMALL = [  # every spec: 2 envs, a tiny ConvNet on the CPU, a row every LOG_FREQUENCY frames
    f"env={GAME}",
    "env.num_envs=2",
    f"env.max_t={MAX_T}",
    f"meta.log_frequency={LOG_FREQUENCY}",
    "agent.net.conv_hid_layers=[[8, 8, 8, 0, 1]]",
    "agent.net.fc_hid_layers=[16]",
    "agent.net.gpu=false",
]
PPO = [
    "agent.algorithm.time_horizon=32",
    "agent.algorithm.minibatch_size=32",
    "agent.algorithm.training_epoch=1",
]
REPLAY = [  # a small replay that starts training early, one update per training step
    "agent.algorithm.training_start_step=32",
    "agent.algorithm.training_frequency=16",
    "agent.algorithm.training_iter=1",
    "agent.memory.max_size=500",
]
DQN = [*REPLAY, "agent.algorithm.explore_var_spec.start_step=0"]
SPECS = {  # spec file, spec name: what makes it small
    ("ppo/ppo_atari.json", "ppo_atari"): PPO,
    ("ppo/ppo_atari.json", "ppo_atari_lam85"): PPO,
    ("ppo/ppo_atari.json", "ppo_atari_lam70"): PPO,
    ("ppo/ppo_atari.json", "ppo_atari_nosticky"): PPO,
    ("ppo/ppo_atari_continuous.json", "ppo_atari_continuous"): PPO,
    ("a2c/a2c_gae_atari.json", "a2c_gae_atari"): [],
    ("dqn/dqn_atari.json", "dqn_atari"): DQN,
    ("dqn/ddqn_per_atari.json", "ddqn_per_atari"): DQN,
    ("sac/sac_atari.json", "sac_atari"): [*REPLAY, "agent.memory.batch_size=32"],
}
BENCHMARK_DIR = ROOT_DIR / "slm_lab" / "spec" / "benchmark"
CONSOLE_SPEC = ("ppo/ppo_atari.json", "ppo_atari")  # the one run through `uv run slm-lab`
RESTART_NOTE = "restarts the episodes in progress"  # what a run says once a resume loses


def run_args(
    spec_file: str, name: str, data_dir: Path, spec_dir: str | Path = BENCHMARK_DIR
) -> list[str]:
    """`run` of a shipped Atari spec, small, as the README writes a run."""
    sets = [arg for s in [*SMALL, *SPECS[spec_file, name]] for arg in ("-s", s)]
    return [
        "run",
        *sets,
        "--max-frame",
        str(MAX_FRAME),
        "--sessions",
        "1",
        "--seed",
        SEED,
        "--data-dir",
        str(data_dir),
        f"{spec_dir}/{spec_file}",
        name,
        "train",
    ]


def write_baselines(cache_home: Path) -> None:
    path = cache_home / "slm_lab" / "random_baseline.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(BASELINES))


def episodes_df(run_dir: Path) -> pd.DataFrame:
    [path] = list((run_dir / "info").glob("*_t0_s0_episodes.csv"))
    return pd.read_csv(path)


def assert_run_files(run_dir: Path, rows: list[int]) -> pd.DataFrame:
    """A finished run's metrics rows at `rows` frames, its episodes CSV and checkpoint files;
    returns the episodes."""
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == rows
    assert df["loss"].notna().all()  # the agent trained before each row
    episodes = episodes_df(run_dir)
    assert list(episodes.columns) == ["frame", "episode", "return", "length"]
    assert episodes["episode"].tolist() == list(range(len(episodes)))
    assert df["epi"].iloc[-1] == len(episodes)
    model = {p.name.split("_t0_s0_")[1] for p in (run_dir / "model").iterdir()}
    assert {"ckpt-latest_model.pt", "ckpt-latest_state.pt"} <= model
    return episodes


# -- every spec, in-process --------------------------------------------------------------------
@pytest.fixture
def no_graphs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In-process runs draw empty graphs (matplotlib's seconds a run, which no Atari code
    changes; the console run draws them) and read Breakout's random baseline from a cache."""
    monkeypatch.setattr(analysis, "plot_session", lambda table, title, path: path.touch())
    monkeypatch.setattr(analysis, "plot_trial", lambda tables, title, path: path.touch())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    write_baselines(tmp_path / "cache")


@pytest.fixture
def game_overs(no_graphs: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The game overs and lost lives of the ALE envs the test's runs step, counted from ALE's
    own info."""
    counts = {"games": 0, "lives": 0}
    terminals = AtariVecEnv._terminals

    def counting(
        self: AtariVecEnv, terminateds: np.ndarray, dones: np.ndarray, info: dict[str, Any]
    ) -> np.ndarray:
        counts["games"] += int(dones.sum())
        counts["lives"] += int(((info["lives"] < self._lives) & ~dones).sum())
        return terminals(self, terminateds, dones, info)

    monkeypatch.setattr(AtariVecEnv, "_terminals", counting)
    return counts


@pytest.mark.cli
@pytest.mark.parametrize(("spec_file", "name"), [s for s in SPECS if s != CONSOLE_SPEC])
def test_each_atari_spec_trains_and_writes_games_as_episodes(
    spec_file: str, name: str, game_overs: dict[str, int], tmp_path: Path
) -> None:
    result = invoke(run_args(spec_file, name, tmp_path / "data"))
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(tmp_path / "data")
    episodes = assert_run_files(run_dir, [LOG_FREQUENCY, MAX_FRAME])
    # one row a game (every life's points), none a lost life
    assert game_overs["games"] > 0 and game_overs["lives"] > game_overs["games"]
    assert len(episodes) == game_overs["games"]
    assert (episodes["length"] > 0).all() and episodes["length"].sum() <= MAX_FRAME


# -- through `uv run slm-lab`, then resumed ------------------------------------------------------
@pytest.fixture(scope="module")
def atari_console_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess]:
    """ppo_atari as a user runs it: `uv run slm-lab run -s ... SPEC NAME train`."""
    workdir = tmp_path_factory.mktemp("atari_console")
    write_baselines(workdir / "cache")
    proc = subprocess.run(
        [
            UV,
            "run",
            "slm-lab",
            *run_args(*CONSOLE_SPEC, workdir / "data", "slm_lab/spec/benchmark"),
        ],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1", "XDG_CACHE_HOME": str(workdir / "cache")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_dir] = run_dirs(workdir / "data")
    return run_dir, proc


@pytest.mark.cli
@pytest.mark.subprocess
def test_ppo_atari_runs_through_uv_run(
    atari_console_run: tuple[Path, subprocess.CompletedProcess],
) -> None:
    run_dir, proc = atari_console_run
    assert proc.stdout.startswith("trial_metrics: frame:2.56e+02 | ")
    assert "Traceback" not in proc.stderr and "Powered by Stella" not in proc.stderr
    assert "WARNING" not in proc.stderr
    [note] = [line for line in proc.stderr.splitlines() if RESTART_NOTE in line]
    assert note.endswith(f"| {env_state.resume_note(GAME)}")
    assert_run_files(run_dir, [LOG_FREQUENCY, MAX_FRAME])
    assert len(list((run_dir / "graph").glob("*_t0_s0_session_graph.png"))) == 1


@pytest.mark.cli
@pytest.mark.subprocess
def test_a_resumed_atari_run_goes_on_from_its_frame_with_new_games(
    atari_console_run: tuple[Path, subprocess.CompletedProcess],
    tmp_path: Path,
    no_graphs: None,
) -> None:
    run_dir = tmp_path / atari_console_run[0].name
    shutil.copytree(atari_console_run[0], run_dir)
    before = episodes_df(run_dir)
    more = MAX_FRAME + 2 * LOG_FREQUENCY  # each env's restarted game reaches MAX_T
    result = invoke(["run", f"train@{run_dir}", "--max-frame", str(more)])
    assert result.exit_code == 0, result.stderr[-3000:]
    # the resume says once that the games in progress restart; the session's log has both runs
    [resumed] = [line for line in result.stderr.splitlines() if "resumed at frame" in line]
    assert resumed.endswith(
        f"resumed at frame {MAX_FRAME} (the simulator's state was not saved: the episodes in progress restart)"
    )
    assert RESTART_NOTE not in result.stderr  # the resume line says it: no second line
    assert session_log(run_dir).count(RESTART_NOTE) == 1  # the first run's
    df = read_session_df(run_dir)
    rows = list(range(LOG_FREQUENCY, more + 1, LOG_FREQUENCY))
    assert df["frame"].tolist() == rows
    assert df["t"].tolist() == [f // 2 for f in rows]  # the clock went on
    episodes = assert_run_files(run_dir, rows)
    pd.testing.assert_frame_equal(episodes.iloc[: len(before)], before)  # kept
    # then new games, each started at the resume or later
    new = episodes.iloc[len(before) :]
    assert len(new) >= 2 and (new["length"] <= (new["frame"] - MAX_FRAME) // 2).all()


# -- bad input ---------------------------------------------------------------------------------
PPO_ATARI = ("benchmark/ppo/ppo_atari.json", "ppo_atari")
DQN_ATARI = ("benchmark/dqn/dqn_atari.json", "dqn_atari")
PONG = "env=ALE/Pong-v5"
BAD_ATARI: dict[str, tuple[tuple[str, str], list[str], str]] = {  # spec, -s sets: its one line
    "unknown_game": (
        PPO_ATARI,
        ["env=ALE/Pongg-v5"],
        "env.name: 'ALE/Pongg-v5' is not an ALE v5 game; did you mean ALE/Pong-v5?",
    ),
    "legacy_id": (
        PPO_ATARI,
        ["env=PongNoFrameskip-v4"],
        "env.name: PongNoFrameskip-v4: a legacy Atari id; SLM Lab runs ALE v5: use ALE/Pong-v5 "
        "(frameskip 4 and sticky actions 0.25 by default; env.frameskip and "
        "env.repeat_action_probability set them)",
    ),
    "game_without_namespace": (  # named before life_loss_info, which ppo_atari sets
        PPO_ATARI,
        ["env=Pong-v5"],
        "env.name: Pong-v5: an Atari game's v5 id is namespaced: use ALE/Pong-v5",
    ),
    "mistyped_id_with_life_loss_info": (
        PPO_ATARI,
        ["env=CartPol-v1"],
        "env.name: 'CartPol-v1' is not a Gymnasium env id; did you mean CartPole-v1?",
    ),
    "unknown_ale_option": (
        PPO_ATARI,
        [PONG, "env.frame_skip=4"],
        "env.frame_skip: unknown key (not an SLM Lab env key, nor an option of ALE v5); did you "
        "mean frameskip?",
    ),
    "ale_reward_clipping": (
        PPO_ATARI,
        [PONG, "env.reward_clipping=true"],
        "env.reward_clipping: SLM Lab sets this ALE option itself; use env.clip_reward (false: "
        "unclipped)",
    ),
    "ale_episodic_life": (
        PPO_ATARI,
        [PONG, "env.episodic_life=true"],
        "env.episodic_life: SLM Lab sets this ALE option itself; use env.life_loss_info",
    ),
    "next_step_autoreset": (
        PPO_ATARI,
        [PONG, "env.autoreset_mode=NextStep"],
        "env.autoreset_mode: SLM Lab sets this ALE option itself",
    ),
    "action_repeat": (
        PPO_ATARI,
        [PONG, "env.action_repeat=4"],
        "env.action_repeat: ALE repeats actions itself; set env.frameskip instead (4 by default)",
    ),
    "normalize_obs": (
        PPO_ATARI,
        [PONG, "env.normalize_obs=true"],
        "env.normalize_obs: Atari frames are uint8 pixels, scaled by the net (agent.net.normalize:"
        " true), not normalized by the env",
    ),
    "convnet_on_ram": (
        PPO_ATARI,
        [PONG, "env.obs_type=ram"],
        "agent.net.type: ConvNet needs an image observation (C, H, W); ALE/Pong-v5 gives shape "
        "(128,)",
    ),
    "frame_option_on_ram": (
        PPO_ATARI,
        [PONG, "env.obs_type=ram", "env.stack_num=2"],
        "env.stack_num: an option of the frames; obs_type ram gives the console's 128 bytes of "
        "RAM instead",
    ),
    "life_loss_info_off_atari": (
        PPO_ATARI,
        ["env=CartPole-v1"],
        "env.life_loss_info: CartPole-v1 is not an Atari game (ALE/<Game>-v5); only Atari envs "
        "have lives",
    ),
    "continuous_dqn": (
        DQN_ATARI,
        [PONG, "env.continuous=true"],
        "agent.algorithm.name: DQN needs a discrete action space; ALE/Pong-v5 has a continuous "
        "(Box) one",
    ),
}


@pytest.fixture
def fresh_ale_logger() -> Iterator[None]:
    """ALE's logger as a fresh process has it (a native env sets it to errors only, for good)."""
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Info)
    yield
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


@pytest.mark.parametrize("case", BAD_ATARI)
def test_check_refuses_a_bad_atari_spec_in_one_line(
    case: str, fresh_ale_logger: None, capfd: pytest.CaptureFixture[str]
) -> None:
    (spec_file, name), sets, line = BAD_ATARI[case]
    result = invoke(["check", spec_file, name, *(arg for s in sets for arg in ("-s", s))])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"error: {name}: {line}"]
    assert capfd.readouterr() == ("", "")  # nothing from ALE itself (its banner) either


def test_run_refuses_a_legacy_atari_id_before_making_a_run_folder(tmp_path: Path) -> None:
    spec_file, name = PPO_ATARI
    data = tmp_path / "data"
    result = invoke(
        ["run", "-s", "env=BreakoutNoFrameskip-v4", "--data-dir", str(data), spec_file, name]
    )
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "error: env.name: BreakoutNoFrameskip-v4: a legacy Atari id; SLM Lab runs ALE v5: use "
        "ALE/Breakout-v5 ("
    )
    assert not data.exists()


def tensors_in(state: Any) -> list[torch.Tensor]:
    if torch.is_tensor(state):
        return [state]
    return [t for v in state.values() for t in tensors_in(v)] if isinstance(state, dict) else []


@pytest.mark.cli
@pytest.mark.parametrize(
    ("spec_file", "name", "net"),
    [
        ("ppo/ppo_atari.json", "ppo_atari", "ConvNet"),  # shared actor-critic
        ("dqn/ddqn_per_atari.json", "ddqn_per_atari", "DuelingConvNet"),  # with its target net
    ],
)
def test_bf16_mixed_trains_saves_and_resumes(
    spec_file: str, name: str, net: str, no_graphs: None, tmp_path: Path
) -> None:
    """`agent.net.precision: bf16-mixed` through the CLI: it trains, says its precision once,
    saves float32 weights, and a resume goes on from them."""
    args = run_args(spec_file, name, tmp_path / "data")
    sets = ["-s", "agent.net.precision=bf16-mixed", "-s", f"agent.net.type={net}"]
    result = invoke([*args[:1], *sets, *args[1:]])
    assert result.exit_code == 0, result.stderr[-3000:]
    [said] = [line for line in result.stderr.splitlines() if "precision bf16-mixed" in line]
    assert "native bfloat16 on cpu" in said or "emulated and slower than float32" in said
    [run_dir] = run_dirs(tmp_path / "data")
    [model] = (run_dir / "model").glob("*_t0_s0_ckpt-latest_model.pt")
    tensors = tensors_in(torch.load(model, weights_only=False))
    assert tensors and all(t.dtype == torch.float32 for t in tensors if t.is_floating_point())
    more = MAX_FRAME + 2 * LOG_FREQUENCY
    result = invoke(["run", f"train@{run_dir}", "--max-frame", str(more)])
    assert result.exit_code == 0, result.stderr[-3000:]
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == list(range(LOG_FREQUENCY, more + 1, LOG_FREQUENCY))
    assert np.isfinite(df["loss"]).all()
