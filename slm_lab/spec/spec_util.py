"""Spec files: find, read (JSON/YAML), substitute ${vars}, validate up front.

Every user mistake raises SpecError with one line: the key path, the bad value, and where it
helps, the nearest valid key ("did you mean ..."). Validation imports no torch (torch's names
come from a table, see slm_lab.agent.net.config), so `slm-lab check` is quick; only a
TorchArcNet spec loads torch, to build its graph.
"""

import difflib
import importlib
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from loguru import logger

from slm_lab import SPEC_DIR
from slm_lab.agent.algorithm.config import (
    ACTION_PDTYPES,
    ACTION_POLICIES,
    ADVANTAGE_NORMALIZERS,
    ALGORITHM_CONFIGS,
    DISCRETE_PDTYPES,
    FAMILY_KEYS,
    LOG_ALPHA_MAX,
    LOG_ALPHA_MIN,
    NOT_YET_FLAGS,
    AlgorithmConfig,
    PolicyGradientConfig,
    PPOConfig,
    SoftActorCriticConfig,
)
from slm_lab.agent.memory.config import MEMORY_NAMES
from slm_lab.agent.net.config import (
    CELL_TYPES,
    CUSTOM_SCHEDULERS,
    NET_TYPES,
    check_net_input,
    torch_names,
)
from slm_lab.env.config import env_kwargs
from slm_lab.lib.schedule import SCHEDULE_NAMES
from slm_lab.lib.util import role_spec
from slm_lab.spec import schema

VAR_PATTERN = re.compile(r"\$\{([^}]*)\}")
# a ${var} not inside a quoted string: quoted for parsing a template (check of an unfilled spec)
BARE_VAR_PATTERN = re.compile(r"(?<![\"'\w$])\$\{([^}]*)\}(?![\"'\w])")
# features of SLM Lab v5 specs that this release does not have yet: a spec that needs one gets
# one line naming it
NOT_YET = "is not available yet in this release"
HOGWILD_OPTIM_PREFIX = "Global"  # v5's shared-memory optimizers (GlobalAdam, GlobalRMSprop)
PLAYGROUND_PREFIX = "playground/"
# legacy (unnamespaced) ALE ids: <Game>[NoFrameskip|Deterministic]-v0/-v4
LEGACY_ATARI_ID = re.compile(r"^[A-Z][A-Za-z]+(NoFrameskip|Deterministic)?-v[04]$")


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads `1e6` and `3e-4` as floats (YAML 1.2); PyYAML's YAML 1.1 needs a dot."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


class SpecError(ValueError):
    """A spec or CLI input the user must fix; the message is the whole story."""


def did_you_mean(word: str, options: Any) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


# -- finding and reading ---------------------------------------------------------------------
def find_spec_file(spec_file: str) -> Path:
    for candidate in (Path(spec_file), SPEC_DIR / spec_file):
        if candidate.is_file():
            return candidate
    raise SpecError(
        f"spec file not found: {spec_file} (looked in the working directory and {SPEC_DIR})"
    )


def parse_sets(sets: list[str]) -> dict[str, str]:
    out = {}
    for item in sets:
        if "=" not in item:
            raise SpecError(f"-s {item}: expected KEY=VALUE (e.g. -s env=Acrobot-v1)")
        key, value = item.split("=", 1)
        if not key:
            raise SpecError(f"-s {item}: the key before '=' is empty")
        out[key] = value
    return out


def _number_text(value: str) -> str | None:
    """The JSON text of a numeric value ('1e7' -> '10000000'), or None if not a number."""
    try:
        num = float(value)
    except ValueError:
        return None
    if num != num or num in (float("inf"), float("-inf")):
        return None
    return (
        str(int(num)) if num.is_integer() and not re.fullmatch(r"-?\d+\.\d*", value) else repr(num)
    )


