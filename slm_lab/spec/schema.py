"""A whole spec, typed: `load(spec)` checks every section against the components' declared
configs and returns a `Spec`, the one object the rest of SLM Lab reads (torch-free).

The sections: `agent` (`algorithm` by its name, `memory` by its name, `net` and `critic_net`
with their actor_/critic_ keys), `env`, `meta`, and an optional `search`. The checks that need
the env itself (its spaces) are in spec_util.validate.
"""

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from slm_lab.agent.algorithm.config import (
    ALGORITHM_CONFIGS,
    AlgorithmConfig,
    PPOConfig,
    readers,
)
from slm_lab.agent.config import AgentConfig
from slm_lab.agent.memory.config import (
    MEMORY_CONFIGS,
    MEMORY_NAMES,
    MemoryConfig,
    SILMemoryConfig,
)
from slm_lab.agent.net.config import parse_net
from slm_lab.env.config import EnvConfig
from slm_lab.experiment.config import MetaConfig, check_hogwild
from slm_lab.lib.config import SpecError, did_you_mean, parse
from slm_lab.spec import search_space
from slm_lab.spec.search_space import SearchParam

TOP_KEYS = ("agent", "env", "meta", "search", "name", "run_info")
AGENT_KEYS = ("name", "algorithm", "memory", "net", "critic_net")
# keys that v5 spec files carry but v5 never read: warned about, then ignored
DEPRECATED_TOP = {"body": None}


@dataclass(frozen=True)
class Spec:
    """A whole spec, typed. It is never changed: `with_values` and `trial` make new ones."""

    name: str
    agent: AgentConfig
    env: EnvConfig
    meta: MetaConfig
    search: tuple[SearchParam, ...] | None  # the searched paths, when the spec has a search block
    # the plain spec it was read from (JSON data, with its name): what a run folder records
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The plain spec, as a spec file holds it."""
        return copy.deepcopy(self.raw)

    def with_values(self, values: dict[str, Any]) -> "Spec":
        """This spec with each dotted path set to its value, checked again."""
        with quiet():  # its own warnings were given when it was first read
            return load(search_space.set_paths(self.raw, values), self.name)

    def trial(self, values: dict[str, Any]) -> "Spec":
        """The spec one search trial runs: the searched paths set to `values`, no search
        block, one trial."""
        with quiet():
            return load(search_space.trial_spec(self.raw, values), self.name)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """SLM Lab's log lines off inside the block (a spec read again warns nothing again)."""
    from loguru import logger

    logger.disable("slm_lab")
    try:
        yield
    finally:
        logger.enable("slm_lab")


def _section(spec: dict[str, Any], key: str, path: str) -> Any:
    value = spec.get(key)
    if value is None:
        raise SpecError(f"{path}{key}: required (mapping), missing")
    return value


def load(spec: Any, spec_name: str = "") -> Spec:
    """The typed spec; SpecError (one line, the key path first) on the first problem."""
    from loguru import logger

    if not isinstance(spec, dict):
        raise SpecError(f"{spec_name}: a spec must be a mapping, got {type(spec).__name__}")
    for k in spec:
        if k in DEPRECATED_TOP:
            logger.warning(f"{k}: ignored (SLM Lab v5 never read it)")
        elif k not in TOP_KEYS:
            raise SpecError(f"{k}: unknown key{did_you_mean(str(k), TOP_KEYS)}")
    agent = _section(spec, "agent", "")
    env = parse(EnvConfig, _section(spec, "env", ""), "env")
    meta = parse(MetaConfig, _section(spec, "meta", ""), "meta")
    if not isinstance(agent, dict):
        raise SpecError(f"agent: expected a mapping, got {agent!r}")
    for k in agent:
        if k not in AGENT_KEYS:
            raise SpecError(f"agent.{k}: unknown key{did_you_mean(str(k), AGENT_KEYS)}")
    algorithm = load_algorithm(_section(agent, "algorithm", "agent."))
    net = parse_net(agent["net"], "agent.net") if agent.get("net") is not None else None
    critic_net = (
        parse_net(agent["critic_net"], "agent.critic_net")
        if agent.get("critic_net") is not None
        else None
    )
    memory = load_memory(agent.get("memory"), algorithm)
    agent_config = AgentConfig(agent.get("name"), algorithm, memory, net, critic_net)
    search = spec.get("search")
    if search is not None:
        search = tuple(search_space.parse(search))
    name = str(spec.get("name") or spec_name)
    raw = copy.deepcopy({**spec, "name": name})
    loaded = Spec(name, agent_config, env, meta, search, raw)
    _check_agent(loaded)
    check_hogwild(loaded)
    return loaded


