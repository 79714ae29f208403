"""TorchArcNet: a torcharc graph as the net body; v5.1-style YAML specs run through the CLI."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import (
    invoke,
    make_algorithm,
    make_spec,
    net_config,
    net_spec,
    read_session_df,
    run_dirs,
)
from test_value_based_smoke import IMAGE_ENV_ID, IMAGE_SHAPE, REPLAY, value_spec

sys.path.insert(0, str(Path(__file__).parent.parent / "agent"))
from test_sac import sac_spec  # noqa: E402

from slm_lab.agent.net.registry import build_net
from slm_lab.agent.net.torcharc_net import TorchArcNet
from slm_lab.spec import spec_util
from slm_lab.spec.spec_util import SpecError

MLP_ARC = {
    "modules": {
        "body": {
            "Sequential": [
                {"LazyLinear": {"out_features": 16}},
                {"Tanh": None},
                {"LazyLinear": {"out_features": 8}},
                {"Tanh": None},
            ]
        }
    },
    "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
}
CONV_ARC = {
    "modules": {
        "body": {
            "Sequential": [
                {"LazyConv2d": {"out_channels": 4, "kernel_size": 3, "stride": 2}},
                {"ReLU": None},
                {"Flatten": None},
            ]
        }
    },
    "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
}


def test_body_from_the_arc_then_heads() -> None:
    torch.manual_seed(0)
    net = build_net(net_config({"type": "TorchArcNet", "arc": MLP_ARC}), (4,), [2, 1])
    assert isinstance(net, TorchArcNet)
    linears = [m for m in net.body.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 16), (16, 8)]  # lazy: built
    assert [h.in_features for h in net.heads] == [8, 8]
    logits, value = net(torch.randn(5, 4))
    assert logits.shape == (5, 2) and value.shape == (5, 1)
    # gradients reach the torcharc body
    (logits.sum() + value.sum()).backward()
    assert all(m.weight.grad is not None for m in linears)


def test_conv_arc_flattens_and_normalizes_frames() -> None:
    net = build_net(
        net_config({"type": "TorchArcNet", "arc": CONV_ARC, "normalize": True}), IMAGE_SHAPE, [2]
    )
    # (12 - 3) // 2 + 1 = 5: 4 channels x 5 x 5 features
    assert net.heads[0].in_features == 4 * 5 * 5
    frames = torch.full((3, *IMAGE_SHAPE), 255, dtype=torch.uint8)
    torch.testing.assert_close(net.embed(frames), net.features(torch.ones(3, *IMAGE_SHAPE)))
    floats = torch.randint(0, 256, (3, *IMAGE_SHAPE)).float()
    before = floats.clone()
    assert torch.equal(net.embed(floats), net.features(before / 255.0))
    assert torch.equal(floats, before)  # divided in a copy, not in the caller's tensor


def test_init_fn_reinitializes_the_body() -> None:
    net = build_net(
        net_config({"type": "TorchArcNet", "arc": MLP_ARC, "init_fn": "zeros_"}), (4,), [2]
    )
    assert all(
        m.weight.abs().sum() == 0 for m in net.body.modules() if isinstance(m, torch.nn.Linear)
    )


@pytest.mark.parametrize(
    ("net", "fragment"),
    [
        ({"type": "TorchArcNet"}, "agent.net.arc: TorchArcNet needs an `arc` graph"),
        (
            {
                "type": "TorchArcNet",
                "arc": {"modules": {"body": {"NoSuchLayer": {}}}, "graph": MLP_ARC["graph"]},
            },
            "agent.net.arc: torcharc cannot build it for inputs of shape (4,): modules.body",
        ),
        (
            {"type": "TorchArcNet", "arc_file": "no/such/arc.yaml"},
            "agent.net.arc_file: torcharc cannot build it",
        ),
        (
            {"type": "TorchArcNet", "arc": CONV_ARC},  # a conv body on vector observations
            "agent.net.arc: torcharc cannot build it for inputs of shape (4,)",
        ),
        (  # the critic's own arc is checked (a conv body on vector input), named by its key
            {"type": "TorchArcNet", "arc": MLP_ARC, "critic_arc": CONV_ARC},
            "agent.net.critic_arc: torcharc cannot build it for inputs of shape (4,)",
        ),
    ],
)
def test_bad_arcs_are_one_line_spec_errors(net: dict, fragment: str) -> None:
    spec = make_spec("ppo")
    spec["agent"]["net"] = {**spec["agent"]["net"], **net}
    with pytest.raises(SpecError) as err:
        spec_util.validate(spec)
    assert str(err.value).startswith(fragment) and "\n" not in str(err.value)


def linear_arc(in_features: int) -> dict:
    """An arc with a plain (non-lazy) first layer: it only fits inputs of `in_features`."""
    return {
        "modules": {
            "body": {
                "Sequential": [
                    {"Linear": {"in_features": in_features, "out_features": 8}},
                    {"ReLU": None},
                ]
            }
        },
        "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
    }


def test_sac_critic_arcs_are_checked_on_obs_and_action() -> None:
    """Pendulum: obs 3, action 1; a continuous SAC critic reads concat(obs, action), 4 wide."""
    spec = sac_spec()
    spec["agent"]["net"].update(
        type="TorchArcNet", actor_arc=linear_arc(3), critic_arc=linear_arc(4)
    )
    spec_util.validate(spec)  # both fit
    algo = make_algorithm(spec)
    assert algo.q1_net.heads[0].in_features == 8 and algo.actor.heads[0].in_features == 8
    spec["agent"]["net"]["critic_arc"] = linear_arc(3)  # sized for the observation alone
    with pytest.raises(
        SpecError,
        match=r"agent.net.critic_arc: torcharc cannot build it for inputs of shape \(4,\)",
    ):
        spec_util.validate(spec)


def test_a_role_arc_file_replaces_the_shared_arc(tmp_path: Path) -> None:
    (tmp_path / "critic.yaml").write_text(yaml.safe_dump(linear_arc(4) | {}))
    net = {"type": "TorchArcNet", "arc": MLP_ARC, "critic_arc_file": str(tmp_path / "critic.yaml")}
    roles = net_spec(net)
    assert roles.critic.arc is None and roles.critic.arc_file.endswith("critic.yaml")
    assert roles.actor.arc == MLP_ARC and roles.actor.arc_file is None


def test_arc_with_biasless_layers_takes_an_init_fn() -> None:
    arc = {
        "modules": {
            "body": {
                "Sequential": [{"LazyLinear": {"out_features": 8, "bias": False}}, {"Tanh": None}]
            }
        },
        "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
    }
    net = build_net(
        net_config({"type": "TorchArcNet", "arc": arc, "init_fn": "orthogonal_"}), (4,), [2]
    )
    assert net.body.body[0].bias is None and net(torch.randn(3, 4))[0].shape == (3, 2)


V51_YAML = """
_arc: &arc
  modules:
    body:
      Sequential:
        - LazyLinear: {out_features: 16}
        - Tanh:
  graph:
    input: x
    modules:
      body: [x]
    output: body

