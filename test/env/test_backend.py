"""The env backend seam: the registry picks a backend by env id, and a backend that is not
built on Gymnasium's VectorEnv (the numpy corridor) trains, checkpoints and resumes through the
CLI as a Gymnasium env does."""

import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from conftest import (
    assert_same_run_files,
    invoke,
    make_spec,
    read_session_df,
    run_dirs,
    write_spec_file,
)
from numpy_backend import ENV_ID, FAMILY, LENGTH

from slm_lab.env import registry
from slm_lab.env.clock import Clock
from slm_lab.env.config import EnvConfig
from slm_lab.lib.config import SpecError, parse

DQN_ALGORITHM = {
    "name": "DQN",
    "gamma": 0.9,
    "action_pdtype": "Argmax",
    "action_policy": "epsilon_greedy",
    "explore_var_spec": {
        "name": "linear_decay",
        "start_val": 1.0,
        "end_val": 0.05,
        "start_step": 0,
        "end_step": 1000,
    },
    "training_batch_iter": 1,
    "training_iter": 1,
    "training_frequency": 4,
    "training_start_step": 64,
}
DQN_MEMORY = {"name": "Replay", "batch_size": 32, "max_size": 2000, "use_cer": False}


@pytest.fixture
def corridor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy backend's family registered for the test (and the sessions it starts)."""
    monkeypatch.setattr(registry, "FAMILIES", [FAMILY, *registry.FAMILIES])


def corridor_spec(algo: str, max_frame: int) -> dict:
    spec = make_spec("ppo" if algo == "ppo" else "a2c_gae", max_frame=max_frame, max_session=2)
    spec["env"] = {"name": ENV_ID, "num_envs": 4, "max_frame": max_frame}
    spec["meta"]["log_frequency"] = max_frame // 4
    if algo == "dqn":
        spec["agent"]["algorithm"] = dict(DQN_ALGORITHM)
        spec["agent"]["memory"] = dict(DQN_MEMORY)
        spec["agent"]["net"] = {
            "type": "MLPNet",
            "hid_layers": [32],
            "hid_layers_activation": "relu",
            "loss_spec": {"name": "SmoothL1Loss"},
            "optim_spec": {"name": "Adam", "lr": 1e-2},
            "update_type": "replace",
            "update_frequency": 100,
            "gpu": False,
        }
    return spec


@pytest.mark.parametrize(
    ("env_id", "family"),
    [
        ("CartPole-v1", "Gymnasium"),
        ("my_envs:GridWorld-v0", "Gymnasium"),
        ("Foo-v0", "Gymnasium"),  # not an Atari game: Gymnasium tells it is not registered
        ("ALE/Pong-v5", "Atari (ALE)"),
        ("PongNoFrameskip-v4", "legacy Atari"),
        ("VideoPinball-v0", "legacy Atari"),
        ("BreakoutDeterministic-v4", "legacy Atari"),
        ("Pong-v5", "Atari without its namespace"),
        ("MontezumaRevenge-v5", "Atari without its namespace"),
        ("Pong-v1", "Gymnasium"),  # no such id either way: Gymnasium says it is not registered
        ("playground/CartpoleBalance", "MuJoCo Playground"),
    ],
)
def test_the_registry_picks_a_family_by_env_id(env_id: str, family: str) -> None:
    assert registry.family_of(env_id).name == family


def test_every_gymnasium_id_has_a_backend_and_a_v5_game_without_its_namespace_is_named() -> None:
    import ale_py

    gym.register_envs(ale_py)
    ours = [k for k, v in gym.registry.items() if "ale_py" not in str(v.entry_point)]
    assert [k for k in ours if registry.family_of(k).module is None] == []
    ids = [k[len("ALE/") :] for k in gym.registry if k.startswith("ALE/") and k.endswith("-v5")]
    # Gymnasium's toy text has Blackjack-v1: Blackjack-v5 is a typo of that
    games = sorted(k.removesuffix("-v5") for k in ids if k != "Blackjack-v5")
    assert sorted(registry.ATARI_GAMES) == games  # no more, no fewer, spelled as ALE spells them
    assert registry.family_of("Blackjack-v5").name == "Gymnasium"
    for game in games:
        line = f"env.name: {game}-v5: an Atari game's v5 id is namespaced: use ALE/{game}-v5"
        with pytest.raises(SpecError, match=f"^{re.escape(line)}$"):
            registry.backend_module(f"{game}-v5")
        legacy = f"{game}NoFrameskip-v4"
        with pytest.raises(SpecError, match=re.escape(f": use ALE/{game}-v5 (")):
            registry.backend_module(legacy)


