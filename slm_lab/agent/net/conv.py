"""ConvNet: a Conv2d body over image observations (C, H, W), fc layers, then one head per output."""

import torch
from torch import nn

from slm_lab.agent.net import net_util
from slm_lab.agent.net.base import Net, hidden_layers
from slm_lab.agent.net.config import DEFAULT_ACTIVATION, NetConfig

PIXEL_MAX = 255.0


class ConvNet(Net):
    """`conv_hid_layers` rows [out_channels, kernel, stride, padding, dilation], each a Conv2d
    (then BatchNorm2d with `batch_norm`) and `hid_layers_activation`; flatten; `fc_hid_layers`;
    heads (see Net). `normalize` divides the input by 255 (uint8 frames).

    The Nature CNN (Mnih et al. 2015): conv_hid_layers [[32, 8, 4, 0, 1], [64, 4, 2, 0, 1],
    [64, 3, 1, 0, 1]], fc_hid_layers [512].
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
        if len(in_shape) != 3:
            raise ValueError(f"ConvNet needs an image input (C, H, W), got shape {in_shape}")
        activation = net.hid_layers_activation or DEFAULT_ACTIVATION
        self.normalize = net.normalize
        convs: list[nn.Module] = []
        channels = in_shape[0]
        for out_channels, kernel, stride, padding, dilation in net.conv_hid_layers:
            conv = nn.Conv2d(channels, out_channels, kernel, stride, padding, dilation)
            net_util.init_layer(conv, net.init_fn, activation)
            convs.append(conv)
            if net.batch_norm:
                convs.append(nn.BatchNorm2d(out_channels))
            convs.append(net_util.get_activation(activation))
            channels = out_channels
        convs.append(nn.Flatten())
        conv_out = nn.Sequential(*convs).eval()  # eval: the dummy forward leaves BN stats alone
        with torch.no_grad():
            conv_dim = conv_out(torch.zeros(1, *in_shape)).shape[1]
        fcs, last = hidden_layers(net, conv_dim, net.fc_hid_layers, norm=False)
        # channels_last (NHWC): oneDNN's faster convolutions on CPU; the same function
        self.body = nn.Sequential(*convs, *fcs).train().to(memory_format=torch.channels_last)
        self.init_heads(net, last, out_dims, head_gains, log_std_dim)
        self.in_dtype = torch.bfloat16 if self.bf16 else torch.float32

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        # float first, then channels_last: two plain copies took 5 ms for 256 stacked uint8
        # frames, one `to` doing both 7-9 ms. Divided in place where the result is a new tensor
        # (x / 255 would allocate another batch of frames); the caller's input is never written.
        # With bf16-mixed the frames go to bfloat16 at once, half the bytes: 0-255 are exact
        # there, and dividing in bfloat16 rounds as the first convolution's cast of the float32
        # quotient would.
        h = x.to(self.in_dtype).contiguous(memory_format=torch.channels_last)
        if self.normalize:
            h = h.div_(PIXEL_MAX) if h is not x else h / PIXEL_MAX
        for layer in self.body:
            h = layer.forward(h)
        return h
