"""A user's own env through the real CLI: `module:EnvId`, every standard observation space,
a Discrete action space that does not start at 0, and a session that crashes."""

import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from conftest import invoke, make_spec, run_dirs, write_spec_file

from slm_lab import SPEC_DIR

SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
MODULE = "user_envs_for_test"  # a package the tests write to tmp_path, put on sys.path
# one env whose observation space is chosen by its `obs_kind` argument (an env kwarg in the spec)
ENV_SOURCE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    OBS = {
        "box_1d": spaces.Box(-1.0, 1.0, (3,), np.float32),
        "box_2d": spaces.Box(0, 255, (4, 5), np.uint8),
        "discrete": spaces.Discrete(5, start=2),
        "multi_discrete": spaces.MultiDiscrete([3, 4]),
        "multi_binary": spaces.MultiBinary(6),
        "dict": spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,)), "mode": spaces.Discrete(3)}),
        "tuple": spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, (3,)))),
        "sequence": spaces.Sequence(spaces.Discrete(2)),
    }


    class SpaceEnv(gym.Env):
        \"\"\"Reward 1 for action `target`; episodes of 10 steps; `crash_at` raises in step;
        `nan_reward` makes every reward NaN; `unbounded` gives it an unbounded Box action space
        (for `check` only: step compares actions with `target`).\"\"\"

        def __init__(
            self, obs_kind="box_1d", action_start=0, crash_at=None, nan_reward=False, unbounded=False
        ):
            self.observation_space = OBS[obs_kind]
            self.action_space = (
                spaces.Box(-np.inf, np.inf, (2,), np.float32)
                if unbounded
                else spaces.Discrete(3, start=action_start)
            )
            self.target = action_start + 1
            self.crash_at = crash_at
            self.nan_reward = nan_reward
            self.t = 0
            self.steps = 0

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.observation_space.sample(), {}

        def step(self, action):
            assert self.action_space.contains(action), action
            self.steps += 1
            if self.crash_at is not None and self.steps >= self.crash_at:
                raise RuntimeError(f"the user's env broke at step {self.steps}")
            self.t += 1
            reward = float("nan") if self.nan_reward else float(action == self.target)
            return self.observation_space.sample(), reward, False, self.t >= 10, {}


    gym.register(id="SpaceEnv-v0", entry_point=f"{__name__}:SpaceEnv")
    """
)


@pytest.fixture
def user_env(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The package on sys.path (as PYTHONPATH would put it); returns the env name to use."""
    (in_tmp / f"{MODULE}.py").write_text(ENV_SOURCE)
    monkeypatch.syspath_prepend(str(in_tmp))
    return f"{MODULE}:SpaceEnv-v0"


def user_spec(env_name: str, algo: str = "ppo", **env_kwargs: object) -> dict:
    spec = make_spec(algo, env_name, max_frame=200, num_envs=2, log_frequency=100)
    spec["env"].update(env_kwargs)
    return spec


@pytest.mark.cli
@pytest.mark.parametrize(
    "obs_kind", ["box_1d", "box_2d", "discrete", "multi_discrete", "multi_binary", "dict", "tuple"]
)
def test_observation_spaces_train(obs_kind: str, user_env: str, in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"user": user_spec(user_env, obs_kind=obs_kind)})
    assert invoke(["check", str(path)]).stdout == "ok: user\n"
    result = invoke(["run", str(path), "user", "dev", "--log-level", "WARNING"])
    assert result.exit_code == 0, result.stderr
    assert "trial_metrics: frame:2.00e+02" in result.stdout


def test_unflattenable_observation_space_is_refused(user_env: str, in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"user": user_spec(user_env, obs_kind="sequence")})
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: user: env.name: {user_env}: its Sequence observation space cannot be flattened "
        "into a vector; wrap the env in an observation wrapper that returns a Box"
    ]


@pytest.mark.cli
@pytest.mark.parametrize("algo", ["ppo", "random"])
def test_discrete_actions_that_do_not_start_at_zero(algo: str, user_env: str, in_tmp: Path) -> None:
    """The env asserts every action is in its space (3 actions from 5): acting and the random
    baseline both offset the agent's 0..2."""
    spec = user_spec(user_env, algo, action_start=5)
    path = write_spec_file(in_tmp / "s.json", {"user": spec})
    result = invoke(["run", str(path), "user", "dev", "--log-level", "WARNING"])
    assert result.exit_code == 0, result.stderr
    assert "trial_metrics: frame:2.00e+02" in result.stdout


