"""Net helpers: activations, init, optimizers, losses and LR schedulers by torch name, the
gradient step every algorithm takes (`GradStep`), and `eval_mode` for the forwards that are
not gradient steps."""

import contextlib
import copy
import inspect
import math
import platform
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
from torch import nn

from slm_lab.agent.net.batch_renorm import BatchRenorm1d
from slm_lab.agent.net.config import (
    CUSTOM_SCHEDULERS,
    DEFAULT_LOSS,
    DEFAULT_OPTIM,
    LossSpec,
    LRSchedulerSpec,
    OptimSpec,
)
from slm_lab.env.clock import Clock

X86_MACHINES = ("x86_64", "amd64", "i386", "i686")  # platform.machine(), lowercased
_ACTIVATIONS = {
    name.lower(): cls
    for name, cls in vars(nn.modules.activation).items()
    if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module
}
# the aliases of net config ACTIVATION_ALIASES
_ACTIVATIONS.update({"linear": nn.Identity, "identity": nn.Identity, "leaky_relu": nn.LeakyReLU})
# torch.nn.init.calculate_gain's names for our activations (the others get gain 1)
_GAIN_NAMES = {
    "relu": "relu",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "leakyrelu": "leaky_relu",
    "leaky_relu": "leaky_relu",
    "selu": "selu",
}
# layers whose forward differs between train and eval mode: batch statistics (batch norm and
# renorm, instance norm with running stats), dropout, and RReLU's random slopes (in train mode
# it draws from the global generator: acting and targets would too)
MODE_LAYER_TYPES = (
    nn.modules.batchnorm._NormBase,
    BatchRenorm1d,
    nn.modules.dropout._DropoutNd,
    nn.RReLU,
)


def get_activation(name: str) -> nn.Module:
    return _ACTIVATIONS[name.lower()]()


def activation_names() -> list[str]:
    return sorted(_ACTIVATIONS)


def init_layer(
    layer: nn.Linear | nn.Conv2d,
    init_fn: str | None,
    activation: str | None,
    gain: float | None = None,
) -> None:
    """Init a linear or conv layer's weight with `torch.nn.init.<init_fn>` and zero its bias.

    Functions that take a gain (orthogonal_, xavier_*) get `gain` or the activation's
    recommended gain; kaiming_* get the activation as nonlinearity.
    """
    if init_fn is None:
        return
    fn = getattr(nn.init, init_fn)
    params = inspect.signature(fn).parameters
    act = _GAIN_NAMES.get((activation or "").lower())
    if "gain" in params:
        fn(layer.weight, gain=gain if gain is not None else nn.init.calculate_gain(act or "linear"))
    elif "nonlinearity" in params and act in ("relu", "leaky_relu"):
        fn(layer.weight, nonlinearity=act)
    elif "std" in params and gain is not None:
        fn(layer.weight, std=gain)
    else:
        fn(layer.weight)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)


def build_optim(
    optim: OptimSpec | None, params: Any, lr: float | None = None
) -> torch.optim.Optimizer:
    """`torch.optim.<name>(params, **arguments)` (default DEFAULT_OPTIM; `lr` overrides the
    spec's); the fused implementation unless the spec picks one.

    On small nets the per-parameter loop of the default implementation dominated the update
    (Adam step 1.2 ms vs 0.3 ms fused on a 2x64 actor-critic).
    """
    optim = optim or DEFAULT_OPTIM
    spec = {**optim.arguments(), **({"lr": lr} if lr is not None else {})}
    cls = getattr(torch.optim, optim.torch_name)
    params = list(params)
    if (
        "fused" in inspect.signature(cls).parameters
        and "fused" not in spec
        and "foreach" not in spec
    ):
        try:
            return cls(params, fused=True, **spec)
        except RuntimeError:  # a device or dtype without a fused kernel
            pass
    return cls(params, **spec)


# clip_grad_norm_'s guard against a zero norm
CLIP_NORM_EPS = 1e-6