ppo_arc:
  agent:
    name: PPO
    algorithm:
      name: PPO
      gamma: 0.99
      lam: 0.95
      time_horizon: 32
      minibatch_size: 32
      training_epoch: 2
      clip_eps_spec: {name: no_decay, start_val: 0.2}
    memory:
      name: OnPolicyBatchReplay
    net:
      type: TorchArcNet
      shared: false
      arc: *arc
      hid_layers_activation: tanh
      init_fn: orthogonal_
      clip_grad_val: 0.5
      use_same_optim: true
      optim_spec: {name: AdamW, lr: 3.0e-4}
      gpu: auto
  env:
    name: CartPole-v1
    num_envs: 2
    max_t: null
    max_frame: 400
  meta:
    distributed: false
    log_frequency: 100
    max_session: 1
    max_trial: 1
    random_seed: 3
"""


@pytest.mark.cli
def test_v51_yaml_spec_with_an_arc_anchor_trains_through_the_cli(in_tmp: Path) -> None:
    (in_tmp / "spec.yaml").write_text(V51_YAML)
    result = invoke(["run", "spec.yaml", "ppo_arc", "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    df = read_session_df(run_dir)
    assert df["frame"].tolist() == [100, 200, 300, 400]
    assert df["opt_step"].iloc[-1] > 0 and math.isfinite(df["loss"].iloc[-1])


@pytest.mark.cli
def test_dqn_with_a_conv_arc_on_images_through_the_cli(in_tmp: Path) -> None:
    net = {
        "type": "TorchArcNet",
        "arc": CONV_ARC,
        "normalize": True,
        "loss_spec": {"name": "SmoothL1Loss"},
        "optim_spec": {"name": "Adam", "lr": 1e-3},
        "gpu": False,
    }
    spec = value_spec("DQN", REPLAY, net, IMAGE_ENV_ID)
    spec_file = in_tmp / "spec.json"
    spec_file.write_text(json.dumps({"dqn_arc": spec}))
    result = invoke(["run", str(spec_file), "dqn_arc", "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    last = read_session_df(run_dir).iloc[-1]
    assert last["opt_step"] > 0 and math.isfinite(last["loss"])


def test_arc_can_name_lazy_batch_renorm_and_weight_norm_layers() -> None:
    arc = {
        "modules": {
            "body": {
                "Sequential": [
                    {"LazyWeightNormLinear": {"out_features": 16}},
                    {"LazyBatchRenorm1d": {"warmup_steps": 5}},
                    {"ReLU": None},
                ]
            }
        },
        "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
    }
    spec = {"type": "TorchArcNet", "arc": arc, "init_fn": "orthogonal_"}
    net = build_net(net_config(spec), (3,), [1])
    wn, brn = net.body.body[0], net.body.body[1]
    assert type(wn).__name__ == "WeightNormLinear" and type(brn).__name__ == "BatchRenorm1d"
    assert (wn.linear.in_features, wn.linear.out_features, brn.num_features) == (3, 16, 16)
    x = torch.randn(32, 3)
    out = net.train()(x)[0]
    assert out.shape == (32, 1) and brn.num_batches_tracked.item() == 1  # renorm stats updated
    out.sum().backward()
    assert wn.linear.parametrizations.weight.original1.grad is not None  # direction v trains
    # a fresh net of the same spec loads the trained one's weights and statistics
    other = build_net(net_config(spec), (3,), [1])
    other.load_state_dict(net.state_dict())
    torch.testing.assert_close(other.eval()(x)[0], net.eval()(x)[0])
