"""TorchArcNet: a body built by the `torcharc` library from the spec's `arc` graph, then heads.

SLM Lab v5.1+ specs describe nets this way:

    net:
      type: TorchArcNet
      arc:                      # a torcharc 2.x spec (or `arc_file`: a path to one)
        modules:
          body:
            Sequential:
              - LazyLinear: {out_features: 64}
              - Tanh:
        graph:
          input: x
          modules: {body: [x]}
          output: body

The body's output width is found by one forward of a zero observation, which also materializes
lazy modules (LazyLinear, LazyConv2d); a body with several outputs (tuple or dict) hands its first to the heads,
and a body output of more than one dim is flattened. Besides torch.nn, an arc can name
BatchRenorm1d, LazyBatchRenorm1d, WeightNormLinear and LazyWeightNormLinear (arc_layers.py). `init_fn` re-initializes the body's linear
and conv layers; `normalize` divides uint8 frames by 255 as ConvNet does; heads and the rest of the net spec work as for MLPNet. With separate actor and
critic nets each gets its own body (`actor_arc` / `critic_arc` give them different graphs).
"""

from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from slm_lab.agent.net import arc_layers, net_util
from slm_lab.agent.net.base import Net
from slm_lab.agent.net.config import NetConfig
from slm_lab.agent.net.conv import PIXEL_MAX


def build_body(net: NetConfig) -> nn.Module:
    """torcharc's GraphModule from `arc` (a spec dict) or `arc_file` (a path to a YAML spec)."""
    import torcharc  # imported when used: it brings pydantic, which other nets do not need

    arc_layers.register()
    arc = net.arc or net.arc_file
    if arc is None:
        raise ValueError("arc: TorchArcNet needs an `arc` graph (or an `arc_file` path)")
    return torcharc.build(arc if isinstance(arc, dict) else str(arc))


def body_features(out: Any) -> torch.Tensor:
    """The heads' input from a body's output: the first of several (tuple, list or dict), flat."""
    if isinstance(out, dict):
        out = next(iter(out.values()))
    elif isinstance(out, list | tuple):
        out = out[0]
    return out.flatten(1) if out.dim() > 2 else out


class TorchArcNet(Net):
    def __init__(
        self,
        net: NetConfig,
        in_shape: tuple[int, ...],
        out_dims: list[int],
        head_gains: list[float | None] | None = None,
        log_std_dim: int = 0,
    ) -> None:
        super().__init__()
        self.normalize = net.normalize
        self.body = build_body(net)
        was_training = self.body.training
        self.body.eval()  # the probe forward leaves batch-norm statistics alone
        with torch.no_grad():
            feat_dim = self.features(torch.zeros(1, *in_shape)).shape[1]
        self.body.train(was_training)
        init_fn = net.init_fn
        activation = net.hid_layers_activation
        for module in self.body.modules():
            if isinstance(
                module, nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d
            ) and not parametrize.is_parametrized(module):  # weight-normed: g and v stay as built
                net_util.init_layer(module, init_fn, activation)
        self.init_heads(net, feat_dim, out_dims, head_gains, log_std_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return body_features(self.body(x))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:  # one new tensor, divided in place (as ConvNet.embed)
            return self.features(x.to(torch.float32, copy=True).div_(PIXEL_MAX))
        return self.features(x.float())


def check_arc(net: NetConfig, in_shape: tuple[int, ...], path: str) -> str | None:
    """Build the torcharc body one net's spec names and run it on a zero input of `in_shape`;
    the failure as a one-line message about `path` (e.g. agent.net.critic_arc), else None."""
    if not (net.arc or net.arc_file):
        return f"{path}: TorchArcNet needs an `arc` graph (a torcharc spec) or an `arc_file` path"
    try:
        body = build_body(net)
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