def _skip_dynamo_import() -> None:
    """torch wraps Optimizer's add_param_group, zero_grad, state_dict and load_state_dict in
    torch._disable_dynamo, which imports torch._dynamo at the first call (4.5 s and 170 MB
    here) only to hide them from torch.compile. SLM Lab never compiles: each wrapper is handed
    its own function as the "disabled" one, which is what it runs outside compilation anyway.
    """
    wrapper_code = torch._disable_dynamo(lambda: None).__code__
    for attr in vars(torch.optim.Optimizer).values():
        fn = getattr(attr, "__wrapped__", None)
        if fn is not None and getattr(attr, "__code__", None) is wrapper_code:
            fn.__dynamo_disable = fn


_skip_dynamo_import()


def bare_step(optim: torch.optim.Optimizer) -> Callable[[], Any]:
    """`optim.step` without torch's per-call wrappers: a profiler range, step hooks (SLM Lab
    registers none) and, at the first call, an import of torch._dynamo (4.5 s, 170 MB here).
    The optimizer's own update runs under no_grad, as its wrapper would run it; a fused Adam
    or AdamW calls its kernel directly (`FusedAdamStep`)."""
    if optim.defaults.get("differentiable") or optim._optimizer_step_pre_hooks:
        return optim.step
    update = inspect.unwrap(type(optim).step)
    optim._opt_called = True  # what the wrapper tells an LR scheduler: step() has been called

    def step() -> None:
        with torch.no_grad():
            update(optim)

    if type(optim) in (torch.optim.Adam, torch.optim.AdamW) and optim.defaults.get("fused"):
        return FusedAdamStep(optim, step)
    return step


class FusedAdamStep:
    """A fused torch.optim.Adam's or AdamW's step: the two calls its update makes,
    `_foreach_add_` on the step counts and the fused kernel, with the same arguments, on the
    optimizer's own state, without the Python around them (checking every parameter's state,
    grouping the tensors by device and dtype at each step), which is much of a small net's
    gradient step. The optimizer is unchanged: its state_dict, LR schedulers and param_groups
    (read at each step) work as before. `fallback`, the optimizer's own update, takes a step
    where some parameter with a gradient has no state yet (the first), a group sets an option
    the kernel call here does not pass (amsgrad, capturable, a tensor lr, not fused), or the
    parameters are not all on one device in one dtype (one kernel call takes them all)."""

    KERNELS = {False: torch._fused_adam_, True: torch._fused_adamw_}

    def __init__(self, optim: torch.optim.Optimizer, fallback: Callable[[], None]) -> None:
        self.optim, self.fallback = optim, fallback
        self.groups_seen = 0  # how many param groups `one_kind` was taken over
        self.one_kind = False

    def __call__(self) -> None:
        optim, state = self.optim, self.optim.state
        if len(optim.param_groups) != self.groups_seen:  # built, or a group added since
            self.groups_seen = len(optim.param_groups)
            kinds = {(p.device, p.dtype) for g in optim.param_groups for p in g["params"]}
            self.one_kind = len(kinds) == 1
        if not self.one_kind:
            return self.fallback()
        groups = []
        for group in optim.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [state.get(p) for p in params]
            if (
                not all(states)
                or not group["fused"]
                or group["amsgrad"]
                or group["capturable"]
                or torch.is_tensor(group["lr"])
            ):
                return self.fallback()
            groups.append((group, params, states))
        with torch.no_grad():
            for group, params, states in groups:
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)
                beta1, beta2 = group["betas"]
                self.KERNELS[group["decoupled_weight_decay"]](
                    params,
                    [p.grad for p in params],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=float(beta1),
                    beta2=float(beta2),
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=group["maximize"],
                    grad_scale=None,
                    found_inf=None,
                )