@pytest.mark.parametrize("squasher", ["NormalTanh", "SoftActorCritic"])
def test_squashed_actions_on_an_unbounded_box_are_refused(
    squasher: str, user_env: str, in_tmp: Path
) -> None:
    """tanh squashes into the action space's bounds: an unbounded Box has none."""
    if squasher == "SoftActorCritic":
        shipped = json.loads((Path(SPEC_DIR) / "benchmark/sac/sac_pendulum.json").read_text())
        spec = shipped["sac_pendulum"]
        spec["env"] = {"name": user_env, "num_envs": 2, "max_frame": 200, "unbounded": True}
    else:
        spec = user_spec(user_env, unbounded=True)
        spec["agent"]["algorithm"]["action_pdtype"] = "NormalTanh"
    path = write_spec_file(in_tmp / "s.json", {"user": spec})
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    key, fix = (
        ("env.name", "")
        if squasher == "SoftActorCritic"
        else ("agent.algorithm.action_pdtype", " (use Normal)")
    )
    assert result.stderr.splitlines() == [
        f"error: user: {key}: {squasher} squashes actions into the action space's bounds; "
        f"{user_env}'s Box action space is unbounded{fix}"
    ]
    plain = user_spec(user_env, unbounded=True)  # PPO's Gaussian acts on an unbounded Box
    path = write_spec_file(in_tmp / "plain.json", {"user": plain})
    assert invoke(["check", str(path)]).stdout == "ok: user\n"


def test_unknown_module_is_one_line(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"user": user_spec("no_such_pkg_xyz:Env-v0")})
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: user: env.name: 'no_such_pkg_xyz:Env-v0': importing 'no_such_pkg_xyz' failed "
        "(ModuleNotFoundError: No module named 'no_such_pkg_xyz'); is it on PYTHONPATH?"
    ]


@pytest.mark.cli
def test_crashing_session_prints_its_last_line(user_env: str, in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"user": user_spec(user_env, crash_at=30)})
    result = invoke(["run", str(path), "user", "dev"])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no session of user completed: ")
    assert "RuntimeError: the user's env broke at step 30" in last
    assert "Traceback" not in result.stdout + result.stderr
    [run_dir] = run_dirs(in_tmp / "data")
    log = (run_dir / "log" / "user_t0_s0.log").read_text()
    assert "Traceback" in log and "RuntimeError: the user's env broke at step 30" in log


@pytest.mark.cli
def test_session_whose_every_step_is_non_finite_stops_with_one_line(
    user_env: str, in_tmp: Path
) -> None:
    """NaN rewards make every loss NaN: every step is skipped, so the nets never change; the
    session stops after MAX_SKIPPED_STEPS of them over MIN_SPANNED_CALLS training calls (at
    frame 256 of 2000: calls of 64 frames, 250 steps each) instead of acting on to
    max_frame. In `train`: `dev` stops at the first non-finite reward."""
    spec = user_spec(user_env, nan_reward=True)
    spec["env"]["max_frame"] = 2000
    spec["agent"]["algorithm"]["training_epoch"] = 125  # 2 minibatches each: 250 steps a call
    path = write_spec_file(in_tmp / "s.json", {"user": spec})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = invoke(["run", str(path), "user", "train", "--log-level", "WARNING"])
        gc.collect()
    # the failed session, run in this process, closed its rows and episodes files
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no session of user completed: ")
    assert (
        "TrainingDiverged: 1000 gradient steps in a row, over 4 training calls, had a "
        "non-finite loss or gradient (frame 256, loss nan)" in last
    )
    assert "Traceback" not in result.stdout + result.stderr
    [run_dir] = run_dirs(in_tmp / "data")
    log = (run_dir / "log" / "user_t0_s0.log").read_text()
    assert "Traceback" in log and "TrainingDiverged" in log


@pytest.mark.cli
@pytest.mark.subprocess
def test_module_env_in_parallel_sessions_through_console_script(tmp_path: Path) -> None:
    """`module:EnvId` from PYTHONPATH in a fresh process whose sessions are spawned processes."""
    (tmp_path / f"{MODULE}.py").write_text(ENV_SOURCE)
    spec = user_spec(f"{MODULE}:SpaceEnv-v0", obs_kind="dict")
    spec["meta"]["max_session"] = 2
    path = write_spec_file(tmp_path / "s.json", {"user": spec})
    proc = subprocess.run(
        [SLM_LAB, "run", str(path), "user", "train", "--log-level", "WARNING"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "trial_metrics: frame:2.00e+02" in proc.stdout
