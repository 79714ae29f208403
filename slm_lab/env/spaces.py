"""What the agent sees of an env's spaces.

A Box observation reaches the agent as it is. Every other standard space (Discrete, one-hot;
MultiDiscrete, one-hot per component; MultiBinary; Dict and Tuple of those and of Boxes) is
flattened into a float32 vector by Gymnasium's flatten, as other libraries' MLP policies do.
A Discrete action space with a nonzero `start` is shifted so the agent acts in 0..n-1.
"""

import gymnasium as gym
import numpy as np


def agent_observation_space(space: gym.Space) -> gym.spaces.Box:
    """The observation space the agent's nets take; ValueError when there is none."""
    if isinstance(space, gym.spaces.Box):
        return space
    try:
        flat = gym.spaces.flatten_space(space)
    except NotImplementedError:
        flat = None
    if not isinstance(flat, gym.spaces.Box):
        raise ValueError(
            f"its {type(space).__name__} observation space cannot be flattened into a vector; "
            "wrap the env in an observation wrapper that returns a Box"
        )
    return gym.spaces.Box(
        flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32
    )


def wrap_spaces(env: gym.Env) -> gym.Env:
    """Flatten a non-Box observation space; shift a Discrete action space to start at 0."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        env = gym.wrappers.TransformObservation(
            env,
            lambda obs: gym.spaces.flatten(space, obs).astype(np.float32),
            agent_observation_space(space),
        )
    action_space = env.action_space
    if isinstance(action_space, gym.spaces.Discrete) and action_space.start != 0:
        start = int(action_space.start)
        env = gym.wrappers.TransformAction(
            env, lambda a: a + start, gym.spaces.Discrete(int(action_space.n))
        )
    return env


def is_bounded(space: gym.spaces.Box) -> bool:
    return bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))
