"""The Classic-control and Box2D benchmark cells: one shipped spec for every cell of SLM Lab v5's
results table, each at v5's budget and environment settings."""

import json
from pathlib import Path

import pytest
from conftest import family_marks

from slm_lab import SPEC_DIR
from slm_lab.spec import spec_util

BENCHMARK_DIR = Path(SPEC_DIR) / "benchmark"

# v5's table: the algorithm a cell names -> (agent.algorithm.name, agent.memory.name or None)
FAMILIES = {
    "REINFORCE": ("Reinforce", None),
    "SARSA": ("SARSA", None),
    "DQN": ("DQN", None),
    "DDQN+PER": ("DoubleDQN", "PrioritizedReplay"),
    "A2C": ("ActorCritic", None),
    "PPO": ("PPO", None),
    "SAC": ("SoftActorCritic", None),
    "CrossQ": ("CrossQ", None),
}

# v5's "Environment Settings" and per-env budgets: env -> (num_envs, max_frame, log_frequency)
CARTPOLE, ACROBOT, PENDULUM = "CartPole-v1", "Acrobot-v1", "Pendulum-v1"
LUNAR, LUNAR_CONTINUOUS = "LunarLander-v3", "LunarLanderContinuous-v3"
ENV_SETTINGS = {
    CARTPOLE: (4, 200_000, 500),
    ACROBOT: (4, 300_000, 500),
    PENDULUM: (4, 300_000, 500),
    LUNAR: (8, 300_000, 1000),
    LUNAR_CONTINUOUS: (8, 300_000, 1000),
}

# every cell of v5's sections 1.1-1.3 and 2.1-2.2: (algorithm, env) -> spec file, spec name
CELLS = {
    ("REINFORCE", CARTPOLE): "reinforce/reinforce_cartpole.json",
    ("SARSA", CARTPOLE): "sarsa/sarsa_cartpole.json",
    ("DQN", CARTPOLE): "dqn/dqn_cartpole.json",
    ("DDQN+PER", CARTPOLE): "dqn/ddqn_per_cartpole.json",
    ("A2C", CARTPOLE): "a2c/a2c_gae_cartpole.json",
    ("PPO", CARTPOLE): "ppo/ppo_cartpole.json",
    ("SAC", CARTPOLE): "sac/sac_cartpole.json",
    ("CrossQ", CARTPOLE): "crossq/crossq_cartpole.json",
    ("DQN", ACROBOT): "dqn/dqn_acrobot.json",
    ("DDQN+PER", ACROBOT): "dqn/ddqn_per_acrobot.json",
    ("A2C", ACROBOT): "a2c/a2c_gae_acrobot.json",
    ("PPO", ACROBOT): "ppo/ppo_acrobot.json",
    ("SAC", ACROBOT): "sac/sac_acrobot.json",
    ("CrossQ", ACROBOT): "crossq/crossq_acrobot.json",
    ("A2C", PENDULUM): "a2c/a2c_gae_pendulum.json",
    ("PPO", PENDULUM): "ppo/ppo_pendulum.json",
    ("SAC", PENDULUM): "sac/sac_pendulum.json",
    ("CrossQ", PENDULUM): "crossq/crossq_pendulum.json",
    ("DQN", LUNAR): "dqn/dqn_lunar.json",
    ("DDQN+PER", LUNAR): "dqn/ddqn_per_lunar.json",
    ("A2C", LUNAR): "a2c/a2c_gae_lunar.json",
    ("PPO", LUNAR): "ppo/ppo_lunar.json",
    ("SAC", LUNAR): "sac/sac_lunar.json",
    ("CrossQ", LUNAR): "crossq/crossq_lunar.json",
    ("A2C", LUNAR_CONTINUOUS): "a2c/a2c_gae_lunar_continuous.json",
    ("PPO", LUNAR_CONTINUOUS): "ppo/ppo_lunar_continuous.json",
    ("SAC", LUNAR_CONTINUOUS): "sac/sac_lunar_continuous.json",
    ("CrossQ", LUNAR_CONTINUOUS): "crossq/crossq_lunar_continuous.json",
}


def env_id(spec: dict) -> str:
    """The env as v5's table names it: LunarLander-v3 with continuous actions is its own row."""
    env = spec["env"]
    return LUNAR_CONTINUOUS if env["name"] == LUNAR and env.get("continuous") else env["name"]


def cell(algo: str, env: str, file: str) -> object:
    return pytest.param(algo, env, file, id=Path(file).stem, marks=family_marks(env))


@pytest.mark.parametrize(("algo", "env", "file"), [cell(a, e, f) for (a, e), f in CELLS.items()])
def test_every_v5_cell_has_a_spec_at_v5_settings(algo: str, env: str, file: str) -> None:
    path = BENCHMARK_DIR / file
    [name] = json.loads(path.read_text())  # one cell a file
    spec = spec_util.get_spec(str(path), name)
    algorithm, memory = FAMILIES[algo]
    assert spec["agent"]["algorithm"]["name"] == algorithm
    if memory is not None:
        assert spec["agent"]["memory"]["name"] == memory
    assert env_id(spec) == env
    num_envs, max_frame, log_frequency = ENV_SETTINGS[env]
    assert spec["env"]["num_envs"] == num_envs
    assert spec["env"]["max_frame"] == max_frame
    assert spec["meta"]["log_frequency"] == log_frequency
    assert spec["meta"]["max_session"] == 4


def shipped_spec(file: str) -> dict:
    """The one spec of a shipped file, as written (no defaults filled in)."""
    [spec] = json.loads((BENCHMARK_DIR / file).read_text()).values()
    return spec


def without(spec: dict, section: str, *keys: str) -> dict:
    """A copy of the spec with the keys taken out of agent.<section>."""
    spec = json.loads(json.dumps(spec))
    for key in keys:
        spec["agent"][section].pop(key, None)
    return spec


PER_KEYS = ("name", "alpha", "epsilon", "beta", "beta_end_step")


def test_ddqn_per_cartpole_is_dqn_cartpole_with_double_q_and_prioritized_replay() -> None:
    """DDQN+PER on CartPole trains with dqn_cartpole's settings (lr falling from 4.4e-4 to 0,
    target copied every 500 frames, the last 2e4 transitions, [256, 256], two steps per vector
    step), which keep DQN's late episodes from falling back; only the algorithm and the
    prioritized replay's own keys differ."""
    dqn, ddqn = shipped_spec("dqn/dqn_cartpole.json"), shipped_spec("dqn/ddqn_per_cartpole.json")
    assert ddqn["agent"]["name"] == ddqn["agent"]["algorithm"]["name"] == "DoubleDQN"
    assert ddqn["agent"]["memory"]["name"] == "PrioritizedReplay"
    for spec in (dqn, ddqn):
        spec["agent"].pop("name")
        spec["agent"]["algorithm"].pop("name")
    assert without(ddqn, "memory", *PER_KEYS) == without(dqn, "memory", *PER_KEYS)


def test_ddqn_per_lunar_takes_one_gradient_step_per_frame() -> None:
    """At one step per 2 frames, 2 sessions in 16 were still climbing (near 150) when the 3e5
    frames ran out; one step per frame is RL Zoo's ratio for DQN on LunarLander."""
    algorithm = shipped_spec("dqn/ddqn_per_lunar.json")["agent"]["algorithm"]
    steps_per_call = algorithm["training_iter"] * algorithm["training_batch_iter"]
    assert steps_per_call == algorithm["training_frequency"]  # frames between training calls
