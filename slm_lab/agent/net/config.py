"""The net spec keys, net types and the torch names a net spec may use, without importing torch.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
The torch names (optimizers, LR schedulers and losses with the arguments each takes,
activations, init functions) are read from `torch_names.json`, which
`python -m slm_lab.agent.net.config` regenerates from the installed torch; a test checks that
it matches.
"""

import inspect
import json
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from slm_lab.lib.config import (
    Config,
    SpecError,
    check_value,
    did_you_mean,
    hints,
    key,
    parse,
)

# v5's Hogwild optimizers (GlobalAdam, GlobalRMSprop): torch's own, whose state a Hogwild
# trial shares like any optimizer's (experiment/hogwild.py)
HOGWILD_OPTIM_PREFIX = "Global"
HOGWILD_OPTIMS = ("GlobalAdam", "GlobalRMSprop")
ROLE_PREFIXES = ("actor_", "critic_")
CONV_ROW_LEN = 5  # [out_channels, kernel, stride, padding, dilation]
GPU_VALUES = ("auto", True, False, "false", None)  # a net's gpu key (net_util.get_device)
# net keys that may carry an actor_/critic_ prefix to configure one of the two nets
NET_ROLE_KEYS = (
    "hid_layers",
    "hid_layers_activation",
    "init_fn",
    "clip_grad_val",
    "optim_spec",
    "lr_scheduler_spec",
    "log_std_init",
    "init_std",
    "layer_norm",
    "batch_norm",
    "batch_renorm",
    "batch_renorm_warmup_steps",
    "conv_hid_layers",
    "fc_hid_layers",
    "cell_type",
    "rnn_hidden_size",
    "rnn_num_layers",
    "out_layer_activation",
    "arc",
    "arc_file",
)
CUSTOM_SCHEDULERS = ("LinearToZero", "LinearToMin")  # frame-based, beside torch's own
DEFAULT_ACTIVATION = "relu"  # of hidden layers, when hid_layers_activation is null


# the values torch's optimizers take for their common arguments, as they check them when built
# (in a session, after the run folder is made); infinity is refused too (torch takes it, but the
# first step gives NaN weights)
NONNEGATIVE_OPTIM_ARGS = (
    "eps",
    "weight_decay",
    "momentum",
    "alpha",
    "lr_decay",
    "initial_accumulator_value",
    "momentum_decay",
    "lambd",
)
FLAG_OPTIM_ARGS = ("amsgrad", "maximize", "nesterov", "decoupled_weight_decay")


