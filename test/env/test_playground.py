"""The MuJoCo Playground backend: its contract, a video's frames, every DM Control env, v5's
specs, an offline Menagerie env, exact resume and runs through the CLI. Skipped without the `playground` group
(`uv sync --group playground`); its tests of the missing group are in test_playground_missing.py.

Every env steps 64 envs; a compiled step is cached per process (and on disk, in JAX's
persistent compilation cache), so each env and shape compiles once here.
"""

import contextlib
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_playground")

import pandas as pd  # noqa: E402
from conftest import UV, assert_same_run_files, invoke, read_session_df, run_dirs  # noqa: E402

from slm_lab import ROOT_DIR, SPEC_DIR  # noqa: E402
from slm_lab.agent.algorithm.base import Algorithm  # noqa: E402
from slm_lab.env import playground_backend as pb  # noqa: E402
from slm_lab.env.clock import Clock  # noqa: E402
from slm_lab.env.config import EnvConfig  # noqa: E402
from slm_lab.experiment import checkpointer, stop  # noqa: E402
from slm_lab.lib.config import SpecError, parse  # noqa: E402
from slm_lab.spec import random_baseline  # noqa: E402

pytestmark = pytest.mark.playground

NUM_ENVS = 64
SPEC_FILE = SPEC_DIR / "benchmark" / "ppo" / "ppo_playground.yaml"
DM_CONTROL = sorted(k for k, v in pb.table()["envs"].items() if v is not None)
# v5's specs, each with an env of the kind it was tuned for
SPEC_ENVS = {
    "ppo_playground": "CartpoleBalance",
    "ppo_playground_fingerspin": "FingerSpin",
    "ppo_playground_pendulum": "PendulumSwingup",
    "ppo_playground_vnorm": "PointMass",
    "ppo_playground_humanoid": "HumanoidWalk",
    "ppo_playground_rs10": "CheetahRun",
    "ppo_playground_constlr": "ReacherEasy",
    "ppo_playground_vnorm_constlr": "AcrobotSwingup",
    "ppo_playground_constlr_clip03": "WalkerRun",
    "ppo_playground_vnorm_constlr_clip03": "FishSwim",
    "ppo_playground_brax_policy": "SwimmerSwimmer6",
    "ppo_playground_loco": "BarkourJoystick",
    "ppo_playground_loco_go1": "Go1JoystickFlatTerrain",
    "ppo_playground_loco_precise": "G1JoystickFlatTerrain",
    "ppo_playground_manip": "PandaPickCube",
    "ppo_playground_manip_aloha": "AlohaHandOver",
    "ppo_playground_manip_aloha_peg": "AlohaSinglePegInsertion",
    "ppo_playground_manip_dexterous": "LeapCubeReorient",
    "ppo_playground_manip_robotiq": "PandaRobotiqPushCube",
}
# a short run of v5's default spec: 64 envs x 30 steps a batch, rows every 960 frames
RUN_SETS = [
    "env=playground/CartpoleBalance",
    "max_frame=5760",
    "env.num_envs=64",
    "env.max_t=50",
    "agent.algorithm.minibatch_size=960",
    "agent.algorithm.training_epoch=2",
    "meta.log_frequency=960",
    "meta.eval_frequency=960",
    "meta.random_seed=7",
]


def config(name: str, **keys: object) -> EnvConfig:
    return parse(
        EnvConfig,
        {"name": f"playground/{name}", "max_frame": 10**6, "num_envs": NUM_ENVS, **keys},
        "env",
    )


def make(
    name: str, seed: int = 1, render_mode: str | None = None, **keys: object
) -> pb.PlaygroundVecEnv:
    cfg = config(name, **keys)
    return pb.make(cfg, seed, Clock(cfg.max_frame, cfg.num_envs), 0.99, render_mode)


def run_args(name: str, mode: str, *sets: str) -> list[str]:
    return ["run", str(SPEC_FILE), name, mode, *(a for s in [*RUN_SETS, *sets] for a in ("-s", s))]


# -- the backend's contract ----------------------------------------------------------------
def test_a_time_limit_keeps_the_true_successor_and_counts_the_episode() -> None:
    """At max_t every env is truncated, not terminated; next_obs is the state the step reached
    (what an env without that limit reaches with the same actions), the agent's next obs the
    reset one; the returns are the env's own rewards (before reward_scale); the clock ticks."""
    max_t = 20
    cut = make("CartpoleBalance", max_t=max_t, reward_scale=2.0)
    uncut = make("CartpoleBalance", max_t=1000)
    cut.record_episodes()
    cut.reset(), uncut.reset()
    rng = np.random.default_rng(0)
    rewards = np.zeros(NUM_ENVS)
    for step in range(1, max_t + 1):
        actions = rng.uniform(-1, 1, (NUM_ENVS, 1)).astype(np.float32)
        t, u = cut.step(actions), uncut.step(actions)
        rewards += t.rewards
        np.testing.assert_array_equal(t.next_obs, u.next_obs)
        assert not t.terminateds.any()
        assert t.truncateds.all() == (step == max_t) and t.truncateds.any() == (step == max_t)
    assert not np.allclose(cut.obs, t.next_obs)  # the reset observation, for the next action
    assert cut.clock.frame == max_t * NUM_ENVS and cut.clock.epi == NUM_ENVS
    [finished] = cut.pop_episodes()
    np.testing.assert_allclose(finished.returns, rewards / 2.0, rtol=1e-5)
    assert finished.lengths.tolist() == [max_t] * NUM_ENVS
    assert cut.total_reward == pytest.approx(float(np.mean(rewards / 2.0)), rel=1e-5)


