"""Dueling Q-nets (Wang et al. 2016): Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)."""

import torch

from slm_lab.agent.net.base import Net
from slm_lab.agent.net.config import NetConfig
from slm_lab.agent.net.conv import ConvNet
from slm_lab.agent.net.mlp import MLPNet


class _Dueling(Net):
    """Replaces a net's heads with a value head and an advantage head; outputs [Q].

    Subtracting the mean advantage makes V and A identifiable (A sums to zero over actions).
    `out_dims` must be [n_actions]; its head gain applies to both heads.
    """

    def init_heads(
        self,
        net: NetConfig,
        feat_dim: int,
        out_dims: list[int],
        head_gains: list[float | None] | None,
        log_std_dim: int,
    ) -> None:
        if len(out_dims) != 1 or log_std_dim:
            raise ValueError(
                f"{type(self).__name__} outputs Q(s, a) only: out_dims must be [n_actions] and "
                f"log_std_dim 0, got out_dims {out_dims}, log_std_dim {log_std_dim}"
            )
        gain = head_gains[0] if head_gains else None
        super().init_heads(net, feat_dim, [1, out_dims[0]], [gain, gain], 0)

    def value_advantage(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(V [B, 1], A [B, n_actions]) before the mean is subtracted."""
        h = self.embed_bf16(x) if self.bf16 else self.embed(x)
        return self.heads[0].forward(h), self.heads[1].forward(h)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        v, a = self.value_advantage(x)
        q = v + a - a.mean(-1, keepdim=True)
        if self.out_activation is not None:
            q = self.out_activation(q)
        return [q]


class DuelingMLPNet(_Dueling, MLPNet):
    """MLPNet body with dueling heads."""


class DuelingConvNet(_Dueling, ConvNet):
    """ConvNet body with dueling heads."""
