"""CLI smoke runs: SARSA and the DQN family, a ConvNet on a small image env, a RecurrentNet."""

import copy
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import invoke, read_session_df, run_dirs, write_spec_file

IMAGE_ENV_ID = "SlmLabTestImage-v0"
IMAGE_SHAPE = (2, 12, 12)  # channels first, uint8


class ImageEnv(gym.Env):
    """A tiny image env: reward 1 when the action names the brighter half of the image."""

    observation_space = gym.spaces.Box(0, 255, IMAGE_SHAPE, dtype=np.uint8)
    action_space = gym.spaces.Discrete(2)
    EPISODE_LEN = 20

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.np_random.integers(0, 256, IMAGE_SHAPE, dtype=np.uint8)
        return self.obs, {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        half = IMAGE_SHAPE[2] // 2
        brighter = int(self.obs[..., half:].mean() > self.obs[..., :half].mean())
        reward = float(action == brighter)
        self.t += 1
        self.obs = self.np_random.integers(0, 256, IMAGE_SHAPE, dtype=np.uint8)
        return self.obs, reward, False, self.t >= self.EPISODE_LEN, {}


if IMAGE_ENV_ID not in gym.registry:
    gym.register(IMAGE_ENV_ID, entry_point=ImageEnv)

EXPLORE = {
    "name": "linear_decay",
    "start_val": 1.0,
    "end_val": 0.1,
    "start_step": 0,
    "end_step": 300,
}
MLP = {
    "type": "MLPNet",
    "hid_layers": [16],
    "hid_layers_activation": "relu",
    "clip_grad_val": 10.0,
    "loss_spec": {"name": "SmoothL1Loss"},
    "optim_spec": {"name": "Adam", "lr": 1e-3},
    "gpu": False,
}


def value_spec(algo: str, memory: dict, net: dict | None = None, env: str = "CartPole-v1") -> dict:
    algorithm = {
        "name": algo,
        "action_pdtype": "Argmax",
        "action_policy": "epsilon_greedy",
        "explore_var_spec": EXPLORE,
        "gamma": 0.99,
    }
    if algo == "SARSA":
        algorithm["training_frequency"] = 8
    else:
        algorithm.update({"training_start_step": 64, "training_frequency": 16, "training_iter": 2})
    net = copy.deepcopy(net or MLP)
    if algo in ("DQN", "DoubleDQN"):
        net.update({"update_type": "replace", "update_frequency": 50})
    return {
        "agent": {"name": algo, "algorithm": algorithm, "memory": memory, "net": net},
        "env": {"name": env, "num_envs": 2, "max_t": None, "max_frame": 400},
        "meta": {
            "distributed": False,
            "log_frequency": 100,
            "max_session": 1,
            "max_trial": 1,
            "random_seed": 7,
        },
    }


REPLAY = {"name": "Replay", "max_size": 1000, "batch_size": 16}
PER = {
    "name": "PrioritizedReplay",
    "max_size": 1000,
    "batch_size": 16,
    "alpha": 0.6,
    "epsilon": 1e-6,
}
CONV = {
    "type": "ConvNet",
    "conv_hid_layers": [[4, 3, 2, 0, 1], [8, 3, 1, 0, 1]],
    "fc_hid_layers": [16],
    "hid_layers_activation": "relu",
    "normalize": True,
    "clip_grad_val": 10.0,
    "loss_spec": {"name": "SmoothL1Loss"},
    "optim_spec": {"name": "Adam", "lr": 1e-3},
    "gpu": False,
}
DUELING_CONV = {**CONV, "type": "DuelingConvNet"}

CASES = {
    "sarsa": value_spec("SARSA", {"name": "OnPolicyBatchReplay"}),
    "vanilla_dqn": value_spec("VanillaDQN", REPLAY),
    "dqn": value_spec("DQN", REPLAY),
    "ddqn_per": value_spec("DoubleDQN", PER),
    "dueling_dqn": value_spec("DQN", REPLAY, {**MLP, "type": "DuelingMLPNet"}),
    "dqn_conv": value_spec("DQN", REPLAY, CONV, IMAGE_ENV_ID),
    "ddqn_dueling_conv": value_spec("DoubleDQN", PER, DUELING_CONV, IMAGE_ENV_ID),
}


def run_and_check(name: str, spec: dict, workdir: Path, diagnostics: list[str]) -> None:
    spec_file = write_spec_file(workdir / "spec.json", {name: spec})
    result = invoke(["run", str(spec_file), name, "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    assert any(
        line.startswith("trial_metrics: frame:4.00e+02") for line in result.stdout.splitlines()
    )
    [run_dir] = run_dirs(workdir / "data")
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == [100, 200, 300, 400]
    last = df.iloc[-1]
    assert last["opt_step"] > 0 and all(math.isfinite(last[c]) for c in ["loss", *diagnostics])
    assert (run_dir / "model" / f"{name}_t0_s0_ckpt-latest_model.pt").is_file()
    assert list((run_dir / "graph").glob("*.png"))


@pytest.mark.cli
@pytest.mark.parametrize("name", list(CASES))
def test_value_based_smoke_through_cli(name: str, in_tmp: Path) -> None:
    run_and_check(name, CASES[name], in_tmp, ["q_mean", "td_error"])


@pytest.mark.cli
def test_recurrent_ppo_smoke_through_cli(in_tmp: Path) -> None:
    net = {
        "type": "RecurrentNet",
        "cell_type": "GRU",
        "rnn_hidden_size": 16,
        "rnn_num_layers": 1,
        "seq_len": 4,
        "fc_hid_layers": [16],
        "hid_layers_activation": "tanh",
        "clip_grad_val": 0.5,
        "use_same_optim": True,
        "loss_spec": {"name": "MSELoss"},
        "actor_optim_spec": {"name": "Adam", "lr": 1e-3},
        "gpu": False,
    }
    spec = {
        "agent": {
            "name": "PPO",
            "algorithm": {
                "name": "PPO",
                "gamma": 0.99,
                "lam": 0.95,
                "time_horizon": 32,
                "minibatch_size": 32,
                "training_epoch": 2,
                "clip_eps_spec": {"name": "no_decay", "start_val": 0.2},
            },
            "memory": {"name": "OnPolicyBatchReplay"},
            "net": net,
        },
        "env": {"name": "CartPole-v1", "num_envs": 2, "max_t": None, "max_frame": 400},
        "meta": {
            "distributed": False,
            "log_frequency": 100,
            "max_session": 1,
            "max_trial": 1,
            "random_seed": 7,
        },
    }
    run_and_check("ppo_gru", spec, in_tmp, ["approx_kl", "clip_frac", "explained_variance"])


def test_dqn_on_continuous_actions_is_rejected(in_tmp: Path) -> None:
    spec = value_spec("DQN", REPLAY, env="Pendulum-v1")
    spec["agent"]["algorithm"]["action_pdtype"] = "default"
    spec_file = write_spec_file(in_tmp / "spec.json", {"dqn_pendulum": spec})
    result = invoke(["run", str(spec_file), "dqn_pendulum", "dev"])
    assert result.exit_code != 0
    assert (
        "DQN needs a discrete action space; Pendulum-v1 has a continuous (Box) one" in result.stderr
    )
    assert "Traceback" not in result.stderr and not (in_tmp / "data").exists()
