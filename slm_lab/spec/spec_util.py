"""Spec files: find, read (JSON/YAML), substitute ${vars}, validate up front.

Every user mistake raises SpecError with one line: the key path, the bad value, and where it
helps, the nearest valid key ("did you mean ..."). Validation imports no torch (torch's names
come from a table, see slm_lab.agent.net.config), so `slm-lab check` is quick; only a
TorchArcNet spec loads torch, to build its graph.
"""

import json
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import yaml

from slm_lab import SPEC_DIR
from slm_lab.agent.algorithm.config import (
    DISCRETE_PDTYPES,
    OffPolicyConfig,
    PolicyGradientConfig,
    PPOConfig,
    SoftActorCriticConfig,
    readers,
)
from slm_lab.agent.config import AgentConfig
from slm_lab.agent.memory.config import MEMORY_CONFIGS, ReplayConfig, SILMemoryConfig
from slm_lab.agent.net.config import (
    NET_ROLE_KEYS,
    ROLE_PREFIXES,
    LossSpec,
    LRSchedulerSpec,
    NetConfig,
    NetSpec,
    OptimSpec,
    check_net_input,
)
from slm_lab.env.config import EnvConfig
from slm_lab.env.registry import backend_module, newer_version
from slm_lab.experiment.config import MetaConfig
from slm_lab.lib.config import Config, SpecError, did_you_mean
from slm_lab.lib.schedule import VarScheduler
from slm_lab.lib.util import full_install, machine_cpus, machine_gpus
from slm_lab.spec import schema, search_space
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_space import SearchParam

if TYPE_CHECKING:  # the checks of a spec against its env's spaces load Gymnasium when they run
    from slm_lab.agent.memory.layout import Layout

__all__ = ["SpecError", "did_you_mean", "get_spec", "check_spec", "validate", "Spec"]

NET_SECTIONS = ("agent.net", "agent.critic_net")
VAR_PATTERN = re.compile(r"\$\{([^}]*)\}")
EXPLORING_POLICIES = ("epsilon_greedy", "boltzmann")  # the action policies explore_var drives
BYTE_UNITS = ("B", "KB", "MB", "GB", "TB")
# levels of mappings and lists a spec may nest: far past any real one, and well inside Python's
# recursion limit, which validation's walks and copies of the spec would hit first
MAX_NESTING = 100
FRAC_HINT = "give end_frac (a fraction of max_frame) instead to follow the run"  # schedule warnings
# a ${var} not inside a quoted string: quoted for parsing a template (check of an unfilled spec)
BARE_VAR_PATTERN = re.compile(r"(?<![\"'\w$])\$\{([^}]*)\}(?![\"'\w])")


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads `1e6` and `3e-4` as floats (YAML 1.2); PyYAML's YAML 1.1 needs a dot."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


