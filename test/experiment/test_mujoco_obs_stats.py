"""The observation normalizer's statistics on a MuJoCo env, whose simulation state cannot be
saved: a resume restores them, an evaluation acts on the training statistics (frozen), and enjoy
on the checkpoint's (frozen)."""

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import invoke, load, make_env, make_spec, run_dirs, write_spec_file

from slm_lab.env.clock import Clock
from slm_lab.env.gym_backend import GymVecEnv
from slm_lab.experiment.build import build
from slm_lab.experiment.evaluation import Evaluation
from slm_lab.experiment.task import SessionTask

ENV = "InvertedPendulum-v5"
SEED = 5
NORMALIZED = {"name": ENV, "num_envs": 2, "max_frame": 10**6, "normalize_obs": True}


def random_steps(env: GymVecEnv, steps: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        env.step(rng.uniform(-1, 1, size=(env.info.num_envs, 1)).astype(np.float32))


def raw_obs(env: GymVecEnv) -> np.ndarray:
    """The sub-envs' current observations as the simulator gives them."""
    return np.stack([e.unwrapped._get_obs() for e in env.vec.unwrapped.envs])


def normalized(obs: np.ndarray, stats: dict[str, Any]) -> np.ndarray:
    """`obs` normalized with `stats`, then clipped at 10 (v5's default with normalize_obs)."""
    return np.clip((obs - stats["mean"]) / np.sqrt(stats["var"] + 1e-8), -10, 10)


def assert_same_stats(a: dict[str, Any], b: dict[str, Any]) -> None:
    np.testing.assert_array_equal(a["mean"], b["mean"])
    np.testing.assert_array_equal(a["var"], b["var"])
    assert a["count"] == b["count"]


@pytest.mark.mujoco
def test_a_resume_restores_the_obs_statistics() -> None:
    env = make_env(NORMALIZED, seed=SEED)
    env.reset()
    random_steps(env, 30)
    state = env.state_dict()
    assert state["vec"] is None  # MuJoCo: the episodes in progress restart on resume
    resumed = make_env(NORMALIZED, seed=SEED)
    resumed.clock.load_state_dict(env.clock.state_dict())
    assert resumed.load_state_dict(state) is False
    stats = env.obs_stats()
    assert stats["count"] > 60  # the reset and 30 steps of 2 envs
    assert_same_stats(resumed.obs_stats(), stats)
    # the fresh episodes' first observations are normalized with them, not counted in them
    np.testing.assert_allclose(resumed.obs, normalized(raw_obs(resumed), stats), rtol=1e-5)
    env.close()
    resumed.close()


@pytest.mark.mujoco
def test_an_evaluation_acts_on_the_training_statistics() -> None:
    spec = make_spec("ppo", ENV)
    spec["env"]["normalize_obs"] = True
    spec["meta"]["rigorous_eval"] = 2
    typed = load(spec)
    env, agent = build(
        SessionTask.detached(typed, SEED), Clock(typed.env.max_frame, typed.env.num_envs)
    )
    env.reset()
    random_steps(env, 20)
    evaluation = Evaluation(typed, env, env.clock, agent, SEED)
    evaluation.run()
    stats = env.obs_stats()
    assert_same_stats(evaluation.env.obs_stats(), stats)  # frozen through its own steps
    assert not evaluation.env.obs_norm.update_running_mean
    # what its agent acted on: the simulator's observations, normalized with the training's
    eval_env = evaluation.env
    np.testing.assert_allclose(eval_env.obs, normalized(raw_obs(eval_env), stats), rtol=1e-5)
    env.close()


@pytest.mark.cli
@pytest.mark.mujoco
def test_enjoy_replays_with_the_checkpoint_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "ppo_pendulum_mujoco"
    spec = make_spec("ppo", ENV, max_frame=200)
    spec["env"]["normalize_obs"] = True
    spec_file = write_spec_file(tmp_path / "spec.json", {name: spec})
    given: list[tuple[dict[str, Any] | None, bool]] = []
    set_obs_stats = GymVecEnv.set_obs_stats

    def record(self: GymVecEnv, stats: dict[str, Any] | None, frozen: bool) -> None:
        given.append((stats, frozen))
        set_obs_stats(self, stats, frozen)

    with contextlib.chdir(tmp_path):
        assert invoke(["run", str(spec_file), name, "dev"]).exit_code == 0
        [run_dir] = run_dirs(Path("data"))
        monkeypatch.setattr(GymVecEnv, "set_obs_stats", record)
        result = invoke(["run", str(spec_file), name, f"enjoy@{run_dir}", "--episodes", "2"])
        assert result.exit_code == 0, result.stderr[-3000:]
        [enjoy_dir] = set(run_dirs(Path("data"))) - {run_dir}
        replayed = json.loads((enjoy_dir / "enjoy_metrics.json").read_text())["checkpoint"]
        saved = torch.load(replayed, weights_only=True)["obs_rms"]
    [(stats, frozen)] = given
    assert frozen and saved["count"] > 0
    assert_same_stats(stats, {k: v.numpy() if hasattr(v, "numpy") else v for k, v in saved.items()})
