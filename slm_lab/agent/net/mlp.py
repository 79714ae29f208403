"""MLPNet: an MLP body with one linear head per output."""

import math

import torch
from torch import nn

from slm_lab.agent.net.base import Net, hidden_layers
from slm_lab.agent.net.config import NetConfig


class MLPNet(Net):
    """Body `hid_layers` x `hid_layers_activation` (optional batch renorm, batch or layer norm
    before each activation), then heads (see Net). An input of more than one dim is flattened.
    """

    def __init__(
        self,
        net: NetConfig,
        in_shape: tuple[int, ...],
        out_dims: list[int],
        head_gains: list[float | None] | None = None,
        log_std_dim: int = 0,
    ) -> None:
        super().__init__()
        self.flatten = len(in_shape) > 1
        layers, last = hidden_layers(net, math.prod(in_shape), net.hid_layers)
        self.body = nn.Sequential(*layers)
        self.init_heads(net, last, out_dims, head_gains, log_std_dim)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype is not torch.float32:  # observations as stored (uint8 RAM, say)
            x = x.float()  # (the check: 75 ns; a no-op .float(): 420 ns)
        if self.flatten:
            x = x.flatten(1)
        # layers' forward called directly: nn.Module.__call__'s hook dispatch cost more than
        # the layers themselves on small nets (a 2x64 MLP on 8 obs: 90 us vs 32 us)
        for layer in self.body:
            x = layer.forward(x)
        return x
