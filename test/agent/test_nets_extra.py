"""ConvNet, RecurrentNet (with the env's sequence stacking), dueling nets, BatchRenorm1d, and the
net-type checks."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import make_env, net_config, net_spec

from slm_lab.agent.net import net_util
from slm_lab.agent.net.batch_renorm import BatchRenorm1d
from slm_lab.agent.net.config import NET_TYPES, check_net_input, env_seq_len
from slm_lab.agent.net.dueling import DuelingConvNet, DuelingMLPNet
from slm_lab.agent.net.policy import PolicyNets
from slm_lab.agent.net.registry import NETS, build_net
from slm_lab.lib.config import SpecError

NATURE = {
    "type": "ConvNet",
    "conv_hid_layers": [[32, 8, 4, 0, 1], [64, 4, 2, 0, 1], [64, 3, 1, 0, 1]],
    "fc_hid_layers": [512],
    "hid_layers_activation": "relu",
    "init_fn": "orthogonal_",
}
SMALL_CONV = {"type": "ConvNet", "conv_hid_layers": [[4, 3, 2, 1, 1]], "fc_hid_layers": [8]}


def frames(batch: int = 3, shape: tuple[int, ...] = (4, 84, 84)) -> torch.Tensor:
    return torch.randint(
        0, 256, (batch, *shape), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )


def test_net_types_match_schema() -> None:
    assert set(NETS) == set(NET_TYPES)


def test_conv_nature_shapes() -> None:
    net = build_net(net_config({**NATURE, "normalize": True}), (4, 84, 84), [6, 1])
    # 84 -> 20 -> 9 -> 7: the fc layer reads 64 x 7 x 7 conv features
    fc = [m for m in net.body if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in fc] == [(64 * 7 * 7, 512)]
    outs = net(frames())
    assert [tuple(o.shape) for o in outs] == [(3, 6), (3, 1)]


def test_conv_normalize_divides_by_255() -> None:
    torch.manual_seed(0)
    normalized = build_net(net_config({**NATURE, "normalize": True}), (4, 84, 84), [6])
    torch.manual_seed(0)
    plain = build_net(net_config(NATURE), (4, 84, 84), [6])
    x = frames()
    expected = plain(x.float() / 255.0)[0]
    torch.testing.assert_close(normalized(x)[0], expected)
    assert not torch.allclose(plain(x.float())[0], expected)


def test_conv_runs_in_channels_last_and_computes_the_same_function() -> None:
    """The body's weights and activations are NHWC (the faster CPU convolutions); the outputs
    equal the same weights' in the default layout, and the flattened features keep C, H, W order."""
    net = build_net(net_config({**NATURE, "normalize": True}), (4, 84, 84), [6])
    conv = net.body[0]
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()
    plain = copy.deepcopy(net.body).to(memory_format=torch.contiguous_format)
    assert plain[0].weight.is_contiguous()
    x = frames()
    assert net.body[0](x.to(torch.float32, memory_format=torch.channels_last)).is_contiguous(
        memory_format=torch.channels_last
    )
    seen = []
    forward = conv.forward
    conv.forward = lambda frames: seen.append(frames) or forward(frames)
    torch.testing.assert_close(net.embed(x), plain((x.float() / 255.0).contiguous()))
    assert seen[0].is_contiguous(memory_format=torch.channels_last)  # embed feeds NHWC frames


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("channels", [4, 1])
def test_conv_normalize_leaves_a_float_input_as_it_was(
    layout: torch.memory_format, channels: int
) -> None:
    """embed divides its own copy in place: a float input, even one already in channels_last
    (which `.contiguous` would hand back uncopied; with one channel both layouts are the same),
    is not written, and the frames it feeds the body are exactly x / 255."""
    net = build_net(net_config({**NATURE, "normalize": True}), (channels, 84, 84), [6])
    x = frames(shape=(channels, 84, 84)).float().contiguous(memory_format=layout)
    before = x.clone()
    seen = []
    forward = net.body[0].forward
    net.body[0].forward = lambda frames: seen.append(frames.clone()) or forward(frames)
    net.embed(x)
    assert torch.equal(x, before)
    assert torch.equal(seen[0], before / 255.0)


