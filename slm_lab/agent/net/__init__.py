"""Net types by spec name, and the checks and env settings that depend on the net type."""

from typing import Any

import torch

from slm_lab.agent.net.base import Net
from slm_lab.agent.net.conv import ConvNet
from slm_lab.agent.net.dueling import DuelingConvNet, DuelingMLPNet
from slm_lab.agent.net.mlp import MLPNet
from slm_lab.agent.net.recurrent import RecurrentNet
from slm_lab.agent.net.torcharc_net import TorchArcNet, build_body

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
    if net_type == "TorchArcNet":
        return check_arcs(net_spec, obs_shape)
    if net_type == "RecurrentNet":
        seq_len = net_spec.get("seq_len")
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
            return f"agent.net.seq_len: RecurrentNet needs a positive int seq_len (how many recent observations it reads), got {seq_len!r}"
    return None


def check_arcs(net_spec: dict[str, Any], obs_shape: tuple[int, ...]) -> str | None:
    """Build each torcharc body the spec names (shared, actor_, critic_) and run it on a zero
    observation; the first failure as a one-line message."""
    roles = [
        p
        for p in ("", "actor_", "critic_")
        if net_spec.get(f"{p}arc") or net_spec.get(f"{p}arc_file")
    ]
    if "" not in roles and not {"actor_", "critic_"} <= set(roles):
        return "agent.net.arc: TorchArcNet needs an `arc` graph (a torcharc spec) or an `arc_file` path"
    for prefix in roles:
        key = f"{prefix}arc" if net_spec.get(f"{prefix}arc") else f"{prefix}arc_file"
        try:
            body = build_body(
                {"arc": net_spec.get(f"{prefix}arc"), "arc_file": net_spec.get(f"{prefix}arc_file")}
            )
            with torch.no_grad():
                body.eval()(torch.zeros(1, *obs_shape))
        except Exception as e:  # torcharc raises pydantic, torch and file errors alike
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return f"agent.net.{key}: torcharc cannot build it for observations of shape {tuple(obs_shape)}: {first}"
    return None
