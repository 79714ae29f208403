"""Layers a torcharc `arc` spec can name, registered in `torch.nn` (where torcharc looks names up):

- `BatchRenorm1d(num_features, ...)` and `LazyBatchRenorm1d(...)` (num_features from the first
  input): CrossQ's batch renormalization (see batch_renorm.py).
- `WeightNormLinear(in_features, out_features)` and `LazyWeightNormLinear(out_features)`: a
  linear layer with weight normalization (Salimans & Kingma 2016), w = g * v / ||v||, through
  torch's `parametrizations.weight_norm`.

The lazy ones follow torch's LazyModuleMixin: they become their plain class on the first forward
(TorchArcNet runs one on a zero observation before any optimizer sees the parameters).
"""

import warnings

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.utils.parametrizations import weight_norm

from slm_lab.agent.net.batch_renorm import D_MAX, MOMENTUM, R_MAX, WARMUP_STEPS, BatchRenorm1d


class LazyBatchRenorm1d(LazyModuleMixin, BatchRenorm1d):
    cls_to_become = BatchRenorm1d

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float = MOMENTUM,
        r_max: float = R_MAX,
        d_max: float = D_MAX,
        warmup_steps: int = WARMUP_STEPS,
    ) -> None:
        super().__init__(0, eps, momentum, r_max, d_max, warmup_steps)
        self.weight = nn.UninitializedParameter()
        self.bias = nn.UninitializedParameter()
        self.running_mean = nn.UninitializedBuffer()
        self.running_var = nn.UninitializedBuffer()

    def initialize_parameters(self, x: torch.Tensor) -> None:  # type: ignore[override]
        if self.has_uninitialized_params():
            self.num_features = x.shape[-1]
            with torch.no_grad():
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
                self.weight.fill_(1.0)
                self.bias.zero_()
                self.running_mean.zero_()
                self.running_var.fill_(1.0)


class WeightNormLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.linear = weight_norm(nn.Linear(in_features, out_features, bias=bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class LazyWeightNormLinear(LazyModuleMixin, WeightNormLinear):
    cls_to_become = WeightNormLinear

    def __init__(self, out_features: int, bias: bool = True) -> None:
        with warnings.catch_warnings():  # "Initializing zero-element tensors is a no-op"
            warnings.simplefilter("ignore", UserWarning)
            super().__init__(0, out_features, bias)  # a 0-input placeholder, replaced when built
        self.out_features, self.use_bias = out_features, bias
        self.pending = nn.UninitializedParameter()  # marks the module as not yet built

    def initialize_parameters(self, x: torch.Tensor) -> None:  # type: ignore[override]
        if self.has_uninitialized_params():
            del self.pending
            linear = nn.Linear(x.shape[-1], self.out_features, bias=self.use_bias)
            self.linear = weight_norm(linear.to(device=x.device, dtype=x.dtype))


ARC_LAYERS = (BatchRenorm1d, LazyBatchRenorm1d, WeightNormLinear, LazyWeightNormLinear)


def register() -> None:
    """Put the layers in torch.nn under their class names (once; a name torch has is an error)."""
    for cls in ARC_LAYERS:
        existing = getattr(nn, cls.__name__, None)
        if existing is None:
            setattr(nn, cls.__name__, cls)
        elif existing is not cls:
            raise RuntimeError(f"torch.nn already has a {cls.__name__}")