def substitute(text: str, variables: dict[str, str]) -> str:
    """Textual ${var} substitution on the raw file. A quoted "${k}" with a numeric value becomes a number."""
    for key, value in variables.items():
        num = _number_text(value)
        if num is not None:
            text = text.replace(f'"${{{key}}}"', num).replace(f"'${{{key}}}'", num)
        text = text.replace(f"${{{key}}}", value)
    return text


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_YamlLoader)
        else:
            data = json.loads(text)
    except json.JSONDecodeError as e:
        unresolved = VAR_PATTERN.search(text)
        hint = (
            f" (unresolved ${{{unresolved.group(1)}}}? pass it with -s {unresolved.group(1)}=VALUE)"
            if unresolved
            else ""
        )
        raise SpecError(
            f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}{hint}"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise SpecError(
            f"{path}: invalid YAML{where}: {getattr(e, 'problem', None) or e}"
        ) from None
    if not isinstance(data, dict):
        raise SpecError(
            f"{path}: a spec file must map spec names to specs, got {type(data).__name__}"
        )
    return {k: v for k, v in data.items() if not str(k).startswith("_")}  # _keys hold YAML anchors


def unresolved_vars(node: Any, path: str = "") -> dict[str, str]:
    """{var: the first key path that holds it} for every ${var} left in a spec."""
    found: dict[str, str] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            for var, where in unresolved_vars(v, f"{path}.{k}" if path else str(k)).items():
                found.setdefault(var, where)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            for var, where in unresolved_vars(v, f"{path}[{i}]").items():
                found.setdefault(var, where)
    elif isinstance(node, str):
        for var in VAR_PATTERN.findall(node):
            found.setdefault(var, path)
    return found


def read_spec_file(
    spec_file: str, variables: dict[str, str] | None = None, template: bool = False
) -> dict[str, dict[str, Any]]:
    """{spec name: spec} of a file, ${vars} substituted. `template` keeps the ${vars} that are
    not given as strings (a bare one in JSON is quoted), so an unfilled spec still parses."""
    path = find_spec_file(spec_file)
    text = substitute(path.read_text(), variables or {})
    if template and path.suffix not in (".yaml", ".yml"):
        text = BARE_VAR_PATTERN.sub(lambda m: f'"${{{m.group(1)}}}"', text)
    return _parse(text, path)


def env_suffix(env_name: str) -> str:
    """'ALE/Pong-v5' -> 'pong', 'CartPole-v1' -> 'cartpole', 'my_pkg:Grid-v0' -> 'grid'."""
    name = env_name.rsplit(":", 1)[-1].split("/")[-1]
    return re.sub(r"-v\d+$", "", name).lower().replace("-", "_")


def _spec_from_file(
    spec_file: str, spec_name: str, variables: dict[str, str], template: bool
) -> dict[str, Any]:
    specs = read_spec_file(spec_file, variables, template)
    if spec_name not in specs:
        raise SpecError(
            f"spec {spec_name!r} not in {spec_file}{did_you_mean(spec_name, specs)} (it has: {', '.join(specs) or 'none'})"
        )
    spec = specs[spec_name]
    if not isinstance(spec, dict):
        raise SpecError(f"{spec_name}: a spec must be a mapping, got {type(spec).__name__}")
    return normalize(spec)


def get_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> dict[str, Any]:
    """Read, substitute, normalize and validate one spec; sets spec['name']."""
    variables = variables or {}
    spec = _spec_from_file(spec_file, spec_name, variables, template=False)
    for var, where in sorted(unresolved_vars(spec, spec_name).items()):
        raise SpecError(f"{where}: unresolved ${{{var}}}; pass it with -s {var}=VALUE")
    spec["name"] = spec_name + (f"_{env_suffix(variables['env'])}" if "env" in variables else "")
    validate(spec, spec_name)
    return spec


def check_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> list[str]:
    """Validate one spec as `check` does; returns the ${vars} it still needs (a template spec).

    A template's placeholders are validated as far as they can be: a placeholder stands for a
    number where the key takes one, and an unfilled env name skips the checks that need the env.
    """
    spec = _spec_from_file(spec_file, spec_name, variables or {}, template=True)
    missing = unresolved_vars(spec)
    if missing:
        spec = _fill_template(spec)
    validate(spec, spec_name)
    return sorted(missing)


