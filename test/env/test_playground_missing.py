"""Without the `playground` dependency group, a `playground/<Env>` id gets one line naming the
command that installs it (the fast tier: nothing of JAX is imported)."""

import importlib.util
import sys

import pytest
from conftest import invoke

from slm_lab import SPEC_DIR

SPEC_FILE = SPEC_DIR / "benchmark" / "ppo" / "ppo_playground.yaml"
LINE = (
    "error: ppo_playground: env.name: playground/CartpoleBalance needs MuJoCo Playground, which "
    "is not installed; install it with: uv sync --group playground\n"
)


@pytest.fixture
def no_playground(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mujoco_playground" else find_spec(name, *a),
    )


def test_a_playground_id_without_the_group_names_the_install_command(no_playground: None) -> None:
    result = invoke(
        [
            "check",
            str(SPEC_FILE),
            "ppo_playground",
            "-s",
            "env=playground/CartpoleBalance",
            "-s",
            "max_frame=1e6",
        ]
    )
    assert result.exit_code == 2
    assert result.stderr == LINE


def test_validation_of_a_playground_spec_loads_no_jax() -> None:
    """`check` reads the committed table of Playground's envs: it imports neither JAX nor
    Playground, installed or not."""
    before = {m for m in sys.modules if m.split(".")[0] in ("jax", "mujoco_playground")}
    result = invoke(
        [
            "check",
            str(SPEC_FILE),
            "ppo_playground",
            "-s",
            "env=playground/CheetahRun",
            "-s",
            "max_frame=1e6",
        ]
    )
    if importlib.util.find_spec("mujoco_playground") is None:
        assert "uv sync --group playground" in result.stderr
    else:
        assert result.exit_code == 0, result.stderr
    after = {m for m in sys.modules if m.split(".")[0] in ("jax", "mujoco_playground")}
    assert after == before