@pytest.mark.parametrize("normalize", [False, True])
def test_conv_takes_uint8_frames_as_stored(normalize: bool) -> None:
    """The frames come as the memory stores them (uint8): embed makes its own float copy, with
    exactly what a float input gives."""
    net = build_net(net_config({**NATURE, "normalize": normalize}), (4, 84, 84), [6])
    x = frames()
    assert torch.equal(net.embed(x), net.embed(x.float()))


@pytest.mark.parametrize(
    ("net", "in_shape"),
    [
        ({"type": "MLPNet", "hid_layers": [8]}, (128,)),
        ({"type": "RecurrentNet", "rnn_hidden_size": 8, "seq_len": 3}, (3, 128)),
    ],
)
def test_mlp_and_rnn_take_uint8_observations_as_stored(net: dict, in_shape: tuple) -> None:
    """A uint8 observation (ALE's RAM) reaches the net as stored; it makes it float."""
    net = build_net(net_config(net), in_shape, [3])
    x = torch.randint(0, 256, (5, *in_shape), dtype=torch.uint8)
    assert torch.equal(net(x)[0], net(x.float())[0])


def test_an_optimizer_state_in_another_layout_takes_its_parameters_layout() -> None:
    """Adam's moments from a checkpoint of a ConvNet still in NCHW, loaded into one in
    channels_last: `match_state_layout` gives them the parameters' layout (fused AdamW misreads
    them otherwise), so a step from the loaded state equals the old net's step."""
    net = build_net(net_config(SMALL_CONV), (2, 16, 16), [3])
    old = copy.deepcopy(net).to(memory_format=torch.contiguous_format)
    old_optim = torch.optim.AdamW(old.parameters(), lr=0.1, fused=True)
    x = frames(shape=(2, 16, 16))
    old(x)[0].sum().backward()
    old_optim.step()
    net.load_state_dict(old.state_dict())
    optim = torch.optim.AdamW(net.parameters(), lr=0.1, fused=True)
    optim.load_state_dict(copy.deepcopy(old_optim.state_dict()))  # as from a file
    weight = net.body[0].weight
    assert optim.state[weight]["exp_avg"].stride() != weight.stride()  # as torch loads it
    net_util.match_state_layout(optim)
    for p in net.parameters():
        assert all(optim.state[p][k].stride() == p.stride() for k in ("exp_avg", "exp_avg_sq"))
    grads = [
        torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) for p in net.parameters()
    ]
    for model, o in ((old, old_optim), (net, optim)):
        for p, g in zip(model.parameters(), grads, strict=True):
            p.grad = torch.empty_like(p).copy_(g)
        o.step()
    torch.testing.assert_close(weight, old.body[0].weight)