def _fill_template(node: Any, key: str = "") -> Any:
    """Placeholders replaced for validation: a numeric stand-in, except in keys that take a
    string (names, types), which keep the placeholder text."""
    if isinstance(node, dict):
        return {k: _fill_template(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill_template(v, key) for v in node]
    if isinstance(node, str) and VAR_PATTERN.search(node):
        return node if key in ("name", "type") or VAR_PATTERN.sub("", node) else 1
    return node


def normalize(spec: dict[str, Any]) -> dict[str, Any]:
    """v4-style single-element lists for agent/env become mappings."""
    spec = dict(spec)
    for key in ("agent", "env"):
        if isinstance(spec.get(key), list) and len(spec[key]) == 1:
            spec[key] = spec[key][0]
    return spec


# -- validation ------------------------------------------------------------------------------
def _type_ok(value: Any, type_spec: str) -> bool:
    nullable = type_spec.endswith("?")
    kind = type_spec.rstrip("?")
    if value is None:
        return nullable
    if kind == "any":
        return True
    if kind == "int":
        return not isinstance(value, bool) and (
            isinstance(value, int) or isinstance(value, float) and value.is_integer()
        )
    if kind == "float":
        return not isinstance(value, bool) and isinstance(value, int | float)
    return isinstance(value, {"bool": bool, "str": str, "list": list, "dict": dict}[kind])


def _type_name(type_spec: str) -> str:
    return type_spec.rstrip("?") + (" or null" if type_spec.endswith("?") else "")


def _check_keys(
    section: Any,
    allowed: dict[str, str],
    path: str,
    extra_ok: set[str] | None = None,
    required: tuple[str, ...] = (),
) -> None:
    """Every key known and of its type; every required key present."""
    if not isinstance(section, dict):
        raise SpecError(f"{path}: expected a mapping, got {section!r}")
    for key, value in section.items():
        full = f"{path}.{key}" if path else key
        if full in schema.DEPRECATED:
            meaning = schema.DEPRECATED[full]
            logger.warning(
                f"{full}: ignored (SLM Lab v5 never read it)"
                + (f"; its likely meaning is {meaning}" if meaning else "")
            )
            continue
        if key in allowed:
            if not _type_ok(value, allowed[key]):
                raise SpecError(f"{full}: expected {_type_name(allowed[key])}, got {value!r}")
        elif not (extra_ok and key in extra_ok):
            raise SpecError(
                f"{full}: unknown key{did_you_mean(key, list(allowed) + list(extra_ok or []))}"
            )
    for key in required:
        if section.get(key) is None:
            full = f"{path}.{key}" if path else key
            raise SpecError(f"{full}: required ({_type_name(allowed[key])}), missing")


def _check_schedule(spec: Any, path: str) -> None:
    if spec is None:
        return
    _check_keys(spec, schema.SCHEDULE_KEYS, path, required=("name", "start_val"))
    if spec["name"] not in SCHEDULE_NAMES:
        raise SpecError(
            f"{path}.name: {spec['name']!r} is not a schedule{did_you_mean(str(spec['name']), SCHEDULE_NAMES)} (one of {', '.join(SCHEDULE_NAMES)})"
        )


def _positive(value: Any, path: str, allow_zero: bool = False) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise SpecError(f"{path}: expected a number, got {value!r}")
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        raise SpecError(f"{path}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _check_torch_name(
    spec: Any, path: str, kind: str, module: str, extra: tuple[str, ...] = ()
) -> None:
    """`spec` is a mapping whose `name` is one of torch's `kind` (see torch_names) or `extra`."""
    if spec is None:
        return
    if not isinstance(spec, dict) or "name" not in spec:
        raise SpecError(f"{path}: expected a mapping with a 'name', got {spec!r}")
    name = spec["name"]
    options = [*torch_names()[kind], *extra]
    if kind == "optimizers" and isinstance(name, str) and name.startswith(HOGWILD_OPTIM_PREFIX):
        raise SpecError(
            f"{path}.name: {name} (a Hogwild shared-memory optimizer) {NOT_YET}; use {name.removeprefix(HOGWILD_OPTIM_PREFIX)} with meta.distributed false"
        )
    if name not in options:
        raise SpecError(
            f"{path}.name: {name!r} is not in {module}{did_you_mean(str(name), options)}"
        )


def _check_net(net: Any, path: str) -> None:
    role_types = {
        f"{role}_{k}": schema.NET[k] for role in ("actor", "critic") for k in schema.NET_ROLE_KEYS
    }
    _check_keys(net, {**schema.NET, **role_types}, path, required=("type",))
    if net["type"] not in NET_TYPES:
        raise SpecError(
            f"{path}.type: {net['type']!r} is not available{did_you_mean(str(net['type']), NET_TYPES)} (available: {', '.join(NET_TYPES)})"
        )
    names = torch_names()
    for key in [
        k for k in net if k.endswith("hid_layers_activation") or k.endswith("out_layer_activation")
    ]:
        if net[key] is not None and net[key].lower() not in names["activations"]:
            raise SpecError(
                f"{path}.{key}: {net[key]!r} is not a torch activation{did_you_mean(net[key].lower(), names['activations'])}"
            )
    for key in [k for k in net if k.endswith("init_fn")]:
        if net[key] is not None and net[key] not in names["init_fns"]:
            raise SpecError(
                f"{path}.{key}: {net[key]!r} is not in torch.nn.init{did_you_mean(net[key], names['init_fns'])}"
            )
    for key in [k for k in net if k.endswith("optim_spec")]:
        _check_torch_name(net[key], f"{path}.{key}", "optimizers", "torch.optim")
        if net[key] is not None and "lr" in net[key]:
            _positive(net[key]["lr"], f"{path}.{key}.lr")
    for key in [k for k in net if k.endswith("lr_scheduler_spec")]:
        _check_torch_name(
            net[key],
            f"{path}.{key}",
            "lr_schedulers",
            "torch.optim.lr_scheduler",
            CUSTOM_SCHEDULERS,
        )
        sch = net[key]
        if sch is not None and sch["name"] in CUSTOM_SCHEDULERS:
            for req in ("frame",) + (("min_factor",) if sch["name"] == "LinearToMin" else ()):
                if req not in sch:
                    raise SpecError(f"{path}.{key}.{req}: required by {sch['name']}")
            _positive(sch["frame"], f"{path}.{key}.frame")
    _check_torch_name(net.get("loss_spec"), f"{path}.loss_spec", "losses", "torch.nn")
    for key in [k for k in net if k.endswith("hid_layers") and not k.endswith("conv_hid_layers")]:
        layers = net[key]
        if layers is not None and not all(
            type(w) is int and w > 0 for w in layers
        ):  # bool is an int
            raise SpecError(f"{path}.{key}: expected a list of positive ints, got {layers!r}")
    for key in [k for k in net if k.endswith("conv_hid_layers")]:
        for row in net[key] or []:
            if not (
                isinstance(row, list)
                and len(row) == 5
                and all(type(v) is int for v in row)
                and min(row[:3] + row[4:]) > 0
                and row[3] >= 0
            ):
                raise SpecError(
                    f"{path}.{key}: expected rows [out_channels, kernel, stride, padding, dilation] of ints (padding >= 0, the others > 0), got {row!r}"
                )
    for key in [
        k
        for k in net
        if k.endswith(("clip_grad_val", "rnn_hidden_size", "rnn_num_layers")) or k == "seq_len"
    ]:
        _positive(net[key], f"{path}.{key}")
    for key in [k for k in net if k.endswith("batch_renorm_warmup_steps")]:
        _positive(net[key], f"{path}.{key}", allow_zero=True)
    for key in [k for k in net if k.endswith("cell_type")]:
        if net[key] is not None and net[key] not in CELL_TYPES:
            raise SpecError(
                f"{path}.{key}: {net[key]!r} is not one of {', '.join(CELL_TYPES)}{did_you_mean(net[key], CELL_TYPES)}"
            )
    required = {
        "ConvNet": "conv_hid_layers",
        "DuelingConvNet": "conv_hid_layers",
        "RecurrentNet": "rnn_hidden_size",
    }.get(net["type"])
    if required and not any(k.endswith(required) and net[k] for k in net):
        raise SpecError(f"{path}.{required}: required by {net['type']}")
    for role in ("actor", "critic"):
        spec = role_spec(net, role)
        if spec.get("batch_renorm") and spec.get("batch_norm"):
            raise SpecError(f"{path}.batch_renorm: choose batch_renorm or batch_norm, not both")


def _env_not_available(name: str) -> str | None:
    """The one-line reason an env id of a v5 spec cannot run in this release, else None."""
    if name.startswith("ALE/") or LEGACY_ATARI_ID.fullmatch(name):
        return f"env.name: {name}: Atari (ALE) {NOT_YET}"
    if name.startswith(PLAYGROUND_PREFIX):
        return f"env.name: {name}: MuJoCo Playground {NOT_YET}"
    return None


def _import_env_module(name: str) -> str:
    """For a `module:EnvId` name, import the module (it registers the env); returns the id."""
    if ":" not in name:
        return name
    module, env_id = name.split(":", 1)
    try:
        importlib.import_module(module)
    except Exception as e:  # the user's own module: any error it raises on import
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise SpecError(
            f"env.name: {name!r}: importing {module!r} failed ({type(e).__name__}: {reason}); is it on PYTHONPATH?"
        ) from None
    return env_id


def env_spaces(env: dict[str, Any]) -> tuple[Any, Any]:
    """(observation space as the agent sees it, action space) of the env a spec names."""
    import gymnasium as gym  # imported here: the rest of validation needs no env

    from slm_lab.env.spaces import agent_observation_space

    name = env["name"]
    env_id = _import_env_module(name)
    try:
        gym.spec(env_id)
    except gym.error.Error:
        if message := _env_not_available(env_id):
            raise SpecError(message) from None
        raise SpecError(
            f"env.name: {name!r} is not a Gymnasium env id{did_you_mean(env_id, gym.registry.keys())}"
        ) from None
    kwargs = env_kwargs(env)
    try:
        e = gym.make(name, **kwargs)
    except TypeError as err:
        bad = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        key = bad.group(1) if bad else next(iter(kwargs), "?")
        raise SpecError(
            f"env.{key}: unknown key (not an SLM Lab env key, nor an argument of {name}){did_you_mean(key, schema.ENV)}"
        ) from None
    except gym.error.Error as err:
        raise SpecError(f"env.name: {name!r} cannot be made: {err}") from None
    try:
        obs_space = agent_observation_space(e.observation_space)
    except ValueError as err:
        raise SpecError(f"env.name: {name}: {err}") from None
    finally:
        e.close()
    return obs_space, e.action_space


def validate(spec: dict[str, Any], spec_name: str = "") -> None:
    """Check keys, types and values of a whole spec; raise SpecError on the first problem."""
    _check_keys(spec, schema.TOP, "", required=("agent", "env", "meta"))
    agent, env, meta = spec["agent"], spec["env"], spec["meta"]
    _check_keys(agent, schema.AGENT, "agent", required=("algorithm",))
    algo = agent["algorithm"]
    _check_keys(algo, schema.ALGORITHM, "agent.algorithm", required=("name",))
    _check_keys(meta, schema.META, "meta")
    _check_keys(
        env,
        schema.ENV,
        "env",
        extra_ok=set(env) - set(schema.ENV) if isinstance(env, dict) else None,
        required=("name", "max_frame"),
    )
    if agent.get("memory") is not None:
        _check_keys(agent["memory"], schema.MEMORY, "agent.memory")
    if agent.get("net") is not None:
        _check_net(agent["net"], "agent.net")
    if agent.get("critic_net") is not None:
        _check_net(agent["critic_net"], "agent.critic_net")

    name = algo["name"]
    if name not in ALGORITHM_CONFIGS:
        raise SpecError(
            f"agent.algorithm.name: {name!r} is not available{did_you_mean(name, ALGORITHM_CONFIGS)} (available: {', '.join(ALGORITHM_CONFIGS)})"
        )
    config = ALGORITHM_CONFIGS[name]
    for key in ("explore_var_spec", "entropy_coef_spec", "clip_eps_spec"):
        _check_schedule(algo.get(key), f"agent.algorithm.{key}")
    gamma = algo.get("gamma")
    if gamma is not None and not 0 < gamma <= 1:
        raise SpecError(f"agent.algorithm.gamma: must be in (0, 1], got {gamma!r}")
    lam = algo.get("lam")
    if lam is not None and not 0 <= lam <= 1:
        raise SpecError(f"agent.algorithm.lam: must be in [0, 1], got {lam!r}")
    for key in (
        "training_frequency",
        "time_horizon",
        "minibatch_size",
        "training_epoch",
        "num_unrolls",
        "num_step_returns",
    ):
        _positive(algo.get(key), f"agent.algorithm.{key}")
    policy = algo.get("action_policy") or "default"
    if policy not in ACTION_POLICIES:
        raise SpecError(
            f"agent.algorithm.action_policy: {policy!r} is not one of {', '.join(ACTION_POLICIES)}{did_you_mean(policy, ACTION_POLICIES)}"
        )
    for key, feature in NOT_YET_FLAGS.items():
        if algo.get(key):
            raise SpecError(f"agent.algorithm.{key}: {feature} {NOT_YET}; use false")
    scaler = algo.get("normalize_advantages")
    if scaler is not None and scaler not in ADVANTAGE_NORMALIZERS:
        raise SpecError(
            f"agent.algorithm.normalize_advantages: {scaler!r} is not one of {', '.join(ADVANTAGE_NORMALIZERS)}{did_you_mean(scaler, ADVANTAGE_NORMALIZERS)}"
        )
    _check_family_keys(algo, config)
    pdtype = algo.get("action_pdtype") or "default"
    if pdtype not in ACTION_PDTYPES:
        raise SpecError(
            f"agent.algorithm.action_pdtype: {pdtype!r} is not one of {', '.join(ACTION_PDTYPES)}"
        )

    _positive(env["max_frame"], "env.max_frame")
    _positive(env.get("num_envs"), "env.num_envs")
    _positive(env.get("max_t"), "env.max_t")
    if env.get("vectorization_mode") not in (None, "sync", "async"):
        raise SpecError(
            f"env.vectorization_mode: must be sync or async, got {env['vectorization_mode']!r}"
        )
    distributed = meta.get("distributed")
    if distributed in ("shared", "synced"):
        raise SpecError(
            f"meta.distributed: {distributed!r} (Hogwild training) {NOT_YET}; use false"
        )
    if distributed not in (None, False, "false"):
        raise SpecError(f"meta.distributed: must be false, shared or synced, got {distributed!r}")
    _positive(meta.get("log_frequency"), "meta.log_frequency")
    _positive(meta.get("max_session"), "meta.max_session")
    _positive(meta.get("max_trial"), "meta.max_trial")

    if config.needs_net:
        _check_agent_parts(agent, algo, env, config)

    if not VAR_PATTERN.search(str(env["name"])):  # a template's env is checked when it is given
        _check_env_fit(agent, env, config, policy, pdtype)

    for key, value in (spec.get("search") or {}).items():
        _check_search(key, value, "search")

    # -- replay memory values --------------------------------------------------------------
    memory = agent.get("memory") or {}
    if memory.get("name") == "PrioritizedReplay":
        for key in ("alpha", "epsilon"):
            if memory.get(key) is None:
                raise SpecError(f"agent.memory.{key}: required by PrioritizedReplay")
    for key in ("alpha", "beta"):
        if memory.get(key) is not None and not 0 <= memory[key] <= 1:
            raise SpecError(f"agent.memory.{key}: must be in [0, 1], got {memory[key]!r}")
    max_size, batch_size = memory.get("max_size"), memory.get("batch_size")
    if max_size is not None and batch_size is not None and batch_size > max_size:
        raise SpecError(
            f"agent.memory.batch_size: must be <= max_size ({max_size}), got {batch_size!r}"
        )


def _check_family_keys(algo: dict[str, Any], config: type[AlgorithmConfig]) -> None:
    """Keys one algorithm family reads: set only for it, and consistent with its other keys."""
    for key, family in FAMILY_KEYS.items():
        if algo.get(key) is not None and not issubclass(config, family):
            readers = [n for n, c in ALGORITHM_CONFIGS.items() if issubclass(c, family)]
            raise SpecError(f"agent.algorithm.{key}: read only by {' and '.join(readers)}")
    bounds = [k for k in ("log_alpha_min", "log_alpha_max") if algo.get(k) is not None]
    if bounds and algo.get("fixed_alpha") is not None:
        raise SpecError(
            f"agent.algorithm.{bounds[0]}: bounds the tuned alpha, and fixed_alpha {algo['fixed_alpha']!r} turns the tuning off; remove one"
        )
    log_alpha_min, log_alpha_max = algo.get("log_alpha_min"), algo.get("log_alpha_max")
    low = LOG_ALPHA_MIN if log_alpha_min is None else log_alpha_min
    high = LOG_ALPHA_MAX if log_alpha_max is None else log_alpha_max
    if low > high:  # named after the key the spec sets, against the other's value
        raise SpecError(
            f"agent.algorithm.log_alpha_max: must be >= log_alpha_min ({low!r}, the default), got {high!r}"
            if log_alpha_min is None
            else f"agent.algorithm.log_alpha_min: must be <= log_alpha_max ({high!r}{'' if log_alpha_max is not None else ', the default'}), got {low!r}"
        )
    scaler = algo.get("normalize_advantages")
    if scaler is not None and algo.get("normalize_advs") is False:
        raise SpecError(
            f"agent.algorithm.normalize_advantages: {scaler!r} contradicts normalize_advs false (advantages used as computed); remove one"
        )


def _check_agent_parts(
    agent: dict[str, Any],
    algo: dict[str, Any],
    env: dict[str, Any],
    config: type[AlgorithmConfig],
) -> None:
    """The net, memory and batch settings an algorithm with a net needs."""
    name = algo["name"]
    if not agent.get("net"):
        raise SpecError(f"agent.net: required by {name}")
    mem = (agent.get("memory") or {}).get("name")
    if mem not in MEMORY_NAMES:
        raise SpecError(
            f"agent.memory.name: {mem!r} is not available{did_you_mean(str(mem), MEMORY_NAMES)} (available: {', '.join(MEMORY_NAMES)})"
        )
    if mem not in config.memory_kinds:
        raise SpecError(
            f"agent.memory.name: {name} needs one of {', '.join(config.memory_kinds)}; got {mem!r}"
        )
    update_type = agent["net"].get("update_type")
    if update_type == "polyak" and agent["net"].get("polyak_coef") is None:
        raise SpecError("agent.net.polyak_coef: required by update_type polyak (e.g. 0.005)")
    if update_type not in (None, "replace", "polyak"):
        raise SpecError(
            f"agent.net.update_type: {update_type!r} is not replace or polyak{did_you_mean(str(update_type), ('replace', 'polyak'))}"
        )
    if issubclass(config, PPOConfig):
        for key in ("time_horizon", "minibatch_size", "training_epoch"):
            if algo.get(key) is None:
                raise SpecError(f"agent.algorithm.{key}: required by {name}")
        batch = (
            int(algo["time_horizon"])
            * int(algo.get("num_unrolls") or 1)
            * int(env.get("num_envs") or 1)
        )
        if algo["minibatch_size"] > batch:
            raise SpecError(
                f"agent.algorithm.minibatch_size: {algo['minibatch_size']} is larger than the batch of {batch} (time_horizon x num_unrolls x num_envs)"
            )
    elif algo.get("training_frequency") is None and not config.off_policy:
        raise SpecError(f"agent.algorithm.training_frequency: required by {name}")
    if config.self_imitation:
        memory = agent["memory"]
        for key in ("max_size", "batch_size"):
            if memory.get(key) is None:
                raise SpecError(
                    f"agent.memory.{key}: required by {name} (its self-imitation replay)"
                )
        replay = memory.get("sil_replay_name", "Replay")
        if replay != "Replay":
            raise SpecError(
                f"agent.memory.sil_replay_name: only Replay is available, got {replay!r}"
            )


def _check_env_fit(
    agent: dict[str, Any],
    env: dict[str, Any],
    config: type[AlgorithmConfig],
    policy: str,
    pdtype: str,
) -> None:
    """The checks that need the env's spaces: the nets' inputs, the action space's kind."""
    import gymnasium as gym

    obs_space, action_space = env_spaces(env)
    for key in ("net", "critic_net"):
        if agent.get(key) and (
            message := check_net_input(agent[key], obs_space.shape, env["name"])
        ):
            raise SpecError(
                message if key == "net" else message.replace("agent.net", "agent.critic_net")
            )
    name = agent["algorithm"]["name"]
    if not isinstance(action_space, gym.spaces.Discrete | gym.spaces.Box):
        raise SpecError(
            f"env.name: {env['name']} has a {type(action_space).__name__} action space; SLM Lab supports Discrete and Box"
        )
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if config.discrete_only and not discrete:
        raise SpecError(
            f"agent.algorithm.name: {name} needs a discrete action space; {env['name']} has a continuous (Box) one"
        )
    if (
        not discrete
        and issubclass(config, SoftActorCriticConfig)
        and not (
            math.isfinite(float(action_space.low.min()))
            and math.isfinite(float(action_space.high.max()))
        )
    ):
        raise SpecError(
            f"env.name: {name} squashes actions into the action space's bounds; {env['name']}'s Box action space is unbounded"
        )
    if config.needs_net:
        _check_arcs(agent, config, obs_space.shape, action_space, discrete)
    if policy in ("epsilon_greedy", "boltzmann"):
        if not discrete:
            raise SpecError(
                f"agent.algorithm.action_policy: {policy} needs a discrete action space; {env['name']} has a continuous (Box) one"
            )
        if not agent["algorithm"].get("explore_var_spec"):
            raise SpecError(f"agent.algorithm.explore_var_spec: required by action_policy {policy}")
    if pdtype != "default" and (pdtype in DISCRETE_PDTYPES) != discrete:
        raise SpecError(
            f"agent.algorithm.action_pdtype: {pdtype} does not fit the {type(action_space).__name__} action space of {env['name']}"
        )


def _check_arcs(
    agent: dict[str, Any],
    config: type[AlgorithmConfig],
    obs_shape: tuple[int, ...],
    action_space: Any,
    discrete: bool,
) -> None:
    """Build every TorchArcNet body the algorithm will build, on an input of the shape that net
    gets: observations, or (obs, action) concatenated for continuous SAC/CrossQ critics."""
    net = agent["net"]
    roles: list[tuple[str, str | None, dict[str, Any], tuple[int, ...]]] = []
    if issubclass(config, SoftActorCriticConfig):
        critic_src, critic_path = (
            (agent["critic_net"], "agent.critic_net")
            if agent.get("critic_net")
            else (net, "agent.net")
        )
        critic_shape = (
            obs_shape if discrete else (math.prod(obs_shape) + math.prod(action_space.shape),)
        )
        roles += [
            ("agent.net", "actor", net, obs_shape),
            (critic_path, "critic", critic_src, critic_shape),
        ]
    elif issubclass(config, PolicyGradientConfig) and not (
        net.get("shared") and config.with_critic
    ):
        roles.append(("agent.net", "actor", net, obs_shape))
        if config.with_critic:
            roles.append(("agent.net", "critic", net, obs_shape))
    else:  # one net: a Q-net, or a shared actor-critic
        roles.append(("agent.net", None, net, obs_shape))
    for path, role, source, shape in roles:
        spec = role_spec(source, role) if role else source
        if spec.get("type") != "TorchArcNet":
            continue
        from slm_lab.agent.net.torcharc_net import check_arc  # torch: only for arc nets

        own = role is not None and any(
            source.get(f"{role}_{k}") is not None for k in ("arc", "arc_file")
        )
        key = "arc_file" if spec.get("arc") is None and spec.get("arc_file") is not None else "arc"
        if message := check_arc(spec, shape, f"{path}.{role + '_' if own else ''}{key}"):
            raise SpecError(message)


def _check_search(key: str, value: Any, path: str) -> None:
    full = f"{path}.{key}"
    if "__" in key:
        dist = key.rsplit("__", 1)[1]
        if dist not in schema.SEARCH_DISTS:
            raise SpecError(
                f"{full}: {dist!r} is not a search distribution{did_you_mean(dist, schema.SEARCH_DISTS)}"
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_search(k, v, full)
    elif isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        for k, v in value[0].items():
            _check_search(k, v, full)
    else:
        raise SpecError(
            f"{full}: a search leaf must be named <param>__<distribution>, e.g. lr__loguniform"
        )