def test_a_family_not_available_gives_its_reason() -> None:
    with pytest.raises(
        SpecError,
        match=r"^env.name: Pong-v5: an Atari game's v5 id is namespaced: use ALE/Pong-v5$",
    ):
        registry.backend_module("Pong-v5")


def test_a_registered_family_claims_its_ids(corridor: None) -> None:
    module = registry.backend_module(ENV_ID)
    config = parse(EnvConfig, {"name": ENV_ID, "num_envs": 3, "max_frame": 100}, "env")
    env = module.make(config, 0, Clock(100, 3), 0.99)
    obs = env.reset()
    assert obs.shape == (3, LENGTH) and env.info.num_envs == 3
    t = env.step(np.ones(3, dtype=int))
    assert env.clock.frame == 3 and t.rewards.dtype == np.float32
    assert registry.family_of("CartPole-v1").name == "Gymnasium"  # the catch-all still follows


@pytest.mark.cli
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_ppo_and_dqn_train_on_a_numpy_backend_through_the_cli(
    algo: str, corridor: None, in_tmp: Path
) -> None:
    max_frame = 4000
    spec_file = write_spec_file(in_tmp / "corridor.json", {algo: corridor_spec(algo, max_frame)})
    result = invoke(["run", str(spec_file), algo, "train"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    for s in range(2):
        df = read_session_df(run_dir, s)
        assert df["frame"].iloc[-1] == max_frame and df["opt_step"].iloc[-1] > 0
        # random actions average 0.19 (random_baseline.compute, 2000 episodes); trained, the
        # agent walks right: 3 steps, a return of 1 + 2 x -0.05
        assert df["total_reward"].iloc[-1] > 0.5, df["total_reward"].tolist()
    episodes = pd.read_csv(run_dir / "info" / f"{algo}_t0_s0_episodes.csv")
    assert episodes["episode"].tolist() == list(range(len(episodes)))
    metrics = json.loads((run_dir / f"{algo}_t0_trial_metrics.json").read_text())
    assert metrics["frame"] == max_frame


@pytest.mark.cli
def test_a_numpy_backend_resumes_exactly(corridor: None, in_tmp: Path) -> None:
    spec = corridor_spec("ppo", 2000)
    spec_file = write_spec_file(in_tmp / "corridor.json", {"ppo": spec})
    assert invoke(["run", str(spec_file), "ppo", "dev", "--max-frame", "1000"]).exit_code == 0
    [short] = run_dirs(in_tmp / "data")
    extended = invoke(["run", f"train@{short}", "--max-frame", "2000"])
    assert extended.exit_code == 0, extended.stderr[-3000:]
    assert "resumed at frame 1000\n" in extended.stderr
    assert invoke(["run", str(spec_file), "ppo", "dev"]).exit_code == 0
    whole = next(d for d in run_dirs(in_tmp / "data") if d != short)
    assert_same_run_files(whole, short)


MY_ENVS = """
import gymnasium as gym

gym.register("GridWorld-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
"""


@pytest.mark.parametrize(
    ("env_name", "line"),
    [
        ("Qzxjw-v0", "error: u: env.name: 'Qzxjw-v0' is not a Gymnasium env id"),
        (
            "my_envs:GridWorl-v0",
            "error: u: env.name: 'my_envs:GridWorl-v0' is not a Gymnasium env id; did you mean my_envs:GridWorld-v0?",
        ),
    ],
)
def test_an_unknown_env_id_is_told_so_with_the_nearest_id(
    env_name: str, line: str, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_tmp / "my_envs.py").write_text(MY_ENVS)
    monkeypatch.syspath_prepend(str(in_tmp))
    spec = make_spec("ppo")
    spec["env"]["name"] = env_name
    result = invoke(["check", str(write_spec_file(in_tmp / "u.json", {"u": spec}))])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [line]


def test_an_env_that_needs_a_missing_package_is_refused_in_one_line(in_tmp: Path) -> None:
    """As Gymnasium's jax-based phys2d/ and tabular/ envs are without jax."""
    if "NeedsMissing-v0" not in gym.registry:
        gym.register("NeedsMissing-v0", entry_point="slm_lab_no_such_package:Env")
    spec = make_spec("ppo")
    spec["env"]["name"] = "NeedsMissing-v0"
    result = invoke(["run", str(write_spec_file(in_tmp / "m.json", {"m": spec})), "m", "dev"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: env.name: 'NeedsMissing-v0' needs a package that is not installed: "
        "No module named 'slm_lab_no_such_package'\n"
    )
    assert not (in_tmp / "data").exists()
