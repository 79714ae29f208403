"""Net types by spec name, and the checks and env settings that depend on the net type."""

from typing import Any

import torch

from slm_lab.agent.net.base import Net
from slm_lab.agent.net.conv import ConvNet
from slm_lab.agent.net.dueling import DuelingConvNet, DuelingMLPNet
from slm_lab.agent.net.mlp import MLPNet
from slm_lab.agent.net.recurrent import RecurrentNet
from slm_lab.agent.net.torcharc_net import TorchArcNet, body_features, build_body

NETS: dict[str, type[Net]] = {
    "MLPNet": MLPNet,
    "ConvNet": ConvNet,
    "RecurrentNet": RecurrentNet,
    "DuelingMLPNet": DuelingMLPNet,
    "DuelingConvNet": DuelingConvNet,
    "TorchArcNet": TorchArcNet,
}
IMAGE_NETS = ("ConvNet", "DuelingConvNet")


def build_net(
    net_spec: dict[str, Any],
    in_shape: tuple[int, ...],
    out_dims: list[int],
    head_gains: list[float | None] | None = None,
    log_std_dim: int = 0,
) -> Net:
    """The net named by `net_spec["type"]`, for inputs of shape `in_shape` (no batch dim)."""
    return NETS[net_spec["type"]](net_spec, in_shape, out_dims, head_gains, log_std_dim)


def env_seq_len(agent_spec: dict[str, Any]) -> int | None:
    """How many recent observations the env stacks per step: a RecurrentNet's `seq_len`, else None."""
    net_spec = agent_spec.get("net") or {}
    return net_spec.get("seq_len") if net_spec.get("type") == "RecurrentNet" else None


def check_net_input(
    net_spec: dict[str, Any], obs_shape: tuple[int, ...], env_name: str = "the env"
) -> str | None:
    """An error message when the net type cannot take the env's (unstacked) observations, else None."""
    net_type = net_spec.get("type")
    if net_type in IMAGE_NETS and len(obs_shape) != 3:
        return f"agent.net.type: {net_type} needs an image observation (C, H, W); {env_name} gives shape {tuple(obs_shape)}"
    if net_type == "RecurrentNet":
        seq_len = net_spec.get("seq_len")
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
            return f"agent.net.seq_len: RecurrentNet needs a positive int seq_len (how many recent observations it reads), got {seq_len!r}"
    return None


def check_arc(net_spec: dict[str, Any], in_shape: tuple[int, ...], path: str) -> str | None:
    """Build the torcharc body one net's spec names and run it on a zero input of `in_shape`;
    the failure as a one-line message about `path` (e.g. agent.net.critic_arc), else None."""
    if not (net_spec.get("arc") or net_spec.get("arc_file")):
        return f"{path}: TorchArcNet needs an `arc` graph (a torcharc spec) or an `arc_file` path"
    try:
        body = build_body(net_spec)
        with torch.no_grad():
            body_features(body.eval()(torch.zeros(1, *in_shape)))
    except Exception as e:  # torcharc raises pydantic, torch and file errors alike
        return f"{path}: torcharc cannot build it for inputs of shape {tuple(in_shape)}: {first_line(e)}"
    return None


def first_line(e: Exception) -> str:
    """A one-line reason: pydantic's first error (location and message), else the first line."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return f"{'.'.join(str(x) for x in first.get('loc', ()))}: {first.get('msg', '')}"
        except Exception:  # not a pydantic error after all
            pass
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
