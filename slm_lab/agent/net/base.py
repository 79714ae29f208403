"""Net: the base of every net type, a body (the subclass's `embed`) then one linear head per output."""

import torch
from torch import nn

from slm_lab.agent.net import net_util
from slm_lab.agent.net.batch_renorm import BatchRenorm1d
from slm_lab.agent.net.config import DEFAULT_ACTIVATION, NetConfig


class Net(nn.Module):
    """Heads, optional state-independent log-std and output activation, shared by all net types.

    A subclass builds its body, then calls `init_heads` with the body's feature width, and
    implements `embed(x) -> features`, where x holds the observations as stored (uint8 frames,
    say): converting them to float32 is the net's job (a caller's `.float()` would be one more
    full-size copy of the batch). `heads` holds one linear head per entry of `out_dims`;
    `head_gains` the init gain (std) of each head (e.g. actor_init_std 0.01, critic_init_std
    1.0), None for the body's init. `log_std_dim` adds a state-independent log-std parameter.
    """

    heads: nn.ModuleList
    out_activation: nn.Module | None
    log_std: nn.Parameter | None
    bf16: bool = False  # precision bf16-mixed: the body under torch.autocast to bfloat16

    def init_heads(
        self,
        net: NetConfig,
        feat_dim: int,
        out_dims: list[int],
        head_gains: list[float | None] | None,
        log_std_dim: int,
    ) -> None:
        init_fn = net.init_fn
        self.bf16 = net.precision == "bf16-mixed"
        self.heads = nn.ModuleList()
        for dim, gain in zip(out_dims, head_gains or [None] * len(out_dims), strict=True):
            head = nn.Linear(feat_dim, dim)
            if gain is not None:
                net_util.init_layer(head, init_fn or "orthogonal_", None, gain=gain)
            else:
                net_util.init_layer(head, init_fn, None)
            self.heads.append(head)
        self.out_activation = (
            net_util.get_activation(net.out_layer_activation) if net.out_layer_activation else None
        )
        self.log_std = (
            nn.Parameter(torch.full((log_std_dim,), net.log_std_init or 0.0))
            if log_std_dim
            else None
        )

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def embed_bf16(self, x: torch.Tensor) -> torch.Tensor:
        """`precision: bf16-mixed`'s embed: the body under torch.autocast to bfloat16 (its matrix
        products and convolutions in bfloat16, the weights float32), the features made float32
        for the heads."""
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            h = self.embed(x)
        return h.float()

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = self.embed_bf16(x) if self.bf16 else self.embed(x)
        # head.forward called directly: nn.Module.__call__'s hook dispatch costs more than a
        # small linear layer itself
        outs = [head.forward(h) for head in self.heads]
        if self.out_activation is not None:
            outs = [self.out_activation(o) for o in outs]
        return outs


def hidden_layers(
    net: NetConfig, in_dim: int, widths: list[int], norm: bool = True
) -> tuple[list[nn.Module], int]:
    """Per width: Linear, the spec's norm layers (batch renorm, batch norm, layer norm), activation.

    Returns (layers, output width). `norm` False leaves out the norm layers.
    """
    activation = net.hid_layers_activation or DEFAULT_ACTIVATION
    layers: list[nn.Module] = []
    last = in_dim
    for width in widths:
        linear = nn.Linear(last, width)
        net_util.init_layer(linear, net.init_fn, activation)
        layers.append(linear)
        if norm and net.batch_renorm:
            warmup = net.batch_renorm_warmup_steps
            layers.append(
                BatchRenorm1d(width)
                if warmup is None
                else BatchRenorm1d(width, warmup_steps=warmup)
            )
        if norm and net.batch_norm:
            layers.append(nn.BatchNorm1d(width))
        if norm and net.layer_norm:
            layers.append(nn.LayerNorm(width))
        layers.append(net_util.get_activation(activation))
        last = width
    return layers, last