# -- finding and reading ---------------------------------------------------------------------
def find_spec_file(spec_file: str) -> Path:
    for candidate in (Path(spec_file), SPEC_DIR / spec_file):
        if candidate.is_file():
            return candidate
    shipped = sorted(SPEC_DIR.rglob(Path(spec_file).name))
    hint = f"; did you mean {shipped[0].relative_to(SPEC_DIR)}?" if shipped else ""
    raise SpecError(
        f"spec file not found: {spec_file} (looked in the working directory and {SPEC_DIR}){hint}"
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


def check_nesting(node: Any, where: str) -> None:
    """SpecError when `node` nests mappings and lists more than MAX_NESTING deep (walked
    without recursion: the walk must not hit the limit it guards)."""
    stack = [(node, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(
                f"{where}: {path or 'a value'} nests mappings and lists more than {MAX_NESTING} levels deep"
            )
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            if isinstance(v, dict | list):
                stack.append(
                    (v, f"{path}.{k}" if isinstance(k, str) else f"{path}[{k}]", depth + 1)
                )


def flow_depth(text: str) -> int:
    """How deep the brackets of `text` nest (those in quoted strings too: a bound, not a parse)."""
    depth = deepest = 0
    for c in text:
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def load_yaml(text: str, where: str) -> Any:
    """YAML text's data; deep brackets refused before parsing (PyYAML took 13 s to fail on
    2,000 of them)."""
    if flow_depth(text) > MAX_NESTING:
        raise SpecError(f"{where}: nests mappings and lists more than {MAX_NESTING} levels deep")
    return yaml.load(text, Loader=_YamlLoader)


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        if path.suffix in (".yaml", ".yml"):
            data = load_yaml(text, str(path))
        else:
            data = json.loads(text)
    except RecursionError:  # thousands of nested brackets
        raise SpecError(
            f"{path}: nests mappings and lists more than {MAX_NESTING} levels deep"
        ) from None
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
    except yaml.reader.ReaderError as e:  # a character YAML does not allow (a NUL, a control)
        line = text.count("\n", 0, e.position) + 1
        column = e.position - text.rfind("\n", 0, e.position)
        char = chr(e.character) if isinstance(e.character, int) else e.character
        raise SpecError(
            f"{path}: invalid YAML at line {line} column {column}: character {char!r} is not allowed"
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
    check_nesting(data, str(path))
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
    try:
        text = substitute(path.read_text(encoding="utf-8"), variables or {})
    except UnicodeDecodeError as e:
        line = e.object.count(b"\n", 0, e.start) + 1
        raise SpecError(
            f"{path}: not UTF-8 text: byte {e.object[e.start]:#x} at line {line}; save the file as UTF-8"
        ) from None
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


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec, with the -s values that took effect: placeholders filled, spec paths set."""

    spec: Spec
    placeholders: dict[str, str]
    overrides: dict[str, Any]


def split_sets(
    spec_file: str, spec_name: str, sets: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """-s KEY=VALUE: (the ${KEY} placeholders the named spec has, the rest: spec paths to set).
    A placeholder of another spec in the same file is not this one's: -s max_frame=... on a spec
    with its own budget is a mistake, not a no-op."""
    if not sets:
        return {}, {}
    spec = read_spec_file(spec_file, template=True).get(spec_name)
    names = set(unresolved_vars(spec)) if isinstance(spec, dict) else set()
    placeholders = {k: v for k, v in sets.items() if k in names}
    return placeholders, {k: v for k, v in sets.items() if k not in placeholders}


def file_placeholders(spec_file: str) -> dict[str, set[str]]:
    """{spec name: the ${vars} it has} of every spec in a file."""
    return {
        name: set(unresolved_vars(spec)) if isinstance(spec, dict) else set()
        for name, spec in read_spec_file(spec_file, template=True).items()
    }


def apply_overrides(spec: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    """Set each dotted spec path to its value (read as YAML: 3e-4, true, null, [64, 64] and
    {name: Adam} are a number, a bool, null, a list and a mapping); returns the parsed values."""
    applied = {}
    for path, text in overrides.items():
        keys = path.split(".")
        if len(keys) == 1 or not all(keys):
            raise SpecError(
                f"-s {path}={text}: the spec has no ${{{path}}} and {path!r} is not a spec path{_path_hint(spec, path)}"
            )
        node: Any = spec
        for depth, k in enumerate(keys[:-1]):
            if not isinstance(node.get(k), dict):
                where = ".".join(keys[: depth + 1])
                roles = [r for r in ROLE_PREFIXES if isinstance(node.get(f"{r}{k}"), dict)]
                if ".".join(keys[:depth]) in NET_SECTIONS and roles:
                    raise SpecError(f"-s {path}={text}: {_roles_hint(keys, roles)}")
                raise SpecError(
                    f"-s {path}={text}: {where} is not a mapping in the spec; set it whole, e.g. -s {where}={{...}}"
                )
            node = node[k]
        try:
            value = load_yaml(text, f"-s {path}")
        except yaml.YAMLError:
            value = text  # not YAML: the text itself
        node[keys[-1]] = applied[path] = value
    return applied


def _roles_hint(keys: list[str], roles: list[str]) -> str:
    """For agent.net.<key>.<...> where the spec sets <key> only per net (actor_<key>,
    critic_<key>): the paths to set instead."""
    section, key, rest = ".".join(keys[:2]), keys[2], keys[3:]
    paths = [".".join([section, f"{r}{key}", *rest]) for r in roles]
    return f"{section}.{key} is not set in the spec (each net has its own); did you mean {' or '.join(paths)}?"


def _path_hint(spec: dict[str, Any], key: str) -> str:
    """'; did you mean env.max_frame?' for -s max_frame=...: the spec paths ending in `key`."""
    if isinstance(spec.get(key), dict) and "name" in spec[key]:  # a section: -s env=...
        return f"; did you mean {key}.name?"
    leaves = list(_leaf_paths(spec))
    ending = [p for p in leaves if p.rsplit(".", 1)[-1] == key]
    if ending:
        return f"; did you mean {' or '.join(ending)}?"
    return did_you_mean(key, leaves)


def _leaf_paths(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaf_paths(v, f"{path}.{k}" if path else str(k))
    else:
        yield path


def load_spec(
    spec_file: str,
    spec_name: str,
    sets: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> LoadedSpec:
    """Read a spec, fill its ${placeholders} and set the spec paths `sets` name (both from -s,
    as text) and those `values` name (typed: the CLI's shortcut options), normalize and
    validate it; its name gets the env's suffix when -s changed the env."""
    placeholders, paths = split_sets(spec_file, spec_name, sets or {})
    spec = _spec_from_file(spec_file, spec_name, placeholders, template=False)
    overrides = apply_overrides(spec, paths)
    if values:
        spec = search_space.set_paths(spec, values)
        overrides.update(values)
    for var, where in sorted(unresolved_vars(spec, spec_name).items()):
        raise SpecError(f"{where}: unresolved ${{{var}}}; pass it with -s {var}=VALUE")
    env_name = placeholders.get("env") or overrides.get("env.name")
    spec["name"] = spec_name + (f"_{env_suffix(str(env_name))}" if env_name else "")
    return LoadedSpec(validate(spec, spec_name), placeholders, overrides)


def get_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> dict[str, Any]:
    """The validated spec as plain data (see load_spec)."""
    return load_spec(spec_file, spec_name, variables).spec.to_dict()


def check_spec(
    spec_file: str, spec_name: str, variables: dict[str, str] | None = None
) -> list[str]:
    """Validate one spec as `check` does; returns the ${vars} it still needs (a template spec).

    A template's placeholders are validated as far as they can be: a placeholder stands for a
    number where the key takes one, and an unfilled env name skips the checks that need the env.
    """
    placeholders, paths = split_sets(spec_file, spec_name, variables or {})
    spec = _spec_from_file(spec_file, spec_name, placeholders, template=True)
    apply_overrides(spec, paths)
    missing = unresolved_vars(spec)
    if missing:
        spec = _fill_template(spec)
    validate(spec, spec_name, warn_schedules=not missing)  # a stand-in max_frame fits no schedule
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
def validate(spec: dict[str, Any], spec_name: str = "", warn_schedules: bool = True) -> Spec:
    """Check keys, types and values of a whole spec, and that it fits its env; the typed spec.
    SpecError on the first problem."""
    loaded = schema.load(spec, spec_name)
    check_typed(loaded, warn_schedules)
    for param in loaded.search or ():
        _check_searched_path(param, loaded)
        _check_probes(param, spec, spec_name)
    return loaded


def check_typed(spec: Spec, schedules: bool = True) -> None:
    """The checks of a typed spec that need its env (it fits its env's spaces), and the
    warnings a run gets at its start (`schedules`: those of its schedules). Without the full
    install (no Gymnasium to build the env's spaces) only the spec's syntax is checked."""
    # a template's env is checked when it is given
    if not VAR_PATTERN.search(spec.env.name) and full_install():
        check_env_fit(spec)
    if schedules:
        warn_schedules(spec)


# -- the search block ------------------------------------------------------------------------
# meta keys that set up the search itself; a trial cannot change them
SEARCH_SETTINGS = ("max_trial", "search_resources", "search_scheduler")
SEARCHABLE = "agent.algorithm|memory|net|critic_net.<key>, env.<key> or meta.<key>"


def _check_searched_path(param: SearchParam, spec: Spec) -> None:
    """A searched path must name a key its section reads (one declared there, or an env's own
    argument), not one the spec carries for another algorithm or that SLM Lab v5 never read."""
    keys = param.path.split(".")
    section = ".".join(keys[:2])
    if keys[0] == "agent" and len(keys) > 2 and keys[1] == "algorithm":
        algo = spec.agent.algorithm
        _check_declared(param, keys[2], type(algo), section, algo.name, readers(keys[2]))
    elif keys[0] == "agent" and len(keys) > 2 and keys[1] == "memory":
        memory, algo = spec.agent.memory, spec.agent.algorithm
        if memory is None:
            raise SpecError(f"{param.key}: {algo.name} has no memory to set {keys[2]} on")
        cls = SILMemoryConfig if algo.self_imitation else MEMORY_CONFIGS[memory.name]
        others = [n for n, c in MEMORY_CONFIGS.items() if keys[2] in c.keys()]
        _check_declared(param, keys[2], cls, section, memory.name, others)
    elif keys[0] == "agent" and len(keys) > 2 and keys[1] in ("net", "critic_net"):
        name = keys[2]
        role_key = name.split("_", 1)[1] if name.startswith(ROLE_PREFIXES) else None
        _check_declared(param, role_key if role_key in NET_ROLE_KEYS else name, NetConfig, section)
        if len(keys) > 3:
            _check_searched_argument(param, getattr(spec.agent, keys[1]), name, keys[3])
    elif keys[0] == "env" and len(keys) > 1:
        if keys[1] in EnvConfig.DEPRECATED:
            raise SpecError(f"{param.key}: {section} is not read (SLM Lab v5 never read it)")
    elif keys[0] == "meta" and len(keys) > 1:
        if keys[1] in SEARCH_SETTINGS:
            raise SpecError(f"{param.key}: {section} sets up the search; it cannot be searched")
        _check_declared(param, keys[1], MetaConfig, section)
    else:
        raise SpecError(f"{param.key}: not a spec path a search can set ({SEARCHABLE})")


def _check_searched_argument(param: SearchParam, net: NetSpec | None, key: str, arg: str) -> None:
    """A searched argument of a net's optimizer, LR scheduler or loss (`key`, role-prefixed or
    not) is one its class takes."""
    if net is None:
        return
    role, _, own = key.partition("_") if key.startswith(ROLE_PREFIXES) else ("base", "", key)
    config = getattr(getattr(net, role), own, None)
    roles = [
        r for r in ROLE_PREFIXES if getattr(getattr(net, r.rstrip("_")), own, None) is not None
    ]
    if role == "base" and config is None and roles:
        raise SpecError(f"{param.key}: {_roles_hint(param.path.split('.'), roles)}")
    if isinstance(config, OptimSpec | LRSchedulerSpec | LossSpec) and arg != "name":
        error = config.argument_error(arg)
        if error:
            raise SpecError(f"{param.key}: {error}")


def _check_declared(
    param: SearchParam,
    key: str,
    cls: type[Config],
    section: str,
    reader: str = "",
    others: list[str] | None = None,
) -> None:
    """`key` is one `cls` declares; else one line: who reads it instead, or the nearest key."""
    if key in cls.keys():
        return
    if others:
        raise SpecError(f"{param.key}: {reader} does not read {key} (read by {', '.join(others)})")
    if key in cls.DEPRECATED:
        raise SpecError(f"{param.key}: {section}.{key} is not read (SLM Lab v5 never read it)")
    raise SpecError(
        f"{param.key}: {section}.{key} is not a spec key{did_you_mean(key, cls.keys())}"
    )


def _check_probes(param: SearchParam, spec: dict[str, Any], spec_name: str) -> None:
    """The spec validates with the path set to each value the distribution can give (its
    bounds, a float inside them, each choice): a typo'd bound or a float for an int key fails
    here, not in the middle of a search."""
    for value in param.probes():
        try:
            with schema.quiet():  # the spec's own warnings were given once already
                probe = schema.load(search_space.trial_spec(spec, {param.path: value}), spec_name)
                if param.path.startswith("env.") and not VAR_PATTERN.search(probe.env.name):
                    check_env_fit(probe)  # an env argument: the env itself takes it or not
        except SpecError as e:
            raise SpecError(f"{param.key}: the value {value!r} does not fit: {e}") from None


def check_search_run(spec: Spec) -> None:
    """What `search` mode needs beyond a valid spec: what `check_search_spec` checks, and trial
    resources the machine has (a cluster named by RAY_ADDRESS is checked once connected)."""
    check_search_spec(spec)
    if os.environ.get("RAY_ADDRESS"):
        return
    check_trial_resources(spec.meta, machine_cpus(), machine_gpus(), "this machine")


def check_search_spec(spec: Spec) -> None:
    """What `search` mode needs of the spec itself, wherever it runs: a search block and an ASHA
    grace period shorter than the run."""
    if spec.search is None:
        raise SpecError(
            'search: required by search mode, missing; add a search block, e.g. "search": {"agent.algorithm.gamma__uniform": [0.98, 0.999]}'
        )
    scheduler = spec.meta.search_scheduler
    if scheduler is not None and scheduler.grace_period >= spec.env.max_frame:
        raise SpecError(
            f"meta.search_scheduler.grace_period: {scheduler.grace_period} frames is not below env.max_frame {spec.env.max_frame}: no trial could be stopped early"
        )


def check_trial_resources(meta: MetaConfig, cpus: float, gpus: float, where: str) -> None:
    for kind, need, have in (("cpu", meta.trial_cpus, cpus), ("gpu", meta.trial_gpus, gpus)):
        if need > have:
            hint = (
                ""
                if kind == "gpu" or meta.search_resources is not None
                else " (one per session by default)"
            )
            raise SpecError(
                f"meta.search_resources.{kind}: a trial asks for {need:g} {kind.upper()}s{hint}, {where} has {have:g}"
            )


def check_memory_fit(spec: Spec, sessions: int) -> None:
    """A replay that will not fit: `sessions` sessions, all running at once, each allocate
    their replay at the start; refused when together they need more memory than this machine
    has available now (before a run that would fail or swap midway)."""
    memory, algo = spec.agent.memory, spec.agent.algorithm
    if not isinstance(memory, ReplayConfig) or not algo.needs_net:
        return
    from slm_lab.agent.memory.layout import replay_bytes

    one = replay_bytes(memory, memory_layout(spec))
    total, available = sessions * one, psutil.virtual_memory().available
    if total > available:
        hint = "max_size or meta.max_session" if sessions > 1 else "max_size"
        raise SpecError(
            f"agent.memory.max_size: {sessions} session{'s' if sessions > 1 else ''} x {format_bytes(one)} replay = {format_bytes(total)}, more than the {format_bytes(available)} available; lower {hint}"
        )


def check_gpu(spec: Spec) -> None:
    """A net that asks for CUDA (gpu: true) on a machine without an NVIDIA GPU: refused before
    the run, whose sessions would fail building the agent."""
    net = spec.agent.net
    if (
        net is not None
        and net.base.gpu not in ("auto", False, "false", None)
        and not machine_gpus()
    ):
        raise SpecError(
            "agent.net.gpu: true needs a CUDA GPU and this machine has none; set it to auto (CUDA when there is one) or false"
        )


def memory_layout(spec: Spec) -> "Layout":
    """The layout of the memory a session of `spec` will build, from its env's spaces."""
    from slm_lab.agent.memory.layout import Layout
    from slm_lab.env.backend import agent_obs_dtype

    env = spec.env
    obs_space, action_space = env_spaces(env)
    float_obs = env.normalize_obs or env.obs_clip is not None  # as the backend's normalizer
    obs_dtype = agent_obs_dtype(obs_space, float_obs)
    frame_stack = backend_module(env.name).frame_stack(obs_space)
    return Layout.of_spaces(env.num_envs, obs_space, obs_dtype, action_space, frame_stack)


def format_bytes(n: float) -> str:
    """`n` bytes in decimal units with one decimal: 5.6 GB."""
    for unit in BYTE_UNITS[:-1]:
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} {BYTE_UNITS[-1]}"


def schedule_warnings(spec: Spec) -> list[str]:
    """The frame-based schedules written in absolute frames that do not fit this run's
    max_frame: an LR, entropy or clip schedule that ends before or after it, an exploration or
    PER beta schedule that never reaches its end. A schedule given as a fraction of the run
    (`end_frac`, an LR scheduler without `frame`, PER's `beta_end_step: null`) always fits."""
    max_frame = spec.env.max_frame
    found = []
    for key, net in (("net", spec.agent.net), ("critic_net", spec.agent.critic_net)):
        if net is None:
            continue
        for role, config in (("", net.base), ("actor_", net.actor), ("critic_", net.critic)):
            sched = config.lr_scheduler_spec
            if sched is None or sched.frame is None or sched.frame == max_frame:
                continue
            if role and sched == net.base.lr_scheduler_spec:
                continue  # the shared schedule, named once
            path = f"agent.{key}.{role}lr_scheduler_spec.frame"
            found.append(
                f"{path}: the lr stops falling at frame {sched.frame}, before env.max_frame {max_frame}: the rest of the run trains at its floor; drop frame to follow max_frame"
                if sched.frame < max_frame
                else f"{path}: the lr falls until frame {sched.frame}, after env.max_frame {max_frame}: the run ends before it reaches its floor; drop frame to follow max_frame"
            )
    algo = spec.agent.algorithm
    for name, spans_run in (
        ("explore_var_spec", False),
        ("entropy_coef_spec", True),
        ("clip_eps_spec", True),
    ):
        sched = getattr(algo, name, None)
        if sched is None or sched.name == "no_decay":
            continue
        if name == "explore_var_spec" and algo.action_policy not in EXPLORING_POLICIES:
            continue
        end = sched.end_frame(max_frame)
        if end <= sched.start_step:
            found.append(
                f"agent.algorithm.{name}: it ends at frame {end} (of env.max_frame {max_frame}), not after its start_step {sched.start_step}: it jumps from {sched.start_val} to {sched.end_val} there"
            )
        elif sched.end_frac is not None:
            continue  # follows the run
        elif end > max_frame:
            value = VarScheduler(sched, max_frame).update(max_frame)
            found.append(
                f"agent.algorithm.{name}.end_step: {end} is after env.max_frame {max_frame}: the run ends at {value:.4g}, not {sched.end_val}; {FRAC_HINT}"
            )
        elif spans_run and end < max_frame:
            found.append(
                f"agent.algorithm.{name}.end_step: {end} is before env.max_frame {max_frame}: it holds {sched.end_val} for the rest of the run; {FRAC_HINT}"
            )
    memory = spec.agent.memory
    beta_end = getattr(memory, "beta_end_step", None)
    if beta_end is not None and beta_end > max_frame:
        found.append(
            f"agent.memory.beta_end_step: {beta_end} is after env.max_frame {max_frame}: beta never reaches 1; set it null to follow max_frame"
        )
    return found


def first_update(spec: Spec) -> tuple[int, str, str] | None:
    """(frame, what sets it, the key that moves it) of the run's first training call; None
    where the spec cannot say: an algorithm that never trains, or a batch of whole episodes
    (OnPolicyReplay), whose length the run decides."""
    algo, memory, num_envs = spec.agent.algorithm, spec.agent.memory, spec.env.num_envs
    if memory is None or memory.name == "OnPolicyReplay":
        return None
    if isinstance(algo, OffPolicyConfig):  # trains once past training_start_step with a batch
        start, batch = algo.training_start_step, memory.batch_size
        need, made_of, key = (
            (start, f"training_start_step {start}", "training_start_step")
            if start >= batch
            else (batch, f"agent.memory.batch_size {batch}", "agent.memory.batch_size")
        )
        frame = math.ceil(need / num_envs) * num_envs  # the replay fills num_envs a step
        steps = f" in steps of num_envs {num_envs}" if frame != need else ""
        return frame, made_of + steps, key
    if isinstance(algo, PPOConfig):
        unrolls = f" x num_unrolls {algo.num_unrolls}" if algo.num_unrolls > 1 else ""
        steps, made_of, key = (
            algo.time_horizon * algo.num_unrolls,
            f"time_horizon {algo.time_horizon}{unrolls}",
            "time_horizon",
        )
    else:  # an on-policy batch of training_frequency vector steps
        steps = algo.training_frequency
        made_of, key = f"training_frequency {steps}", "training_frequency"
    return steps * num_envs, f"{made_of} x num_envs {num_envs}", key


def update_warning(spec: Spec) -> str | None:
    """One line when the run reaches max_frame before its first training call: it would log
    every row with opt_step 0 and end as if it had trained."""
    first = first_update(spec)
    if first is None:
        return None
    frame, made_of, key = first
    max_frame, num_envs = spec.env.max_frame, spec.env.num_envs
    if math.ceil(max_frame / num_envs) * num_envs >= frame:  # the last vector step's frame
        return None
    return f"env.max_frame: {max_frame} ends before the first update at frame {frame} ({made_of}): the run never trains; raise max_frame or lower {key}"


def update_warnings(spec: Spec) -> list[str]:
    """`update_warning` of the run; for a search whose own values train, of a trial at each
    value a searched path can take (its bounds, each choice) that would not."""
    line = update_warning(spec)
    if line is not None:
        return [line]
    found = []
    for param in spec.search or ():
        for value in param.probes():
            try:
                trial = spec.trial({param.path: value})
            except SpecError:
                continue  # validation names what is wrong with the value
            line = update_warning(trial)
            if line is not None:
                found.append(f"{param.key}: a trial at {value!r} never trains: {line}")
                break
    return found


def warn_schedules(spec: Spec) -> None:
    """One warning per schedule that does not fit the run's max_frame, and one when the run
    (or a search's trial) ends before its first update."""
    from loguru import logger

    for line in schedule_warnings(spec) + update_warnings(spec):
        logger.warning(line)


# env_spaces' spaces by env section (its repr: every field, the env's arguments too) while
# `spaces_built_once` is on; None: built at every call
_SPACES: dict[str, tuple[Any, Any]] | None = None


def env_spaces(env: EnvConfig) -> tuple[Any, Any]:
    """(observation space as the agent sees it, action space) of the env a spec names, from
    the backend that runs it."""
    if _SPACES is None:
        return backend_module(env.name).spaces(env)
    key = repr(env)
    if (found := _SPACES.get(key)) is None:
        found = _SPACES[key] = backend_module(env.name).spaces(env)
    return found


@contextmanager
def spaces_built_once() -> Iterator[None]:
    """Inside, env_spaces builds each env section's spaces once: a run's checks ask twice (the
    nets' fit, the replay's size), and a 1-env ALE takes ~0.2 s to build. Scoped to one run's
    checks, where the env registries do not change (a long-lived process, a notebook or a test
    session, may register an id again with other spaces)."""
    global _SPACES
    outer, _SPACES = _SPACES, {} if _SPACES is None else _SPACES
    try:
        yield
    finally:
        _SPACES = outer


def check_env_fit(spec: Spec) -> None:
    """The checks that need the env's spaces: the nets' inputs, the action space's kind."""
    import gymnasium as gym

    from slm_lab.env.spaces import is_bounded

    agent, env, algo = spec.agent, spec.env, spec.agent.algorithm
    obs_space, action_space = env_spaces(env)
    if (newer := newer_version(env.name)) is not None:
        from loguru import logger

        logger.warning(f"env.name: {env.name} is out of date: use {newer}")
    for key, net in (("net", agent.net), ("critic_net", agent.critic_net)):
        if net is not None and (message := check_net_input(net.base, obs_space.shape, env.name)):
            raise SpecError(message.replace("agent.net", f"agent.{key}"))
    if not isinstance(action_space, gym.spaces.Discrete | gym.spaces.Box):
        raise SpecError(
            f"env.name: {env.name} has a {type(action_space).__name__} action space; SLM Lab supports Discrete and Box"
        )
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if algo.discrete_only and not discrete:
        raise SpecError(
            f"agent.algorithm.name: {algo.name} needs a discrete action space; {env.name} has a continuous (Box) one"
        )
    if not discrete and isinstance(algo, SoftActorCriticConfig) and not is_bounded(action_space):
        raise SpecError(
            f"env.name: {algo.name} squashes actions into the action space's bounds; {env.name}'s Box action space is unbounded"
        )
    if algo.needs_net:
        _check_arcs(agent, obs_space.shape, action_space, discrete)
    if algo.action_policy in ("epsilon_greedy", "boltzmann") and not discrete:
        raise SpecError(
            f"agent.algorithm.action_policy: {algo.action_policy} needs a discrete action space; {env.name} has a continuous (Box) one"
        )
    pdtype = algo.action_pdtype
    if pdtype != "default" and (pdtype in DISCRETE_PDTYPES) != discrete:
        raise SpecError(
            f"agent.algorithm.action_pdtype: {pdtype} does not fit the {type(action_space).__name__} action space of {env.name}"
        )
    if pdtype == "GumbelSoftmax" and not algo.gumbel_softmax:
        raise SpecError(
            f"agent.algorithm.action_pdtype: GumbelSoftmax trains the discrete actor of SoftActorCritic; {algo.name} has no GumbelSoftmax form (use Categorical)"
        )
    if pdtype == "NormalTanh" and not isinstance(algo, PolicyGradientConfig):
        raise SpecError(
            f"agent.algorithm.action_pdtype: NormalTanh is for the policy-gradient algorithms (Reinforce, ActorCritic, PPO, SIL); {algo.name} has its own action distribution"
        )
    if pdtype == "NormalTanh" and not is_bounded(action_space):
        raise SpecError(
            f"agent.algorithm.action_pdtype: NormalTanh squashes actions into the action space's bounds; {env.name}'s Box action space is unbounded (use Normal)"
        )


def _check_arcs(
    agent: AgentConfig, obs_shape: tuple[int, ...], action_space: Any, discrete: bool
) -> None:
    """Build every TorchArcNet body the algorithm will build, on an input of the shape that net
    gets: observations, or (obs, action) concatenated for continuous SAC/CrossQ critics."""
    algo, net = agent.algorithm, agent.net
    roles: list[tuple[str, str | None, NetConfig, tuple[int, ...], bool]] = []
    if isinstance(algo, SoftActorCriticConfig):
        critic_src, critic_path = (
            (agent.critic_net, "agent.critic_net") if agent.critic_net else (net, "agent.net")
        )
        critic_shape = (
            obs_shape if discrete else (math.prod(obs_shape) + math.prod(action_space.shape),)
        )
        roles += [
            ("agent.net", "actor", net.actor, obs_shape, _own_arc(net, "actor")),
            (
                critic_path,
                "critic",
                critic_src.critic,
                critic_shape,
                _own_arc(critic_src, "critic"),
            ),
        ]
    elif isinstance(algo, PolicyGradientConfig) and not (net.base.shared and algo.with_critic):
        roles.append(("agent.net", "actor", net.actor, obs_shape, _own_arc(net, "actor")))
        if algo.with_critic:
            roles.append(("agent.net", "critic", net.critic, obs_shape, _own_arc(net, "critic")))
    else:  # one net: a Q-net, or a shared actor-critic
        roles.append(("agent.net", None, net.base, obs_shape, False))
    for path, role, config, shape, own in roles:
        if config.type != "TorchArcNet":
            continue
        from slm_lab.agent.net.torcharc_net import check_arc  # torch: only for arc nets

        key = "arc_file" if config.arc is None and config.arc_file is not None else "arc"
        if message := check_arc(config, shape, f"{path}.{role + '_' if own else ''}{key}"):
            raise SpecError(message)


def _own_arc(net: NetSpec, role: str) -> bool:
    """Whether a role's arc comes from its own actor_/critic_ key (for the message's key name)."""
    shared = net.base.arc or net.base.arc_file
    own = getattr(net, role)
    return (own.arc or own.arc_file) != shared