def optim_value_error(key: str, value: Any) -> str | None:
    """Why an optimizer's argument `key` cannot be `value` (None if it can, or is not known)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if key in NONNEGATIVE_OPTIM_ARGS and not (number and 0 <= value < math.inf):
        return "expected a number >= 0"
    if key == "rho" and not (number and 0 <= value <= 1):
        return "expected a number in [0, 1]"
    if key == "betas" and not (
        isinstance(value, list)
        and len(value) == 2
        and all(
            isinstance(b, int | float) and not isinstance(b, bool) and 0 <= b < 1 for b in value
        )
    ):
        return "expected [beta1, beta2], each in [0, 1)"
    if key in FLAG_OPTIM_ARGS and not isinstance(value, bool):
        return "expected true or false"
    return None


@dataclass(frozen=True)
class OptimSpec(Config):
    """A torch.optim optimizer by name; every other key is its argument (betas, eps, ...)."""

    EXTRA = "kwargs"
    name: str = key(
        doc="a torch.optim optimizer (Adam, RMSprop, ...); v5's GlobalAdam and GlobalRMSprop are"
        " Adam and RMSprop (a Hogwild trial shares any optimizer's state)",
        required=True,
    )
    lr: float | None = key(None, "learning rate (null: the optimizer's own default)", gt=0)
    kwargs: dict[str, Any] = key(
        {},
        "the optimizer's other arguments (betas, eps, ...), checked against the torch class's"
        " signature: one it does not take is an error",
    )

    @property
    def torch_name(self) -> str:
        """The torch.optim class (GlobalAdam: Adam)."""
        if self.name in HOGWILD_OPTIMS:
            return self.name.removeprefix(HOGWILD_OPTIM_PREFIX)
        return self.name

    def check(self, path: str) -> None:
        name = self.torch_name
        check_torch_name(name, "optimizers", f"{path}.name", "torch.optim")
        check_torch_arguments(name, "optimizers", self.arguments(), path)
        for k, v in self.kwargs.items():
            if (error := optim_value_error(k, v)) is not None:
                raise SpecError(f"{path}.{k}: {error}, got {v!r}")
        momentum, dampening = self.kwargs.get("momentum", 0), self.kwargs.get("dampening", 0)
        if name == "SGD" and self.kwargs.get("nesterov") and (momentum <= 0 or dampening != 0):
            raise SpecError(f"{path}.nesterov: needs momentum > 0 and dampening 0")

    def argument_error(self, key: str) -> str | None:
        """Why the optimizer cannot take `key`, or None if it can."""
        return torch_argument_error(self.torch_name, "optimizers", key)

    def arguments(self) -> dict[str, Any]:
        return {**self.kwargs, **({"lr": self.lr} if self.lr is not None else {})}


@dataclass(frozen=True)
class LRSchedulerSpec(Config):
    """A torch.optim.lr_scheduler by name (its arguments beside it), or a frame-based
    LinearToZero / LinearToMin, which step with the frames trained."""

    EXTRA = "kwargs"
    name: str = key(
        doc="a torch.optim.lr_scheduler class, LinearToZero or LinearToMin", required=True
    )
    frame: int | None = key(
        None, "LinearToZero/LinearToMin: frames over which the lr falls (null: env.max_frame)", gt=0
    )
    min_factor: float | None = key(
        None, "LinearToMin: the lr's floor, as a fraction of its start", ge=0, le=1
    )
    kwargs: dict[str, Any] = key(
        {},
        "a torch scheduler's arguments (step_size, gamma, ...), checked against the class's"
        " signature: one it does not take, or one it requires left out, is an error",
    )

    def check(self, path: str) -> None:
        if self.name in CUSTOM_SCHEDULERS:
            if self.name == "LinearToMin" and self.min_factor is None:
                raise SpecError(f"{path}.min_factor: required by LinearToMin")
            if self.kwargs:
                k = next(iter(self.kwargs))
                raise SpecError(f"{path}.{k}: {self.argument_error(k)}")
            return
        check_torch_name(
            self.name,
            "lr_schedulers",
            f"{path}.name",
            "torch.optim.lr_scheduler",
            CUSTOM_SCHEDULERS,
        )
        custom_keys = [k for k in ("frame", "min_factor") if getattr(self, k) is not None]
        check_torch_arguments(self.name, "lr_schedulers", [*self.kwargs, *custom_keys], path)

    def argument_error(self, key: str) -> str | None:
        """Why the scheduler cannot take `key`, or None if it can."""
        if self.name not in CUSTOM_SCHEDULERS:
            return torch_argument_error(self.name, "lr_schedulers", key)
        declared = [k for k in self.keys() if k not in ("name", self.EXTRA)]
        return (
            None
            if key in declared
            else f"{self.name} takes no argument {key}{did_you_mean(key, declared)}"
        )


@dataclass(frozen=True)
class LossSpec(Config):
    """A torch.nn loss by name; every other key is its argument."""

    EXTRA = "kwargs"
    name: str = key(doc="a torch.nn loss (MSELoss, SmoothL1Loss, ...)", required=True)
    kwargs: dict[str, Any] = key(
        {},
        "the loss's arguments (delta, beta, ...), checked against the torch class's signature:"
        " one it does not take is an error",
    )

    def check(self, path: str) -> None:
        check_torch_name(self.name, "losses", f"{path}.name", "torch.nn")
        check_torch_arguments(self.name, "losses", self.kwargs, path)

    def argument_error(self, key: str) -> str | None:
        """Why the loss cannot take `key`, or None if it can."""
        return torch_argument_error(self.name, "losses", key)


DEFAULT_OPTIM = OptimSpec(name="Adam", lr=3e-4)  # a net's optimizer when its spec names none
DEFAULT_LOSS = LossSpec(name="MSELoss")


@dataclass(frozen=True)
class NetConfig(Config):
    """One net's settings: the `net` section with a role's `actor_`/`critic_` keys applied."""

    DEPRECATED = {
        "lr_decay_frequency": "lr_scheduler_spec",
        "lr_decay": "lr_scheduler_spec",
        "lr_decay_min_timestep": "lr_scheduler_spec",
    }

    type: Literal[
        "MLPNet", "ConvNet", "RecurrentNet", "DuelingMLPNet", "DuelingConvNet", "TorchArcNet"
    ] = key(doc="the net's kind", required=True)
    shared: bool = key(False, "actor-critic: one body with a policy head and a value head")
    hid_layers: list[int] = key([64], "MLP hidden layer widths")
    hid_layers_activation: str | None = key(
        None, "a torch activation (relu, tanh, ...) after each hidden layer (null: relu)"
    )
    out_layer_activation: str | None = key(None, "an activation on every head's output")
    init_fn: str | None = key(None, "a torch.nn.init function for the weights (orthogonal_, ...)")
    normalize: bool = key(False, "ConvNet/TorchArcNet: divide uint8 frames by 255")
    batch_norm: bool = key(False, "batch norm after each hidden layer (before its activation)")
    layer_norm: bool = key(False, "layer norm after each hidden layer")
    batch_renorm: bool = key(
        False, "batch renormalization after each hidden layer (CrossQ critics)"
    )
    batch_renorm_warmup_steps: int | None = key(
        None, "training forwards of plain batch norm before renorm's corrections", ge=0
    )
    conv_hid_layers: list[list[int]] | None = key(
        None, "ConvNet rows [out_channels, kernel, stride, padding, dilation]"
    )
    fc_hid_layers: list[int] = key([], "ConvNet/RecurrentNet: fc layer widths after the body")
    cell_type: Literal["RNN", "LSTM", "GRU"] = key("GRU", "RecurrentNet's cell")
    rnn_hidden_size: int | None = key(None, "RecurrentNet's hidden size", gt=0)
    rnn_num_layers: int = key(1, "RecurrentNet's layers", gt=0)
    seq_len: int | None = key(
        None, "RecurrentNet (required there): recent observations it reads", gt=0
    )
    bidirectional: bool = key(False, "RecurrentNet: a bidirectional RNN")
    clip_grad_val: float | None = key(None, "clip the gradient's global 2-norm to this", gt=0)
    use_same_optim: bool = key(False, "actor-critic: one optimizer (the actor's) for both nets")
    loss_spec: LossSpec | None = key(None, "the value/Q loss (default MSELoss)")
    optim_spec: OptimSpec | None = key(None, "the optimizer (default Adam)")
    lr_scheduler_spec: LRSchedulerSpec | None = key(None, "the learning-rate schedule")
    log_std_init: float | None = key(
        None, "continuous policy: a state-independent log-std starting here (null: a log-std head)"
    )
    init_std: float | None = key(None, "the heads' init gain (e.g. actor 0.01, critic 1.0)")
    gpu: Any = key("auto", "auto (CUDA when there is one), true or false")
    precision: Literal["float32", "bf16-mixed"] = key(
        "float32",
        "bf16-mixed: the body's matrix products and convolutions in bfloat16 (torch.autocast);"
        " weights, heads, losses and optimizer stay float32",
    )
    update_type: Literal["replace", "polyak"] | None = key(
        None, "target net: replace every update_frequency frames, or polyak after each step"
    )
    update_frequency: int | None = key(None, "target net (replace): frames between copies", gt=0)
    polyak_coef: float | None = key(
        None, "target net (polyak): blend of the online net", ge=0, le=1
    )
    arc: dict[str, Any] | None = key(None, "TorchArcNet: a torcharc graph spec")
    arc_file: str | None = key(None, "TorchArcNet: the path of a torcharc YAML spec")

    def check(self, path: str) -> None:
        names = torch_names()
        for k in ("hid_layers_activation", "out_layer_activation"):
            v = getattr(self, k)
            if v is not None and v.lower() not in names["activations"]:
                raise SpecError(
                    f"{path}.{k}: {v!r} is not a torch activation{did_you_mean(v.lower(), names['activations'])}"
                )
        if self.init_fn is not None and self.init_fn not in names["init_fns"]:
            raise SpecError(
                f"{path}.init_fn: {self.init_fn!r} is not in torch.nn.init{did_you_mean(self.init_fn, names['init_fns'])}"
            )
        if any(w <= 0 for w in [*self.hid_layers, *self.fc_hid_layers]):
            k = "hid_layers" if any(w <= 0 for w in self.hid_layers) else "fc_hid_layers"
            raise SpecError(
                f"{path}.{k}: expected a list of positive ints, got {getattr(self, k)!r}"
            )
        for row in self.conv_hid_layers or []:
            if not (len(row) == CONV_ROW_LEN and min(row[:3] + row[4:]) > 0 and row[3] >= 0):
                raise SpecError(
                    f"{path}.conv_hid_layers: expected rows [out_channels, kernel, stride, padding, dilation] of ints (padding >= 0, the others > 0), got {row!r}"
                )
        required = {
            "ConvNet": "conv_hid_layers",
            "DuelingConvNet": "conv_hid_layers",
            "RecurrentNet": "rnn_hidden_size",
        }.get(self.type)
        if required and not getattr(self, required):
            raise SpecError(f"{path}.{required}: required by {self.type}")
        if self.type == "RecurrentNet" and self.seq_len is None:
            raise SpecError(
                f"{path}.seq_len: required by RecurrentNet (how many recent observations it reads)"
            )
        if self.gpu not in GPU_VALUES:
            raise SpecError(f"{path}.gpu: expected auto, true or false, got {self.gpu!r}")
        if self.batch_renorm and self.batch_norm:
            raise SpecError(f"{path}.batch_renorm: choose batch_renorm or batch_norm, not both")
        if self.update_type == "polyak" and self.polyak_coef is None:
            raise SpecError(f"{path}.polyak_coef: required by update_type polyak (e.g. 0.005)")


def role_spec(net_spec: dict[str, Any], role: str | None) -> dict[str, Any]:
    """The net spec one net sees: shared keys, overridden by keys prefixed `<role>_`
    (for role 'critic', `critic_optim_spec` becomes its `optim_spec`); role None: no role keys."""
    spec = {k: v for k, v in net_spec.items() if not k.startswith(ROLE_PREFIXES)}
    if role is None:
        return spec
    prefix = f"{role}_"
    own = {k[len(prefix) :]: v for k, v in net_spec.items() if k.startswith(prefix)}
    if own.get("arc") is not None or own.get("arc_file") is not None:
        spec.pop("arc", None)  # a role's own torcharc body replaces the shared one, either key
        spec.pop("arc_file", None)
    spec.update(own)
    return spec


@dataclass(frozen=True)
class NetSpec:
    """A `net` (or `critic_net`) section: the config each role's net is built from."""

    base: NetConfig  # without role keys: a Q-net, or a shared actor-critic
    actor: NetConfig
    critic: NetConfig


