"""Capture and restore the plain-data state of an env stack, for exact resume.

Walks the wrapper chain (vector wrappers, the vector env, each sub-env's wrappers and the
unwrapped env) and records attributes that are plain data: numbers, numpy arrays, deques of
numbers, numpy Generators (as their state) and running mean/std objects. The result only holds
tensors, numbers, strings and containers, so it loads with `torch.load(weights_only=True)`.

An env whose simulation lives in a native object (Box2D worlds, MuJoCo data) cannot be captured
this way; `capture` then reports the state as partial and resume starts fresh episodes instead.
"""

from collections import deque
from enum import Enum
from typing import Any

import gymnasium as gym
import numpy as np
import torch

# attributes that are configuration or rendering, never simulation state
_IGNORED_TYPES = (gym.Space, gym.envs.registration.EnvSpec, dict, str, type, Enum)
_CHILD_ATTRS = ("env", "envs")
_SKIP_ATTRS = {"metadata", "spec", "render_mode", "_cached_spec", "closed", "_np_random_seed"}


def _is_plain(v: Any) -> bool:
    return (
        v is None
        or isinstance(v, bool | int | float | np.generic | np.ndarray)
        and not (isinstance(v, np.ndarray) and v.dtype == object)
    )


def _encode(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return {"__np__": torch.from_numpy(np.array(v, copy=True))}
    if isinstance(v, np.generic):
        return v.item()
    return v


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "__np__" in v:
        return v["__np__"].numpy().copy()
    return v


def capture(obj: Any) -> tuple[dict[str, Any], bool]:
    """Returns (state, complete). complete is False if some native state could not be captured."""
    state: dict[str, Any] = {}
    complete = True
    for name, v in vars(obj).items():
        if name in _SKIP_ATTRS or callable(v) and not isinstance(v, gym.Env | gym.vector.VectorEnv):
            continue
        if name in _CHILD_ATTRS:
            if isinstance(v, list | tuple):
                children = [capture(e) for e in v]
                state[name] = {"__list__": [c[0] for c in children]}
                complete &= all(c[1] for c in children)
            elif isinstance(v, gym.Env | gym.vector.VectorEnv):
                state[name], ok = capture(v)
                complete &= ok
            continue
        if _is_plain(v):
            state[name] = _encode(v)
        elif isinstance(v, np.random.Generator):
            state[name] = {"__rng__": v.bit_generator.state}
        elif isinstance(v, deque):
            state[name] = {"__deque__": [_encode(x) for x in v], "maxlen": v.maxlen}
        elif hasattr(v, "mean") and hasattr(v, "var") and hasattr(v, "count"):  # RunningMeanStd
            state[name] = {"__rms__": {k: _encode(getattr(v, k)) for k in ("mean", "var", "count")}}
        elif isinstance(v, list | tuple) and all(_is_plain(x) for x in v):
            state[name] = {"__seq__": [_encode(x) for x in v], "tuple": isinstance(v, tuple)}
        elif isinstance(v, _IGNORED_TYPES) or isinstance(v, list | tuple):
            continue
        else:
            complete = False  # a native object (physics world, renderer state) we cannot capture
    return state, complete


def restore(obj: Any, state: dict[str, Any]) -> None:
    for name, v in state.items():
        if name in _CHILD_ATTRS:
            child = getattr(obj, name)
            if isinstance(v, dict) and "__list__" in v:
                for c, s in zip(child, v["__list__"], strict=True):
                    restore(c, s)
            else:
                restore(child, v)
        elif isinstance(v, dict) and "__rng__" in v:
            getattr(obj, name).bit_generator.state = v["__rng__"]
        elif isinstance(v, dict) and "__deque__" in v:
            setattr(obj, name, deque((_decode(x) for x in v["__deque__"]), maxlen=v["maxlen"]))
        elif isinstance(v, dict) and "__rms__" in v:
            rms = getattr(obj, name)
            for k, x in v["__rms__"].items():
                setattr(rms, k, _decode(x))
        elif isinstance(v, dict) and "__seq__" in v:
            seq = [_decode(x) for x in v["__seq__"]]
            setattr(obj, name, tuple(seq) if v["tuple"] else seq)
        else:
            setattr(obj, name, _decode(v))
