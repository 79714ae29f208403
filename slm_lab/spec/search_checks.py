"""The search block's checks: each searched path names a key its section reads, each value its
distribution can give validates, and what `search` mode needs (a search block, an ASHA grace
period shorter than the run, trial resources the machine has)."""

import os
from typing import Any

from slm_lab.agent.algorithm.config import readers
from slm_lab.agent.memory.config import MEMORY_CONFIGS, SILMemoryConfig
from slm_lab.agent.net.config import (
    NET_ROLE_KEYS,
    ROLE_PREFIXES,
    LossSpec,
    LRSchedulerSpec,
    NetConfig,
    NetSpec,
    OptimSpec,
)
from slm_lab.env.config import EnvConfig
from slm_lab.experiment.config import MetaConfig
from slm_lab.lib.config import Config, SpecError, did_you_mean
from slm_lab.lib.util import machine_cpus, machine_gpus
from slm_lab.spec import schema, search_space
from slm_lab.spec.env_fit import check_env_fit
from slm_lab.spec.parse import VAR_PATTERN, roles_hint
from slm_lab.spec.schema import Spec
from slm_lab.spec.search_space import SearchParam

# meta keys that set up the search itself; a trial cannot change them
SEARCH_SETTINGS = ("max_trial", "search_resources", "search_scheduler")
SEARCHABLE = "agent.algorithm|memory|net|critic_net.<key>, env.<key> or meta.<key>"


def check_searched_path(param: SearchParam, spec: Spec) -> None:
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
        raise SpecError(f"{param.key}: {roles_hint(param.path.split('.'), roles)}")
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


def check_probes(param: SearchParam, spec: dict[str, Any], spec_name: str) -> None:
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
