"""`precision: bf16-mixed`: the net's body under torch.autocast to bfloat16, the rest float32."""

import copy

import pytest
import torch
from conftest import make_env_agent, make_spec, net_config, net_spec

from slm_lab.agent.net import net_util
from slm_lab.agent.net.registry import build_net
from slm_lab.lib.config import SpecError

SMALL_CONV = {
    "type": "ConvNet",
    "conv_hid_layers": [[8, 4, 2, 0, 1], [8, 3, 1, 0, 1]],
    "fc_hid_layers": [32],
    "normalize": True,
}
ARC = {
    "modules": {"body": {"Sequential": [{"LazyLinear": {"out_features": 32}}, {"Tanh": None}]}},
    "graph": {"input": "x", "modules": {"body": ["x"]}, "output": "body"},
}
NETS = [
    ({"type": "MLPNet", "hid_layers": [64, 64]}, (6,), torch.float32),
    ({"type": "DuelingMLPNet", "hid_layers": [64]}, (6,), torch.float32),
    (SMALL_CONV, (4, 24, 24), torch.uint8),
    ({**SMALL_CONV, "type": "DuelingConvNet"}, (4, 24, 24), torch.uint8),
]
MORE_NETS = [  # bodies whose first layer is not a Linear or Conv2d, or with norm layers
    ({"type": "MLPNet", "hid_layers": [64, 64], "batch_renorm": True}, (6,), torch.float32),
    ({"type": "MLPNet", "hid_layers": [64, 64], "batch_norm": True}, (6,), torch.float32),
    ({"type": "MLPNet", "hid_layers": [64, 64], "layer_norm": True}, (6,), torch.float32),
    (
        {"type": "RecurrentNet", "rnn_hidden_size": 32, "seq_len": 4, "cell_type": "LSTM"},
        (4, 6),
        torch.float32,
    ),
    ({"type": "TorchArcNet", "arc": ARC}, (6,), torch.float32),
]


def inputs(shape: tuple[int, ...], dtype: torch.dtype, batch: int = 16) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (batch, *shape), dtype=dtype, generator=gen)
    return torch.randn((batch, *shape), generator=gen)


def twins(net: dict, in_shape: tuple[int, ...]) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A float32 net and a bf16-mixed one with the same weights."""
    torch.manual_seed(0)
    plain = build_net(net_config(net), in_shape, [3])
    mixed = build_net(net_config({**net, "precision": "bf16-mixed"}), in_shape, [3])
    mixed.load_state_dict(copy.deepcopy(plain.state_dict()))
    return plain, mixed


@pytest.mark.parametrize(("net", "in_shape", "dtype"), NETS)
def test_bf16_mixed_runs_the_body_in_bfloat16(
    net: dict, in_shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    _, mixed = twins(net, in_shape)
    first, seen = mixed.body[0], []
    forward = first.forward  # the nets call their layers' forward directly: no hooks
    first.forward = lambda h: seen.append((out := forward(h)).dtype) or out
    mixed(inputs(in_shape, dtype))
    assert seen == [torch.bfloat16]


@pytest.mark.parametrize(("net", "in_shape", "dtype"), NETS + MORE_NETS)
def test_bf16_mixed_gives_float32_near_the_float32_net(
    net: dict, in_shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    """The outputs, weights and gradients are float32, near the float32 net's (bfloat16 keeps 8
    significant bits) but not equal to them; norm layers' statistics stay float32."""
    plain, mixed = twins(net, in_shape)
    assert not plain.bf16 and mixed.bf16
    x = inputs(in_shape, dtype)
    try:
        out = mixed(x)[0]
    except RuntimeError as e:  # oneDNN has no bfloat16 kernel for this layer on some CPUs
        if "could not create a primitive descriptor" not in str(e):
            raise
        pytest.skip(f"this CPU's oneDNN runs no bfloat16 {net['type']}: {e}")
    expected = plain(x)[0]
    assert out.dtype == torch.float32
    assert not torch.equal(out, expected)
    torch.testing.assert_close(out, expected, rtol=0.05, atol=0.05)
    out.square().mean().backward()
    expected.square().mean().backward()
    for p in mixed.parameters():
        assert p.dtype == p.grad.dtype == torch.float32
    # the whole gradient (one parameter's alone can be ~0, a bias before batch norm)
    grad, expected_grad = (
        torch.cat([p.grad.flatten() for p in n.parameters()]) for n in (mixed, plain)
    )
    assert torch.nn.functional.cosine_similarity(grad, expected_grad, dim=0) > 0.99
    for b in mixed.buffers():
        assert b.dtype in (torch.float32, torch.long)


def test_bf16_mixed_conv_takes_frames_to_bfloat16_at_once() -> None:
    """uint8 frames go straight to bfloat16 and are divided there: exactly what the first
    convolution gets when autocast casts the float32 quotient of the float32 path."""
    plain, mixed = twins(SMALL_CONV, (4, 24, 24))
    got, want = [], []
    mixed_conv, plain_conv = mixed.body[0].forward, plain.body[0].forward
    mixed.body[0].forward = lambda h: got.append(h) or mixed_conv(h)
    plain.body[0].forward = lambda h: want.append(h.to(torch.bfloat16)) or plain_conv(h)
    x = torch.arange(256, dtype=torch.uint8).repeat(9).view(4, 4, 12, 12).repeat(1, 1, 2, 2)
    features = mixed.embed_bf16(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = plain.embed(x).float()
    assert got[0].dtype == torch.bfloat16
    assert got[0].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(got[0], want[0])
    assert torch.equal(features, expected)


def test_float32_is_the_default_and_conv_takes_frames_to_float32() -> None:
    """The default: uint8 frames made float32 in channels_last, exactly x / 255."""
    net = build_net(net_config(SMALL_CONV), (4, 24, 24), [3])
    assert not net.bf16
    seen = []
    conv = net.body[0].forward
    net.body[0].forward = lambda h: seen.append(h) or conv(h)
    x = inputs((4, 24, 24), torch.uint8)
    net(x)
    assert seen[0].dtype == torch.float32
    assert seen[0].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(seen[0], x.float() / 255.0)


@pytest.mark.parametrize(
    ("machine", "avx512_bf16", "amx", "native"),
    [
        ("x86_64", True, False, True),  # AMD Zen 4, Intel Cooper Lake
        ("x86_64", False, True, True),  # Intel Sapphire Rapids
        ("x86_64", False, False, False),  # plain AVX-512 (Skylake) or AVX2: emulated
    ],
)
def test_native_bfloat16_on_x86_needs_avx512_bf16_or_amx(
    monkeypatch: pytest.MonkeyPatch, machine: str, avx512_bf16: bool, amx: bool, native: bool
) -> None:
    monkeypatch.setattr(net_util.platform, "machine", lambda: machine)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert net_util.bf16_native(torch.device("cpu")) is native


def test_a_bad_precision_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        net_spec({"type": "MLPNet", "precision": "fp16"})
    assert str(err.value).startswith(
        "agent.net.precision: 'fp16' is not one of float32, bf16-mixed"
    )


def test_the_agent_has_a_precision_note_only_with_bf16_mixed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(net_util, "bf16_native", lambda device: True)
    spec = make_spec("ppo")
    assert make_env_agent(spec)[1].precision_note() is None
    spec["agent"]["net"]["precision"] = "bf16-mixed"
    assert make_env_agent(spec)[1].precision_note() == (
        "INFO",
        "precision bf16-mixed: native bfloat16 on cpu",
    )
