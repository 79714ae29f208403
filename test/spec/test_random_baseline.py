"""The random policy's baseline follows the env as the spec sets it up: max_t and action_repeat."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load, make_spec

from slm_lab.experiment import session as session_module
from slm_lab.experiment.task import SessionTask
from slm_lab.spec import random_baseline

MAX_T = 10
CARTPOLE_TABLE = 23.68  # the committed table's CartPole-v1 (full-length episodes)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Computed baselines go to a cache under tmp_path, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "slm_lab" / "random_baseline.json"


def test_default_settings_keep_the_committed_keys() -> None:
    table = json.loads(random_baseline.TABLE_PATH.read_text())
    assert random_baseline.baseline_key("CartPole-v1", {}) in table
    assert random_baseline.baseline_key("LunarLander-v3", {"continuous": True}) in table
    assert random_baseline.baseline_key("CartPole-v1", {}, None, 1) == "CartPole-v1"
    assert random_baseline.get("CartPole-v1", {}) == CARTPOLE_TABLE


def test_max_t_caps_the_baseline(cache_dir: Path) -> None:
    capped = random_baseline.get("CartPole-v1", {}, max_t=MAX_T)
    assert capped <= MAX_T  # a reward of 1 per step, at most MAX_T steps
    assert capped != CARTPOLE_TABLE
    assert json.loads(cache_dir.read_text()) == {'CartPole-v1{"max_t": 10}': capped}


def test_action_repeat_changes_the_baseline(cache_dir: Path) -> None:
    repeated = random_baseline.get("CartPole-v1", {}, action_repeat=4)
    assert repeated != CARTPOLE_TABLE
    assert random_baseline.get("CartPole-v1", {}, max_t=MAX_T, action_repeat=4) <= MAX_T
    assert set(json.loads(cache_dir.read_text())) == {
        'CartPole-v1{"action_repeat": 4}',
        'CartPole-v1{"action_repeat": 4, "max_t": 10}',
    }


def test_session_baseline_follows_the_env_spec(tmp_path: Path) -> None:
    spec = {**make_spec("random", max_t=MAX_T), "name": "random_cartpole"}
    session = session_module.Session(SessionTask(load(spec), tmp_path, 0, 0))
    assert session.baseline == random_baseline.get("CartPole-v1", {}, max_t=MAX_T)
    assert session.baseline <= MAX_T


@pytest.mark.subprocess
def test_imports_without_torch() -> None:
    """Cheap to import: no torch."""
    code = "import sys, slm_lab.spec.random_baseline; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_ale_v5_game_has_its_baseline_from_the_ale_table(cache_dir: Path) -> None:
    """The 104 ALE v5 games come from SLM Lab v5's measured table, with its source; settings
    that only change speed (ALE's threads) keep a game's key, others (sticky actions) do not."""
    ale = json.loads(random_baseline.ALE_TABLE_PATH.read_text())
    assert "100 episodes" in ale["source"] and len(ale["games"]) == 104
    assert random_baseline.get("ALE/Pong-v5") == ale["games"]["ALE/Pong-v5"]["mean"] == -20.25
    assert random_baseline.get("ALE/Breakout-v5", {"num_threads": 1}) == 1.21
    assert random_baseline.baseline_key("ALE/Pong-v5", {"repeat_action_probability": 0.0}) == (
        'ALE/Pong-v5{"repeat_action_probability": 0.0}'
    )
    assert not cache_dir.exists()  # nothing computed