def parse_net(section: Any, path: str) -> NetSpec:
    """Check a net section (its role-prefixed keys included) and build each role's config."""
    if not isinstance(section, dict):
        raise SpecError(f"{path}: expected a mapping, got {section!r}")
    for k, v in section.items():
        role_key = k.split("_", 1)[1] if k.startswith(ROLE_PREFIXES) else None
        if role_key is None:
            continue
        if role_key not in NET_ROLE_KEYS:
            known = [*NetConfig.keys(), *(f"{r}{n}" for r in ROLE_PREFIXES for n in NET_ROLE_KEYS)]
            raise SpecError(f"{path}.{k}: unknown key{did_you_mean(k, known)}")
        if v is not None:  # checked under its own name, so a message names the key as written
            check_value(v, hints(NetConfig)[role_key], NetConfig.keys()[role_key], f"{path}.{k}")
    roles = {}
    for role in (None, "actor", "critic"):
        try:
            roles[role or "base"] = parse(NetConfig, role_spec(section, role), path)
        except SpecError as e:  # a role key's own check: name the key as the spec writes it
            raise SpecError(_role_path(str(e), path, role, section)) from None
    return NetSpec(**roles)


def _role_path(message: str, path: str, role: str | None, section: dict[str, Any]) -> str:
    if role is None:
        return message
    for k in NET_ROLE_KEYS:
        if f"{role}_{k}" in section and message.startswith(f"{path}.{k}"):
            return f"{path}.{role}_{k}" + message[len(f"{path}.{k}") :]
    return message


