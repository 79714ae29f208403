"""RecurrentNet: an RNN/LSTM/GRU over a sequence of the last `seq_len` observations."""

import math

import torch
from torch import nn

from slm_lab.agent.net.base import Net, hidden_layers
from slm_lab.agent.net.config import NetConfig


class RecurrentNet(Net):
    """Input [B, seq_len, *obs_shape], oldest observation first (the env stacks them, zero-padded
    at episode starts; see slm_lab.env). Optional `fc_hid_layers` applied to each step, then a
    `cell_type` RNN (`rnn_hidden_size`, `rnn_num_layers`, `bidirectional`), then heads (see Net)
    on the last layer's final hidden state: the last step's output, and with `bidirectional`
    also the backward direction's output at the first step.

    The hidden state is not carried across env steps: each forward reads its whole window, so
    acting and training see the same inputs. `init_fn` applies to the fc layers and heads; the
    recurrent weights keep torch's init.
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
        if len(in_shape) < 2:
            raise ValueError(
                f"RecurrentNet needs a sequence input (seq_len, *obs_shape), got shape {in_shape}"
            )
        cell_type = net.cell_type
        self.flatten = len(in_shape) > 2
        fcs, last = hidden_layers(net, math.prod(in_shape[1:]), net.fc_hid_layers, norm=False)
        self.fc = nn.Sequential(*fcs)
        self.hidden_size = net.rnn_hidden_size
        self.bidirectional = net.bidirectional
        self.rnn = getattr(nn, cell_type)(
            input_size=last,
            hidden_size=self.hidden_size,
            num_layers=net.rnn_num_layers,
            batch_first=True,
            bidirectional=self.bidirectional,
        )
        feat_dim = self.hidden_size * (2 if self.bidirectional else 1)
        self.init_heads(net, feat_dim, out_dims, head_gains, log_std_dim)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype is not torch.float32:  # observations as stored (uint8 RAM, say)
            x = x.float()
        if self.flatten:
            x = x.flatten(2)
        for layer in self.fc:
            x = layer.forward(x)
        out, _ = self.rnn.forward(x)  # [B, seq_len, hidden_size * num_directions]
        if self.bidirectional:
            return torch.cat((out[:, -1, : self.hidden_size], out[:, 0, self.hidden_size :]), -1)
        return out[:, -1]
