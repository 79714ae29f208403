"""A spec against its env's spaces: the nets' inputs, the action space's kind and bounds, each
TorchArcNet body built on the input it gets. The spaces come from the backend that runs the
env (Gymnasium is loaded when a check runs; torch only for a TorchArcNet)."""

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from slm_lab.agent.algorithm.config import DISCRETE_PDTYPES, PolicyGradientConfig
from slm_lab.agent.config import AgentConfig
from slm_lab.agent.net.config import NetConfig, NetSpec, check_net_input
from slm_lab.env.config import EnvConfig
from slm_lab.env.registry import backend_module, newer_version
from slm_lab.lib.config import SpecError
from slm_lab.spec.schema import Spec

# env_spaces' spaces by env section (its repr: every field, the env's arguments too) while
# `spaces_built_once` is on; None: built at every call
_SPACES: dict[str, tuple[Any, Any]] | None = None


def env_spaces(env: EnvConfig) -> tuple[Any, Any] | None:
    """(observation space as the agent sees it, action space) of the env a spec names, from
    the backend that runs it; None for an env whose spaces are known only once it loads assets
    it downloads at its first load (MuJoCo Playground's robots)."""
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
    if (spaces := env_spaces(env)) is None:
        return  # the spec's own keys are checked; its fit to the env once the env loads
    obs_space, action_space = spaces
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
    if not discrete and algo.squashed_actor_q_critics and not is_bounded(action_space):
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
    if algo.squashed_actor_q_critics:
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