NET_TYPES = typing.get_args(hints(NetConfig)["type"])
IMAGE_NETS = ("ConvNet", "DuelingConvNet")
CELL_TYPES = typing.get_args(hints(NetConfig)["cell_type"])
# names that are not activations among torch.nn's activation modules, plus the aliases we add
ACTIVATION_ALIASES = ("linear", "identity", "leaky_relu")

TORCH_NAMES_PATH = Path(__file__).with_name("torch_names.json")


# what a built class is given beside its spec's arguments: the net's parameters, its optimizer
BUILDER_ARGUMENTS = ("self", "params", "optimizer")
# a class's arguments in the table: {"required": [...], "optional": [...]}, or None when it
# takes any keyword (**kwargs)
Signature = dict[str, list[str]] | None


@cache
def torch_names() -> dict[str, Any]:
    """The names a spec may use: {optimizers, lr_schedulers, losses}: {class name: Signature},
    {activations, init_fns}: [name]."""
    return json.loads(TORCH_NAMES_PATH.read_text())


def torch_signature(cls: type) -> Signature:
    """The keyword arguments a spec may give `cls`: its __init__'s, less BUILDER_ARGUMENTS."""
    params = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name not in BUILDER_ARGUMENTS
    ]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    named = [p for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    return {
        "required": [p.name for p in named if p.default is inspect.Parameter.empty],
        "optional": [p.name for p in named if p.default is not inspect.Parameter.empty],
    }


def current_torch_names() -> dict[str, Any]:
    """The same table read off the installed torch (imports it)."""
    import torch
    from torch import nn

    def subclasses(module: Any, base: type) -> dict[str, type]:
        return {
            n: v
            for n, v in sorted(vars(module).items())
            if not n.startswith("_")
            and isinstance(v, type)
            and issubclass(v, base)
            and v is not base
        }

    def signatures(module: Any, base: type) -> dict[str, Signature]:
        return {n: torch_signature(cls) for n, cls in subclasses(module, base).items()}

    activations = {n.lower() for n in subclasses(nn.modules.activation, nn.Module)}
    return {
        "optimizers": signatures(torch.optim, torch.optim.Optimizer),
        "lr_schedulers": signatures(torch.optim.lr_scheduler, torch.optim.lr_scheduler.LRScheduler),
        "losses": signatures(nn, nn.modules.loss._Loss),
        "activations": sorted(activations | set(ACTIVATION_ALIASES)),
        "init_fns": sorted(
            n
            for n, v in vars(nn.init).items()
            if callable(v) and n.endswith("_") and not n.startswith("_")
        ),
    }


def check_torch_name(
    name: str, kind: str, path: str, module: str, extra: tuple[str, ...] = ()
) -> None:
    """`name` is one of torch's `kind` (see torch_names) or of `extra`; else one line."""
    options = [*torch_names()[kind], *extra]
    if name not in options:
        raise SpecError(f"{path}: {name!r} is not in {module}{did_you_mean(name, options)}")


def torch_argument_error(name: str, kind: str, key: str) -> str | None:
    """Why torch's `name` (one of its `kind`) cannot be given `key`, or None if it can."""
    sig = torch_names()[kind][name]
    if sig is None:  # it takes any keyword
        return None
    accepted = [*sig["required"], *sig["optional"]]
    if key in accepted:
        return None
    return f"{name} takes no argument {key}{did_you_mean(key, accepted)}"


def check_torch_arguments(name: str, kind: str, given: Iterable[str], path: str) -> None:
    """Torch's `name` (one of its `kind`) takes every key of `given` and is given each argument
    it requires; else one line at `path.<key>`."""
    given = list(given)
    for k in given:
        error = torch_argument_error(name, kind, k)
        if error:
            raise SpecError(f"{path}.{k}: {error}")
    sig = torch_names()[kind][name]
    for k in sig["required"] if sig else ():
        if k not in given:
            raise SpecError(f"{path}.{k}: required by {name}")


def env_seq_len(net: "NetSpec | None") -> int | None:
    """How many recent observations the env stacks per step: a RecurrentNet's `seq_len`, else None."""
    return net.base.seq_len if net is not None and net.base.type == "RecurrentNet" else None


def check_net_input(
    net: NetConfig, obs_shape: tuple[int, ...], env_name: str = "the env"
) -> str | None:
    """An error message when the net type cannot take the env's (unstacked) observations, else None."""
    if net.type in IMAGE_NETS and len(obs_shape) != 3:
        return f"agent.net.type: {net.type} needs an image observation (C, H, W); {env_name} gives shape {tuple(obs_shape)}"
    return None


def torch_names_text(names: dict[str, Any]) -> str:
    """The table as JSON, a signature's lists of arguments each on one line."""
    text = json.dumps(names, indent=2) + "\n"
    return re.sub(
        r"\[\n {8}([^\]]*)\n {6}\]",
        lambda m: "[" + " ".join(m.group(1).split()) + "]",
        text,
    )


if __name__ == "__main__":
    TORCH_NAMES_PATH.write_text(torch_names_text(current_torch_names()))
    print(f"wrote {TORCH_NAMES_PATH}")