def load_algorithm(section: Any) -> AlgorithmConfig:
    if not isinstance(section, dict):
        raise SpecError(f"agent.algorithm: expected a mapping, got {section!r}")
    name = section.get("name")
    if name is None:
        raise SpecError("agent.algorithm.name: required (str), missing")
    if not isinstance(name, str):
        raise SpecError(f"agent.algorithm.name: expected str, got {name!r}")
    if name not in ALGORITHM_CONFIGS:
        raise SpecError(
            f"agent.algorithm.name: {name!r} is not available{did_you_mean(str(name), ALGORITHM_CONFIGS)} (available: {', '.join(ALGORITHM_CONFIGS)})"
        )
    cls = ALGORITHM_CONFIGS[name]
    others = {
        k: f"read by {', '.join(readers(k))}, not by {name}"
        for c in ALGORITHM_CONFIGS.values()
        for k in c.keys()
        if k not in cls.keys()
    }
    return parse(cls, section, "agent.algorithm", others)


def load_memory(section: Any, algorithm: AlgorithmConfig) -> MemoryConfig | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        raise SpecError(f"agent.memory: expected a mapping, got {section!r}")
    name = section.get("name")
    if name is None:
        if algorithm.needs_net:
            raise SpecError(f"agent.memory.name: required by {algorithm.name}")
        return None
    if not isinstance(name, str):
        raise SpecError(f"agent.memory.name: expected str, got {name!r}")
    if name not in MEMORY_CONFIGS:
        raise SpecError(
            f"agent.memory.name: {name!r} is not available{did_you_mean(str(name), MEMORY_NAMES)} (available: {', '.join(MEMORY_NAMES)})"
        )
    cls = SILMemoryConfig if algorithm.self_imitation else MEMORY_CONFIGS[name]
    others = {
        k: f"not read by {name}"
        for c in (*MEMORY_CONFIGS.values(), SILMemoryConfig)
        for k in c.keys()
        if k not in cls.keys()
    }
    return parse(cls, section, "agent.memory", others)


def _check_agent(spec: Spec) -> None:
    """What the algorithm needs from the other sections."""
    agent, algo = spec.agent, spec.agent.algorithm
    if not algo.needs_net:
        return
    if agent.net is None:
        raise SpecError(f"agent.net: required by {algo.name}")
    if agent.memory is None:
        raise SpecError(f"agent.memory: required by {algo.name}")
    if agent.memory.name not in algo.memory_kinds:
        raise SpecError(
            f"agent.memory.name: {algo.name} needs one of {', '.join(algo.memory_kinds)}; got {agent.memory.name!r}"
        )
    if isinstance(algo, PPOConfig):
        batch = algo.time_horizon * algo.num_unrolls * spec.env.num_envs
        if algo.minibatch_size > batch:
            raise SpecError(
                f"agent.algorithm.minibatch_size: {algo.minibatch_size} is larger than the batch of {batch} (time_horizon x num_unrolls x num_envs)"
            )
    if not algo.squashed_actor_q_critics and agent.critic_net is not None:
        owners = [n for n, c in ALGORITHM_CONFIGS.items() if c.squashed_actor_q_critics]
        raise SpecError(
            f"agent.critic_net: read only by {' and '.join(owners)}, not by {algo.name}"
        )