class GradStep:
    """One gradient step of a loss over some optimizers: zero the gradients, backprop, clip each
    parameter group's gradient norm, step every optimizer; no step at all when the loss or a
    gradient is not finite. Built once per set of optimizers: walking modules' parameters and
    torch's per-call wrappers cost more than the small nets' update itself."""

    def __init__(
        self,
        optims: list[torch.optim.Optimizer],
        clip_groups: list[tuple[list[nn.Parameter], float | None]],
    ) -> None:
        self.params = [p for o in optims for g in o.param_groups for p in g["params"]]
        clipped = [(params, float(clip)) for params, clip in clip_groups if clip is not None]
        in_clipped = {id(p) for params, _ in clipped for p in params}
        rest = [p for p in self.params if id(p) not in in_clipped]
        # every parameter's gradient norm is taken (the finiteness check); None: not clipped
        self.groups: list[tuple[list[nn.Parameter], float | None]] = [
            *clipped,
            *([(rest, None)] if rest else []),
        ]
        self.optims = optims
        self.steps = [bare_step(o) for o in optims]

    def __call__(self, loss: torch.Tensor) -> bool:
        """Whether the step was taken. A finite loss can still give a non-finite gradient (PPO's
        exp(log-ratio) overflowing to inf inside a clamp: 0 * inf); stepping on it would make
        every parameter NaN for the rest of the run. One read from the device decides."""
        for p in self.params:
            p.grad = None
        loss.backward()
        groups = [
            (grads, max_norm)
            for params, max_norm in self.groups
            if (grads := [p.grad for p in params if p.grad is not None])
        ]
        norms = [grad_norm(grads) for grads, _ in groups]
        # one read from the device: a NaN or inf among the loss and the norms makes their sum
        # so; only then is each read (finite values can also sum past their dtype's largest)
        total = loss.detach()
        for norm in norms:
            total = total + norm
        if not math.isfinite(float(total)) and not all(
            math.isfinite(float(v)) for v in (loss.detach(), *norms)
        ):
            for p in self.params:
                p.grad = None
            return False
        for (grads, max_norm), norm in zip(groups, norms, strict=True):
            if max_norm is not None:
                torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + CLIP_NORM_EPS), max=1.0))
        for step in self.steps:
            step()
        return True


@torch.no_grad()
def match_state_layout(optim: torch.optim.Optimizer) -> None:
    """Give each per-parameter state tensor of `optim` (Adam's moments, ...) its parameter's memory
    layout. A loaded state keeps the layout it was saved with, and a checkpoint from before a net
    changed layout (ConvNet's channels_last) would otherwise meet its parameters in another one,
    which the fused optimizers' kernels do not handle."""
    for group in optim.param_groups:
        for p in group["params"]:
            state = optim.state.get(p, {})
            for k, v in state.items():
                if torch.is_tensor(v) and v.shape == p.shape and v.stride() != p.stride():
                    state[k] = torch.empty_like(p).copy_(v)


def grad_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of the gradients together, as torch.nn.utils.clip_grad_norm_ takes it
    (foreach) for tensors on one device and dtype, without its per-call grouping of tensors by
    device (a third of its cost on small nets); clipping multiplies by
    min(1, max_norm / (norm + CLIP_NORM_EPS)), as it does."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)


def build_loss(loss: LossSpec | None, reduction: str | None = None) -> nn.Module:
    """`torch.nn.<name>(**arguments)` (default MSELoss); `reduction` overrides the spec's."""
    loss = loss or DEFAULT_LOSS
    kwargs = {**loss.kwargs, **({"reduction": reduction} if reduction else {})}
    return getattr(nn, loss.name)(**kwargs)


