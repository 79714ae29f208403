"""MLPNet: an MLP body with one linear head per output."""

from typing import Any

import torch
from torch import nn

from slm_lab.agent.net import net_util


class MLPNet(nn.Module):
    """Body `hid_layers` x `hid_layers_activation` (optional layer/batch norm), then heads.

    `out_dims` gives one head per entry; `head_gains` the init gain (std) of each head
    (e.g. actor_init_std 0.01, critic_init_std 1.0), None for the body's init.
    `log_std_dim` adds a state-independent log-std parameter (continuous policies).
    """

    def __init__(
        self,
        net_spec: dict[str, Any],
        in_dim: int,
        out_dims: list[int],
        head_gains: list[float | None] | None = None,
        log_std_dim: int = 0,
    ) -> None:
        super().__init__()
        activation = net_spec.get("hid_layers_activation", "relu")
        init_fn = net_spec.get("init_fn")
        layers: list[nn.Module] = []
        last = in_dim
        for width in net_spec.get("hid_layers", [64]):
            linear = nn.Linear(last, width)
            net_util.init_layer(linear, init_fn, activation)
            layers.append(linear)
            if net_spec.get("batch_norm"):
                layers.append(nn.BatchNorm1d(width))
            if net_spec.get("layer_norm"):
                layers.append(nn.LayerNorm(width))
            layers.append(net_util.get_activation(activation))
            last = width
        self.body = nn.Sequential(*layers)
        self.heads = nn.ModuleList()
        head_gains = head_gains or [None] * len(out_dims)
        for dim, gain in zip(out_dims, head_gains, strict=True):
            head = nn.Linear(last, dim)
            if gain is not None:
                net_util.init_layer(head, init_fn or "orthogonal_", None, gain=gain)
            else:
                net_util.init_layer(head, init_fn, None)
            self.heads.append(head)
        self.out_activation = (
            net_util.get_activation(net_spec["out_layer_activation"])
            if net_spec.get("out_layer_activation")
            else None
        )
        self.log_std = (
            nn.Parameter(torch.full((log_std_dim,), float(net_spec.get("log_std_init", 0.0))))
            if log_std_dim
            else None
        )

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        # layers' forward called directly: nn.Module.__call__'s hook dispatch cost more than
        # the layers themselves on small nets (a 2x64 MLP on 8 obs: 90 us vs 32 us)
        for layer in self.body:
            x = layer.forward(x)
        outs = [head.forward(x) for head in self.heads]
        if self.out_activation is not None:
            outs = [self.out_activation(o) for o in outs]
        return outs