def test_conv_batch_norm_and_bad_input() -> None:
    net = build_net(net_config({**SMALL_CONV, "batch_norm": True}), (2, 16, 16), [3])
    bns = [m for m in net.body if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(bns) == 1 and int(bns[0].num_batches_tracked) == 0  # the sizing pass left BN alone
    assert net(frames(5, (2, 16, 16)))[0].shape == (5, 3)
    with pytest.raises(
        ValueError, match=r"ConvNet needs an image input \(C, H, W\), got shape \(4,\)"
    ):
        build_net(net_config(SMALL_CONV), (4,), [2])


@pytest.mark.parametrize("cell_type", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_uses_the_whole_sequence(cell_type: str, bidirectional: bool) -> None:
    spec = {
        "type": "RecurrentNet",
        "cell_type": cell_type,
        "rnn_hidden_size": 16,
        "rnn_num_layers": 2,
        "fc_hid_layers": [8],
        "seq_len": 5,
        "bidirectional": bidirectional,
    }
    torch.manual_seed(0)
    net = build_net(net_config(spec), (5, 4), [2, 1])
    x = torch.randn(3, 5, 4)
    outs = net(x)
    assert [tuple(o.shape) for o in outs] == [(3, 2), (3, 1)]
    early = x.clone()
    early[:, 0] += 1.0  # only the oldest step differs
    assert not torch.allclose(net(early)[0], outs[0])
    torch.testing.assert_close(net(x.clone())[0], outs[0])


def test_recurrent_through_policy_nets() -> None:
    spec = {"type": "RecurrentNet", "rnn_hidden_size": 8, "seq_len": 3, "shared": True}
    nets = PolicyNets(net_spec(spec), (3, 4), discrete=True, action_dim=2, with_critic=True)
    logits, log_std, v = nets.pdparam_value(torch.randn(5, 3, 4))
    assert logits.shape == (5, 2) and log_std is None and v.shape == (5,)


def test_mlp_flattens_multi_dim_input() -> None:
    net = build_net(net_config({"type": "MLPNet", "hid_layers": [8]}), (3, 4), [2])
    x = torch.randn(5, 3, 4)
    assert net.body[0].in_features == 12
    torch.testing.assert_close(net(x)[0], net.heads[0](net.body(x.reshape(5, 12))))


def test_env_stacks_sequences_per_episode() -> None:
    """Stacked obs: last = the current obs, earlier = the same episode's previous obs, zeros
    before the episode start; a final obs (SAME_STEP autoreset) is stacked too."""
    seq_len, num_envs = 3, 2
    spec = {"name": "CartPole-v1", "num_envs": num_envs, "max_frame": 10**6}
    stacked, flat = make_env(spec, seq_len=seq_len), make_env(spec)
    assert stacked.info.observation_space.shape == (seq_len, 4)
    obs, flat_obs = stacked.reset(), flat.reset()
    assert obs.shape == (num_envs, seq_len, 4)
    np.testing.assert_array_equal(obs[:, -1], flat_obs)
    assert not obs[:, :-1].any()
    history = [[o] for o in flat_obs]  # each env's current episode
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(200):
        actions = rng.integers(0, 2, num_envs)
        t, flat_t = stacked.step(actions), flat.step(actions)
        obs, terms, truncs, real_next = stacked.obs, t.terminateds, t.truncateds, t.next_obs
        flat_obs, flat_real_next = flat.obs, flat_t.next_obs
        np.testing.assert_array_equal(obs[:, -1], flat_obs)
        for i in range(num_envs):
            history[i].append(flat_real_next[i])
            window = history[i][-seq_len:]
            expected = np.stack([np.zeros(4)] * (seq_len - len(window)) + window)
            np.testing.assert_array_equal(real_next[i], expected)
            if terms[i] or truncs[i]:
                ends += 1
                assert not obs[i, :-1].any()  # the next episode starts on zero padding
                history[i] = [flat_obs[i]]
            else:
                np.testing.assert_array_equal(obs[i], real_next[i])
    assert ends >= 4


def test_obs_normalizer_on_stacked_obs() -> None:
    spec = {"name": "CartPole-v1", "num_envs": 2, "max_frame": 10**6, "normalize_obs": True}
    env = make_env(spec, seq_len=4)
    env.reset()
    for _ in range(20):
        real_next = env.step(np.zeros(2, dtype=np.int64)).next_obs
        obs = env.obs
    assert obs.shape == real_next.shape == (2, 4, 4) and np.isfinite(obs).all()
    assert env.obs_norm.rms.mean.shape == (4, 4)


def test_env_seq_len() -> None:
    rnn = {"type": "RecurrentNet", "rnn_hidden_size": 8, "seq_len": 4}
    assert env_seq_len(net_spec(rnn)) == 4
    assert env_seq_len(net_spec({"type": "MLPNet", "seq_len": 4})) is None
    assert env_seq_len(None) is None  # an agent without a net (Random)


@pytest.mark.parametrize(
    ("cls", "spec", "in_shape"),
    [
        (DuelingMLPNet, {"type": "DuelingMLPNet", "hid_layers": [16]}, (4,)),
        (DuelingConvNet, {**SMALL_CONV, "type": "DuelingConvNet"}, (2, 16, 16)),
    ],
)
def test_dueling_q_is_v_plus_centered_advantage(cls: type, spec: dict, in_shape: tuple) -> None:
    torch.manual_seed(0)
    net = build_net(net_config(spec), in_shape, [5])
    assert isinstance(net, cls)
    x = torch.randn(7, *in_shape)
    (q,) = net(x)
    assert q.shape == (7, 5)
    v, a = net.value_advantage(x)
    assert v.shape == (7, 1) and a.shape == (7, 5)
    assert not torch.allclose(a.mean(-1), torch.zeros(7), atol=1e-3)  # A itself is not centered
    torch.testing.assert_close((q - v).mean(-1), torch.zeros(7), atol=1e-6, rtol=0)
    torch.testing.assert_close(q - v, a - a.mean(-1, keepdim=True))


def test_dueling_needs_one_head() -> None:
    with pytest.raises(ValueError, match=r"out_dims must be \[n_actions\]"):
        build_net(net_config({"type": "DuelingMLPNet"}), (4,), [2, 1])


def test_batch_renorm_eval_uses_running_stats() -> None:
    brn = BatchRenorm1d(3)
    with torch.no_grad():
        brn.running_mean.copy_(torch.tensor([1.0, -2.0, 0.5]))
        brn.running_var.copy_(torch.tensor([4.0, 0.25, 1.0]))
        brn.weight.copy_(torch.tensor([2.0, 1.0, -1.0]))
        brn.bias.copy_(torch.tensor([0.0, 3.0, 1.0]))
    brn.eval()
    x = torch.randn(6, 3)
    expected = (x - brn.running_mean) / torch.sqrt(
        brn.running_var + brn.eps
    ) * brn.weight + brn.bias
    torch.testing.assert_close(brn(x), expected)
    assert int(brn.num_batches_tracked) == 0  # eval leaves the statistics alone


def test_batch_renorm_train_is_batch_norm_in_warmup_then_corrects() -> None:
    x = torch.randn(32, 3) * 3.0 + 2.0
    brn = BatchRenorm1d(3, warmup_steps=1)
    with torch.no_grad():
        brn.weight.copy_(torch.tensor([2.0, 1.0, -1.0]))
        brn.bias.copy_(torch.tensor([0.0, 3.0, 1.0]))
    # step 0: r = 1, d = 0 although the running stats (0, 1) are far from the batch's
    out = brn(x)
    torch.testing.assert_close(
        out, F.batch_norm(x, None, None, brn.weight, brn.bias, training=True, eps=brn.eps)
    )
    torch.testing.assert_close(brn.running_mean, 0.01 * x.mean(0))
    torch.testing.assert_close(brn.running_var, 0.99 + 0.01 * x.var(0))
    # after the warm-up r and d are clipped to r_max 3, d_max 5 and move the output
    mean, std = brn.running_mean.clone(), torch.sqrt(brn.running_var + brn.eps)
    batch_std = torch.sqrt(x.var(0, unbiased=False) + brn.eps)
    r = (batch_std / std).clamp(1 / 3, 3)
    d = ((x.mean(0) - mean) / std).clamp(-5, 5)
    expected = ((x - x.mean(0)) / batch_std * r + d) * brn.weight + brn.bias
    out = brn(x)
    torch.testing.assert_close(out, expected)
    assert not torch.allclose(out, F.batch_norm(x, None, None, brn.weight, brn.bias, True))
    # r and d are constants: a renormalized batch sums to a constant per feature, so its sum has
    # no gradient (a d with a gradient would add weight / sigma per element)
    xg = x.clone().requires_grad_()
    brn(xg).sum().backward()
    torch.testing.assert_close(xg.grad, torch.zeros_like(xg), atol=1e-4, rtol=0)


def test_mlp_batch_renorm_layers() -> None:
    spec = {
        "type": "MLPNet",
        "hid_layers": [8, 8],
        "batch_renorm": True,
        "batch_renorm_warmup_steps": 5,
    }
    net = build_net(net_config(spec), (4,), [1])
    brns = [m for m in net.body if isinstance(m, BatchRenorm1d)]
    assert len(brns) == 2 and all(m.warmup_steps == 5 for m in brns)
    kinds = [type(m).__name__ for m in net.body]
    assert kinds == ["Linear", "BatchRenorm1d", "ReLU"] * 2  # before each activation
    assert net(torch.randn(16, 4))[0].shape == (16, 1)


def test_check_net_input() -> None:
    nature = net_config(NATURE)
    assert (
        check_net_input(nature, (4,), "CartPole-v1")
        == "agent.net.type: ConvNet needs an image observation (C, H, W); CartPole-v1 gives shape (4,)"
    )
    assert check_net_input(nature, (4, 84, 84)) is None
    assert check_net_input(net_config({**SMALL_CONV, "type": "DuelingConvNet"}), (8,)) is not None
    rnn = {"type": "RecurrentNet", "rnn_hidden_size": 8}
    # a RecurrentNet without seq_len is refused when its config is parsed
    with pytest.raises(SpecError) as err:
        net_config(rnn)
    assert str(err.value) == (
        "agent.net.seq_len: required by RecurrentNet (how many recent observations it reads)"
    )
    assert check_net_input(net_config({**rnn, "seq_len": 4}), (4,)) is None
    assert check_net_input(net_config({"type": "MLPNet"}), (4, 84, 84)) is None


@pytest.mark.parametrize(
    ("net", "error"),
    [
        ({"type": "ConvNet"}, "agent.net.conv_hid_layers: required by ConvNet"),
        (
            {"type": "ConvNet", "conv_hid_layers": [[32, 8, 4, 0]]},
            "agent.net.conv_hid_layers: expected rows [out_channels, kernel, stride, padding, dilation]",
        ),
        ({"type": "ConvNet", "conv_hid_layers": [[32, 8, 0, 0, 1]]}, "agent.net.conv_hid_layers"),
        (
            {**SMALL_CONV, "fc_hid_layers": [0]},
            "agent.net.fc_hid_layers: expected a list of positive ints",
        ),
        (
            {"type": "RecurrentNet", "seq_len": 4},
            "agent.net.rnn_hidden_size: required by RecurrentNet",
        ),
        (
            {"type": "RecurrentNet", "rnn_hidden_size": 8, "cell_type": "gru"},
            "agent.net.cell_type: 'gru' is not one of RNN, LSTM, GRU",
        ),
        (
            {"type": "RecurrentNet", "rnn_hidden_size": 8, "seq_len": 0},
            "agent.net.seq_len: must be > 0",
        ),
        (
            {"type": "MLPNet", "batch_norm": True, "critic_batch_renorm": True},
            "agent.net.critic_batch_renorm: choose batch_renorm or batch_norm, not both",
        ),
    ],
)
def test_check_net_errors(net: dict, error: str) -> None:
    with pytest.raises(SpecError) as err:
        net_spec(net)
    assert str(err.value).startswith(error)


def test_check_net_accepts_new_types() -> None:
    conv = net_spec({**NATURE, "batch_norm": True, "normalize": True}).base
    assert (conv.type, conv.batch_norm, conv.normalize) == ("ConvNet", True, True)
    rnn = net_spec(
        {
            "type": "RecurrentNet",
            "cell_type": "LSTM",
            "rnn_hidden_size": 8,
            "seq_len": 4,
            "actor_fc_hid_layers": [16],
            "critic_rnn_hidden_size": 16,
        }
    )
    assert (rnn.actor.cell_type, rnn.actor.fc_hid_layers, rnn.actor.rnn_hidden_size) == (
        "LSTM",
        [16],
        8,
    )
    assert (rnn.critic.fc_hid_layers, rnn.critic.rnn_hidden_size) == ([], 16)
    mlp = net_spec({"type": "MLPNet", "critic_batch_renorm": True})
    assert (mlp.actor.batch_renorm, mlp.critic.batch_renorm) == (False, True)