def build_lr_scheduler(
    spec: LRSchedulerSpec | None, optim: torch.optim.Optimizer, clock: Clock
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """Any torch.optim.lr_scheduler by name, plus frame-based LinearToZero and LinearToMin.

    The custom ones read the clock, so the LR follows frames exactly, also after a resume; their
    `frame` defaults to the run's max_frame. They count the trial's frames: in a Hogwild trial
    the global count over its workers (whose optimizers are one), elsewhere the session's.
    """
    if spec is None:
        return None
    if spec.name in CUSTOM_SCHEDULERS:
        total = float(spec.frame or clock.global_max_frame)
        min_factor = spec.min_factor or 0.0  # LinearToZero: falls to 0
        return torch.optim.lr_scheduler.LambdaLR(
            optim, lambda _: max(min_factor, 1.0 - (1.0 - min_factor) * clock.global_frame / total)
        )
    return getattr(torch.optim.lr_scheduler, spec.name)(optim, **spec.kwargs)


def get_device(gpu: Any) -> torch.device:
    """`gpu: auto` uses CUDA when present; true requires it; false/None is CPU."""
    if gpu in (False, None, "false", 0):
        return torch.device("cpu")
    if gpu == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device("cuda")


def bf16_native(device: torch.device) -> bool:
    """Whether `device` computes in bfloat16 natively: on CUDA its bf16 support; on an x86 CPU
    AVX512-BF16 or AMX (oneDNN's own check accepts plain AVX-512, where it emulates bfloat16);
    on another CPU oneDNN's check. Elsewhere bfloat16 is emulated, slower than float32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    if platform.machine().lower() in X86_MACHINES:
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


_MODE_LAYERS: weakref.WeakKeyDictionary[nn.Module, tuple[nn.Module, ...]] = (
    weakref.WeakKeyDictionary()
)
_NO_MODE_LAYERS = contextlib.nullcontext()


def mode_layers(net: nn.Module) -> tuple[nn.Module, ...]:
    """The submodules of `net` whose forward depends on train/eval mode (see MODE_LAYER_TYPES,
    plus RNNs and attention with dropout); found on first use and remembered: a built net's
    layers are fixed."""
    layers = _MODE_LAYERS.get(net)
    if layers is None:
        layers = _MODE_LAYERS[net] = tuple(
            m
            for m in net.modules()
            if isinstance(m, MODE_LAYER_TYPES)
            or (isinstance(m, nn.RNNBase | nn.MultiheadAttention) and m.dropout > 0)
        )
    return layers


class _EvalMode:
    """Puts `layers` in eval mode on entry; gives each back the mode it had on exit."""

    __slots__ = ("layers", "was_training")

    def __init__(self, layers: tuple[nn.Module, ...]) -> None:
        self.layers = layers

    def __enter__(self) -> None:
        self.was_training = [m.training for m in self.layers]
        for m in self.layers:
            m.train(False)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for m, training in zip(self.layers, self.was_training, strict=True):
            m.train(training)


def eval_mode(*nets: nn.Module) -> contextlib.AbstractContextManager[None]:
    """`with eval_mode(*nets):` runs the nets in eval mode: batch norm uses and keeps its running
    statistics, dropout is off. For every forward that is not a gradient step (acting, targets,
    the old policy's pass); gradient steps run in train mode, the nets' mode outside the block.

    Only the mode-dependent layers are switched: Module.train walks every submodule (switching a
    2x64 actor-critic to eval and back took 100 us, twice the whole act). The context can be
    built once and entered again after each exit (not inside itself), as acting does.
    """
    layers: tuple[nn.Module, ...] = ()
    for net in nets:
        layers += mode_layers(net)
    return _EvalMode(layers) if layers else _NO_MODE_LAYERS


class TargetNets:
    """Frozen copies of some nets that follow them (DQN's target net, SAC's target critics).

    `replace`: the copies take the nets' weights once `update_frequency` frames have passed
    since the last copy; `polyak`: after every gradient step,
    target <- (1 - polyak_coef) * target + polyak_coef * net (buffers such as batch-norm
    statistics are copied). `update` is called after each gradient step.
    """

    def __init__(
        self,
        nets: list[nn.Module],
        update_type: str,
        update_frequency: int,
        polyak_coef: float,
        clock: Clock,
    ) -> None:
        self.nets = nets
        self.targets = [copy.deepcopy(net).requires_grad_(False) for net in nets]
        self.update_type = update_type
        self.update_frequency = update_frequency
        self.polyak_coef = polyak_coef
        self.clock = clock
        self.last_update = 0  # the frame of the last replace

    def update(self) -> None:
        if self.update_type == "polyak":
            for net, target in zip(self.nets, self.targets, strict=True):
                polyak_update(net, target, self.polyak_coef)
        elif self.clock.frame - self.last_update >= self.update_frequency:
            for net, target in zip(self.nets, self.targets, strict=True):
                target.load_state_dict(net.state_dict())
            self.last_update = self.clock.frame

    def state_dict(self) -> dict[str, int]:
        return {"last_update": self.last_update}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.last_update = state["last_update"]


@torch.no_grad()
def polyak_update(net: nn.Module, target: nn.Module, coef: float) -> None:
    """target <- (1 - coef) * target + coef * net; buffers (e.g. batch-norm stats) copied."""
    torch._foreach_lerp_(list(target.parameters()), list(net.parameters()), coef)
    for tb, b in zip(target.buffers(), net.buffers(), strict=True):
        tb.copy_(b)
