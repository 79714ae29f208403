"""The net spec keys, net types and the torch names a net spec may use, without importing torch.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
The torch names (optimizers, LR schedulers, losses, activations, init functions) are read from
`torch_names.json`, which `python -m slm_lab.agent.net.config` regenerates from the installed
torch; a test checks that it matches.
"""

import json
from functools import cache
from pathlib import Path
from typing import Any

NET: dict[str, str] = {
    "type": "str",
    "shared": "bool?",
    "hid_layers": "list?",
    "hid_layers_activation": "str?",
    "out_layer_activation": "str?",
    "init_fn": "str?",
    "normalize": "bool?",
    "batch_norm": "bool?",
    "layer_norm": "bool?",
    "batch_renorm": "bool?",
    "batch_renorm_warmup_steps": "int?",
    "conv_hid_layers": "list?",
    "fc_hid_layers": "list?",
    "cell_type": "str?",
    "rnn_hidden_size": "int?",
    "rnn_num_layers": "int?",
    "seq_len": "int?",
    "bidirectional": "bool?",
    "clip_grad_val": "float?",
    "use_same_optim": "bool?",
    "loss_spec": "dict?",
    "optim_spec": "dict?",
    "lr_scheduler_spec": "dict?",
    "log_std_init": "float?",
    "init_std": "float?",
    "gpu": "any",
    # target nets (DQN family, SAC)
    "update_type": "str?",
    "update_frequency": "float?",
    "polyak_coef": "float?",
    # TorchArcNet (SLM Lab v5.1+): a torcharc graph spec, inline or by path
    "arc": "dict?",
    "arc_file": "str?",
}
# net keys that may carry an actor_/critic_ prefix to configure one of the two nets
NET_ROLE_KEYS = {
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
}
NET_TYPES = ("MLPNet", "ConvNet", "RecurrentNet", "DuelingMLPNet", "DuelingConvNet", "TorchArcNet")
IMAGE_NETS = ("ConvNet", "DuelingConvNet")
CELL_TYPES = ("RNN", "LSTM", "GRU")
CUSTOM_SCHEDULERS = ("LinearToZero", "LinearToMin")  # frame-based, beside torch's own
# names that are not activations among torch.nn's activation modules, plus the aliases we add
ACTIVATION_ALIASES = ("linear", "identity", "leaky_relu")

TORCH_NAMES_PATH = Path(__file__).with_name("torch_names.json")


@cache
def torch_names() -> dict[str, list[str]]:
    """{optimizers, lr_schedulers, losses, activations, init_fns}: the names a spec may use."""
    return json.loads(TORCH_NAMES_PATH.read_text())


def current_torch_names() -> dict[str, list[str]]:
    """The same table read off the installed torch (imports it)."""
    import torch
    from torch import nn

    def subclasses(module: Any, base: type) -> list[str]:
        return sorted(
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and isinstance(v, type)
            and issubclass(v, base)
            and v is not base
        )

    activations = {n.lower() for n in subclasses(nn.modules.activation, nn.Module)}
    return {
        "optimizers": subclasses(torch.optim, torch.optim.Optimizer),
        "lr_schedulers": subclasses(torch.optim.lr_scheduler, torch.optim.lr_scheduler.LRScheduler),
        "losses": subclasses(nn, nn.modules.loss._Loss),
        "activations": sorted(activations | set(ACTIVATION_ALIASES)),
        "init_fns": sorted(
            n
            for n, v in vars(nn.init).items()
            if callable(v) and n.endswith("_") and not n.startswith("_")
        ),
    }


def env_seq_len(agent_spec: dict[str, Any]) -> int | None:
    """How many recent observations the env stacks per step: a RecurrentNet's `seq_len`, else None."""
    net_spec = agent_spec.get("net") or {}
    return net_spec.get("seq_len") if net_spec.get("type") == "RecurrentNet" else None


def check_net_input(
    net_spec: dict[str, Any], obs_shape: tuple[int, ...], env_name: str = "the env"
) -> str | None:
    """An error message when the net type cannot take the env's (unstacked) observations, else None."""
    net_type = net_spec.get("type")
    if net_type in IMAGE_NETS and len(obs_shape) != 3:
        return f"agent.net.type: {net_type} needs an image observation (C, H, W); {env_name} gives shape {tuple(obs_shape)}"
    if net_type == "RecurrentNet":
        seq_len = net_spec.get("seq_len")
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
            return f"agent.net.seq_len: RecurrentNet needs a positive int seq_len (how many recent observations it reads), got {seq_len!r}"
    return None


if __name__ == "__main__":
    TORCH_NAMES_PATH.write_text(json.dumps(current_torch_names(), indent=2) + "\n")
    print(f"wrote {TORCH_NAMES_PATH}")
