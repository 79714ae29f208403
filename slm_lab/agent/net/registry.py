"""Net types by spec name, and `build_net`."""

from slm_lab.agent.net.base import Net
from slm_lab.agent.net.config import NetConfig
from slm_lab.agent.net.conv import ConvNet
from slm_lab.agent.net.dueling import DuelingConvNet, DuelingMLPNet
from slm_lab.agent.net.mlp import MLPNet
from slm_lab.agent.net.recurrent import RecurrentNet
from slm_lab.agent.net.torcharc_net import TorchArcNet

NETS: dict[str, type[Net]] = {
    "MLPNet": MLPNet,
    "ConvNet": ConvNet,
    "RecurrentNet": RecurrentNet,
    "DuelingMLPNet": DuelingMLPNet,
    "DuelingConvNet": DuelingConvNet,
    "TorchArcNet": TorchArcNet,
}


def build_net(
    net: NetConfig,
    in_shape: tuple[int, ...],
    out_dims: list[int],
    head_gains: list[float | None] | None = None,
    log_std_dim: int = 0,
) -> Net:
    """The net named by `net.type`, for inputs of shape `in_shape` (no batch dim)."""
    return NETS[net.type](net, in_shape, out_dims, head_gains, log_std_dim)