@pytest.mark.parametrize("full_reset", [False, True])
def test_a_finished_env_restarts_from_its_first_state_unless_full_reset(full_reset: bool) -> None:
    """Playground's auto-reset returns a finished env to the state it first started from
    (Brax's default) or, with env.full_reset, to a fresh random one; the final observation is
    kept either way."""
    max_t = 5
    env = make("CartpoleBalance", max_t=max_t, full_reset=full_reset)
    uncut = make("CartpoleBalance", max_t=1000)
    first = env.reset().copy()
    uncut.reset()
    for _ in range(max_t):
        actions = env.info.sample_actions()
        t, u = env.step(actions), uncut.step(actions)
    np.testing.assert_array_equal(t.next_obs, u.next_obs)
    assert t.truncateds.all()
    assert np.array_equal(env.obs, first) != full_reset


def test_terminated_is_done_without_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A done env that is not at its time limit is terminated (DM Control's envs do not end
    early: the step's outputs are forged here)."""
    env = make("CartpoleBalance")
    env.reset()
    step = env._step

    def ended(state: object, actions: np.ndarray) -> tuple:
        state, out = step(state, actions)
        done = np.zeros(NUM_ENVS, np.float32)
        done[:3] = 1.0
        truncation = np.zeros(NUM_ENVS, np.float32)
        truncation[2] = 1.0
        return state, (*out[:3], done, truncation, *out[5:])

    monkeypatch.setattr(env, "_step", ended)
    t = env.step(env.info.sample_actions())
    assert np.flatnonzero(t.terminateds).tolist() == [0, 1]
    assert np.flatnonzero(t.truncateds).tolist() == [2]
    assert env.clock.epi == 3


def test_the_official_action_repeat_comes_from_the_package() -> None:
    """The package's PPO parameters hold action_repeat 4 for "PendulumSwingUp", a name no env
    registers (PendulumSwingup does): by the env's name they give 1, so v5's pendulum spec
    sets 4 itself. A release that fixes the name fails here."""
    import inspect

    from mujoco_playground import registry
    from mujoco_playground.config import dm_control_suite_params

    assert pb.official_action_repeat("CartpoleBalance") == 1
    assert pb.official_action_repeat("PendulumSwingup") == 1
    source = inspect.getsource(dm_control_suite_params.brax_ppo_config)
    assert 'env_name == "PendulumSwingUp"' in source and "action_repeat = 4" in source
    assert "PendulumSwingUp" not in registry.ALL_ENVS
    env = make("PendulumSwingup", action_repeat=4, max_t=40)
    env.record_episodes()
    env.reset()
    for _ in range(10):  # 40 env steps in 10 agent steps
        env.step(env.info.sample_actions())
    [finished] = env.pop_episodes()
    assert finished.lengths.tolist() == [10] * NUM_ENVS


def test_a_step_compiles_once_and_observations_are_views() -> None:
    env = make("CartpoleBalance")
    env.reset()
    for _ in range(3):
        env.step(env.info.sample_actions())
    assert env._step._cache_size() == 1  # the reset's state and the step's alike (weak types)
    assert not env.obs.flags.owndata  # a numpy view of JAX's buffer


# -- a video's frames ----------------------------------------------------------------------
def test_a_video_shows_env_0s_episodes_whole() -> None:
    """render_mode rgb_array: env 0's frame after its reset and after each step; the step that
    ends its episode gives the final state's frame (what an env without that time limit shows
    after the same actions), then the reset state's (its first state's again)."""
    max_t = 4
    cut = make("CartpoleBalance", render_mode="rgb_array", num_envs=2, max_t=max_t)
    uncut = make("CartpoleBalance", render_mode="rgb_array", num_envs=2, max_t=1000)
    cut.reset(), uncut.reset()
    [first] = cut.frames()
    assert first.shape == (*pb.FRAME_SIZE, 3) and first.dtype == np.uint8 and first.std() > 0
    np.testing.assert_array_equal(first, uncut.frames()[0])
    frames = [first]
    for step in range(1, max_t + 1):
        actions = np.full((2, 1), 1.0, np.float32)
        cut.step(actions), uncut.step(actions)
        got, [same] = cut.frames(), uncut.frames()
        assert len(got) == (2 if step == max_t else 1)
        np.testing.assert_array_equal(got[0], same)
        assert not np.array_equal(got[0], frames[-1])  # the cart moved
        frames += got
    np.testing.assert_array_equal(frames[-1], first)
    assert cut.frames() == [] and cut.frame_rate == 100.0  # CartpoleBalance's ctrl_dt: 0.01 s
    cut.close(), uncut.close()


def test_a_window_is_refused_in_one_line() -> None:
    line = (
        "--render: a Playground env (playground/CartpoleBalance) cannot be shown in a window; "
        "record a video of it with --record"
    )
    with pytest.raises(SpecError, match=f"^{re.escape(line)}$"):
        make("CartpoleBalance", render_mode="human")


def test_the_envs_table_is_the_installed_packages() -> None:
    assert pb.write_table() == pb.table()


@pytest.fixture
def dict_obs_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """CartpoleBalance with a dict observation, as Playground's robots have: `state` and a
    `privileged_state` (every Playground env with one needs Menagerie, not here)."""
    import jax.numpy as jnp
    from mujoco_playground._src import dm_control_suite
    from mujoco_playground._src.dm_control_suite import cartpole

    class DictObs(cartpole.Balance):
        def __init__(self, **kwargs: object) -> None:
            super().__init__(swing_up=False, sparse=False, **kwargs)

        def _get_obs(self, data: object, info: dict) -> dict:
            obs = super()._get_obs(data, info)
            return {"state": obs, "privileged_state": jnp.concatenate([obs, -obs])}

    name = "DictObsCartpoleBalance"
    dm_control_suite.register_environment(name, DictObs, cartpole.default_config)
    table = pb.table()
    with_it = {**table, "envs": {**table["envs"], name: {"obs": 5, "action": 1}}}
    monkeypatch.setattr(pb, "table", lambda: with_it)
    return name


def test_a_dict_observation_gives_the_agent_its_state(dict_obs_env: str) -> None:
    env = make(dict_obs_env, max_t=5)
    plain = make("CartpoleBalance", max_t=5)
    obs = env.reset()
    np.testing.assert_array_equal(obs, plain.reset())
    for _ in range(5):
        actions = env.info.sample_actions()
        t, u = env.step(actions), plain.step(actions)
        np.testing.assert_array_equal(t.next_obs, u.next_obs)
    assert t.truncateds.all() and env.info.observation_space.shape == (5,)


@pytest.mark.cli
def test_a_dev_run_on_a_dict_observation_env(dict_obs_env: str, tmp_path: Path) -> None:
    with contextlib.chdir(tmp_path):
        result = invoke(run_args("ppo_playground", "dev", f"env=playground/{dict_obs_env}"))
        assert result.exit_code == 0, result.stderr[-3000:]
        [run_dir] = run_dirs(Path("data"))
        df = read_session_df(run_dir)
    assert df["frame"].iloc[-1] == 5760 and df["epi"].iloc[-1] > 0


# -- every DM Control env ----------------------------------------------------------------
@pytest.mark.parametrize("name", DM_CONTROL)
def test_every_dm_control_env_builds_and_steps(name: str) -> None:
    env = make(name)
    obs = env.reset()
    entry = pb.table()["envs"][name]
    assert obs.shape == (NUM_ENVS, entry["obs"]) and obs.dtype == np.float32
    for _ in range(3):
        t = env.step(env.info.sample_actions())
    assert t.next_obs.shape == obs.shape and np.isfinite(t.next_obs).all()
    assert t.rewards.shape == (NUM_ENVS,) and np.isfinite(t.rewards).all()
    assert env.clock.frame == 3 * NUM_ENVS
    assert f"playground/{name}" in random_baseline._table()


# -- specs and Menagerie -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SPEC_ENVS))
def test_v5_specs_pass_check(name: str) -> None:
    result = invoke(
        [
            "check",
            str(SPEC_FILE),
            name,
            "-s",
            f"env=playground/{SPEC_ENVS[name]}",
            "-s",
            "max_frame=1e8",
        ]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"ok: {name}\n"


@pytest.fixture
def offline_menagerie(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Menagerie, and git refuses https (as without a network)."""
    from mujoco_playground._src import mjx_env

    monkeypatch.setattr(mjx_env, "MENAGERIE_PATH", tmp_path / "mujoco_menagerie")
    monkeypatch.setattr(pb, "menagerie_path", lambda: tmp_path / "mujoco_menagerie")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")


def test_an_offline_menagerie_env_fails_in_one_line(offline_menagerie: None) -> None:
    assert pb.spaces(config("Go1JoystickFlatTerrain")) is None  # a check does not fetch
    line = (
        "env.name: playground/Go1JoystickFlatTerrain needs MuJoCo Menagerie's robot assets, "
        "which are not here and could not be downloaded (git clone from github.com failed); "
        "Playground downloads them on first use where the network is reachable"
    )
    with pytest.raises(SpecError, match=f"^{re.escape(line)}$"):
        make("Go1JoystickFlatTerrain")


@pytest.mark.cli
def test_an_offline_menagerie_run_exits_2_in_one_line(
    offline_menagerie: None, tmp_path: Path
) -> None:
    with contextlib.chdir(tmp_path):
        result = invoke(
            run_args("ppo_playground_loco", "dev", "env=playground/Go1JoystickFlatTerrain")
        )
    assert result.exit_code == 2, result.stderr[-3000:]
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert "needs MuJoCo Menagerie's robot assets" in line and "Traceback" not in result.stderr


# -- runs through the CLI: dev, NormalTanh, exact resume ------------------------------------
@pytest.fixture(scope="module")
def unbroken(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(working directory, run folder) of the short run the resumed runs must equal."""
    workdir = tmp_path_factory.mktemp("playground_runs")
    with contextlib.chdir(workdir):
        result = invoke(run_args("ppo_playground", "dev"))
        assert result.exit_code == 0, result.stderr[-3000:]
        [run_dir] = run_dirs(Path("data"))
        return workdir, run_dir.resolve()


@pytest.mark.cli
def test_a_dev_run_writes_trial_metrics(unbroken: tuple[Path, Path]) -> None:
    _, run_dir = unbroken
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == list(range(960, 5761, 960))
    assert df["epi"].iloc[-1] > 0 and np.isfinite(df["total_reward"].iloc[-1])
    assert next(run_dir.glob("*_trial_metrics.json")).is_file()


class Killed(BaseException):
    """Stands in for SIGKILL: the session ends between two steps, saving nothing."""


def interrupt(at: int, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    update = Algorithm.update

    def update_until(self: Algorithm, *args: object) -> None:
        if self.clock.frame == at:
            if how == "kill":
                raise Killed
            stop.REQUEST.signum = signal.SIGINT  # what Ctrl-C's handler records
        update(self, *args)

    monkeypatch.setattr(Algorithm, "update", update_until)


@pytest.mark.cli
@pytest.mark.parametrize("how", ["kill", "sigint"])
def test_a_run_stopped_twice_resumes_to_the_unbroken_runs_files(
    how: str, unbroken: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, run_a = unbroken
    monkeypatch.setattr(checkpointer, "SAVE_INTERVAL_S", 0.0)  # a state at every row
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        run_b = None
        for stop_at in (1344, 3840):  # mid-batch, between rows; the second after a resume
            with monkeypatch.context() as m:
                interrupt(stop_at, how, m)
                args = (
                    run_args("ppo_playground", "dev")
                    if run_b is None
                    else ["run", f"train@{run_b}"]
                )
                if how == "kill":
                    with pytest.raises(Killed):
                        invoke(args)
                else:
                    assert invoke(args).exit_code == 130
            if run_b is None:
                [run_b] = set(run_dirs(Path("data"))) - before
                run_b = run_b.resolve()
        stop.REQUEST.signum = None
        result = invoke(["run", f"train@{run_b}"])
        assert result.exit_code == 0, result.stderr[-3000:]
    assert len(read_session_df(run_b)) == 6
    assert_same_run_files(run_a, run_b)


@pytest.mark.cli
def test_normal_tanh_trains_on_a_playground_env(tmp_path: Path) -> None:
    with contextlib.chdir(tmp_path):
        result = invoke(run_args("ppo_playground_humanoid", "dev"))
        assert result.exit_code == 0, result.stderr[-3000:]
        [run_dir] = run_dirs(Path("data"))
        df = read_session_df(run_dir)
    assert df["frame"].iloc[-1] == 5760 and np.isfinite(df["loss"].iloc[1:]).all()


@pytest.mark.cli
@pytest.mark.subprocess
def test_uv_run_slm_lab_dev_writes_trial_metrics(tmp_path: Path) -> None:
    """`uv run slm-lab run ... dev` as README shows it, after `uv sync --group playground`."""
    args = run_args("ppo_playground", "dev")
    seed = args.index("meta.random_seed=7")
    del args[seed - 1 : seed + 1]  # its own seed, as a user's run draws one
    out = subprocess.run(
        [UV, "run", "--project", str(ROOT_DIR), "slm-lab", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"^trial_metrics: frame:5\.76e\+03 \| total_reward_ma:", out.stdout, re.M)
    assert (
        pd.read_csv(next((tmp_path / "data").rglob("*_t0_s0_session_df.csv")))["frame"].iloc[-1]
        == 5760
    )
