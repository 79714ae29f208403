"""`from slm_lab import load_agent`: a run's trained agent in Python. On the observations of an
enjoy@ replay of the same checkpoint it normalizes them as the replay's env did and gives the
replay agent's actions (the same samples from the same torch RNG state), in the env's action
space; deterministic actions are the argmax (the mean) of the net on the normalized obs."""

import contextlib
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import invoke, make_spec, run_dirs, write_spec_file

from slm_lab import load_agent
from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.env.gym_backend import _make_one
from slm_lab.env.wrappers import ObsNormalizer
from slm_lab.lib.util import FULL_INSTALL_FIX
from slm_lab.trained import TrainedAgent

ENVS = {"discrete": "CartPole-v1", "continuous": "Pendulum-v1"}
NEEDS_FULL_INSTALL = f"load_agent needs the full install (torch, Gymnasium...): {FULL_INSTALL_FIX}"


def train(workdir: Path, name: str, spec: dict[str, Any]) -> Path:
    spec_file = write_spec_file(workdir / f"{name}.json", {name: spec})
    with contextlib.chdir(workdir):
        result = invoke(["run", str(spec_file), name, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        [run_dir] = [p for p in run_dirs(Path("data")) if p.name.startswith(f"{name}_2")]
    return workdir / run_dir


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny PPO runs with observation normalization, 500 frames each: clipped at 5 on Pendulum,
    at the default (10, clip_obs not set) on CartPole."""
    workdir = tmp_path_factory.mktemp("trained")
    out = {}
    for kind, env in ENVS.items():
        spec = make_spec("ppo", env, max_frame=500, max_t=50 if kind == "continuous" else None)
        spec["env"]["normalize_obs"] = True
        if kind == "continuous":
            spec["env"]["clip_obs"] = 5.0
        out[kind] = train(workdir, f"ppo_{kind}", spec)
    return out


def replay(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """An enjoy@ replay of 2 episodes; for each act of its agent: (the raw observations its
    env normalized into the agent's input, that input, torch's RNG state before the act, the
    actions)."""
    normalized: list[tuple[np.ndarray, np.ndarray]] = []
    acts: list[tuple[np.ndarray, torch.Tensor, np.ndarray]] = []
    normalize, act = ObsNormalizer.__call__, Algorithm.act

    def recording_normalize(self: ObsNormalizer, obs: np.ndarray, update: bool = True) -> Any:
        out = normalize(self, obs, update)
        normalized.append((np.array(obs, copy=True), out))
        return out

    def recording_act(self: Algorithm, obs: np.ndarray) -> np.ndarray:
        state = torch.get_rng_state()
        actions = act(self, obs)
        acts.append((obs, state, actions))
        return actions

    with monkeypatch.context() as m, contextlib.chdir(run_dir.parent.parent):
        m.setattr(ObsNormalizer, "__call__", recording_normalize)
        m.setattr(Algorithm, "act", recording_act)
        result = invoke(["run", f"enjoy@{run_dir}", "--episodes", "2"])
        assert result.exit_code == 0, result.stderr[-3000:]
    assert "_t0_s0_ckpt-best_model.pt\n" in result.stdout  # the model line, before the folder
    steps = []
    for obs, state, actions in acts:
        [raw] = [raw for raw, out in normalized if out is obs]
        steps.append((raw, obs, state, actions))
    return steps


@pytest.mark.cli
@pytest.mark.parametrize("kind", list(ENVS))
def test_the_agent_acts_as_in_an_enjoy_replay(
    kind: str, trained_runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = replay(trained_runs[kind], monkeypatch)
    agent = load_agent(trained_runs[kind], checkpoint="best")
    assert agent.checkpoint.name == f"ppo_{kind}_t0_s0_ckpt-best_model.pt"
    assert len(steps) > 20
    for raw, obs, state, actions in steps:
        assert raw.shape == (2, *agent.observation_space.shape)  # the spec's 2 envs
        np.testing.assert_array_equal(agent.normalized(raw), obs)
        assert not np.allclose(obs, raw)  # the statistics matter
        torch.set_rng_state(state)
        np.testing.assert_array_equal(agent.act(raw), agent.env_actions(actions))
        torch.set_rng_state(state)
        one = agent.act(raw[1])
        torch.set_rng_state(state)
        np.testing.assert_array_equal(one, agent.act(raw[1:])[0])  # one obs as a batch of one
        greedy = agent.act(raw, deterministic=True)
        with torch.no_grad():
            scores = agent.agent.algorithm.nets.pdparam(torch.as_tensor(obs))[0].numpy()
        expected = scores.argmax(-1) if kind == "discrete" else agent.env_actions(scores)
        np.testing.assert_allclose(greedy, expected, rtol=1e-6)
    assert agent.act(steps[0][0], deterministic=True).dtype == agent.action_space.dtype


@pytest.mark.cli
def test_continuous_actions_are_what_the_env_steps_with(trained_runs: dict[str, Path]) -> None:
    """An action of `act` stepped in the plain env moves it as the agent's own action moves the
    training env (which rescales and clips it)."""
    agent = load_agent(trained_runs["continuous"], checkpoint="latest")
    assert agent.action_space == gym.make("Pendulum-v1").action_space
    assert agent.checkpoint.name.endswith("_ckpt-latest_model.pt")
    plain = gym.make("Pendulum-v1")
    wrapped = _make_one("Pendulum-v1", None, {}, 1, None)
    for agent_action in (np.array([0.5], np.float32), np.array([-3.0], np.float32)):
        obs, _ = plain.reset(seed=3)
        wrapped.reset(seed=3)
        env_action = agent.env_actions(agent_action[None])[0]
        assert plain.action_space.contains(env_action)
        np.testing.assert_array_equal(plain.step(env_action)[0], wrapped.step(agent_action)[0])


@pytest.mark.cli
def test_discrete_actions_keep_the_envs_start(trained_runs: dict[str, Path]) -> None:
    agent = load_agent(trained_runs["discrete"])
    shifted = dataclasses.replace(agent, action_space=gym.spaces.Discrete(3, start=2))
    np.testing.assert_array_equal(shifted.env_actions(np.array([0, 2])), [2, 4])


@pytest.mark.cli
def test_bad_calls(trained_runs: dict[str, Path], tmp_path: Path) -> None:
    run_dir = trained_runs["discrete"]
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        load_agent(tmp_path)
    with pytest.raises(ValueError, match="checkpoint='worst': one of best, latest"):
        load_agent(run_dir, checkpoint="worst")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="session 5 of .* has no checkpoint"):
        load_agent(run_dir, session=5)
    with pytest.raises(FileNotFoundError, match="session 5 of .* has no latest checkpoint"):
        load_agent(run_dir, checkpoint="latest", session=5)
    agent = load_agent(run_dir)
    with pytest.raises(ValueError, match=r"obs of shape \(3,\): expected one observation \(4,\)"):
        agent.act(np.zeros(3))
    random_run = train(tmp_path, "random_cartpole", make_spec("random", max_frame=200))
    with pytest.raises(ValueError, match="a Random agent has no trained policy"):
        load_agent(random_run)


@pytest.mark.cli
def test_best_falls_back_to_the_latest_checkpoint_as_enjoy_does(
    trained_runs: dict[str, Path], tmp_path: Path
) -> None:
    """A session with no best checkpoint (none written yet): load_agent and an enjoy@ replay
    both take its latest."""
    run_dir = Path(shutil.copytree(trained_runs["discrete"], tmp_path / "data" / "run"))
    [best] = run_dir.glob("model/*_ckpt-best_model.pt")
    best.unlink()
    agent = load_agent(run_dir)
    assert agent.checkpoint.name == "ppo_discrete_t0_s0_ckpt-latest_model.pt"
    with contextlib.chdir(tmp_path):
        result = invoke(["run", f"enjoy@{run_dir}", "--episodes", "1"])
    assert result.exit_code == 0, result.stderr[-3000:]
    assert f"{agent.checkpoint}\n" in result.stdout


@pytest.mark.subprocess
def test_the_light_install_is_told_to_install_the_rest() -> None:
    """Without Gymnasium (the light install, `uv sync --no-default-groups`), load_agent raises
    one error that says what to install, not Gymnasium's own ModuleNotFoundError."""
    code = (
        "import sys; sys.modules['gymnasium'] = None; import slm_lab; "
        "slm_lab.load_agent('data/any_run')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == f"ModuleNotFoundError: {NEEDS_FULL_INSTALL}", out.stderr
    assert "During handling" not in out.stderr and "No module named" not in out.stderr


@pytest.mark.subprocess
def test_import_slm_lab_loads_no_torch() -> None:
    code = (
        "import sys, slm_lab; assert 'torch' not in sys.modules; "
        "assert slm_lab.load_agent.__module__ == 'slm_lab.trained'; "
        "assert slm_lab.TrainedAgent.__name__ == 'TrainedAgent'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert TrainedAgent.act.__doc__
