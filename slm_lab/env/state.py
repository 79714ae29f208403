"""Capture and restore the plain-data state of an env stack, for exact resume.

Walks the wrapper chain (vector wrappers, the vector env, each sub-env's wrappers and the
unwrapped env) and records attributes that are plain data: Python numbers, strings and bytes,
numpy arrays and scalars of any non-object dtype, lists, tuples, deques and dicts of those,
numpy Generators (as their state) and running mean/std objects. The result only holds tensors,
Python values and containers, so it loads with `torch.load(weights_only=True)`.

An env whose simulation lives in a native object (Box2D worlds, MuJoCo data) cannot be captured
this way; `capture` then reports the state as partial and resume starts fresh episodes instead.
`uncapturable` names the first such attribute.
"""

from collections import deque
from enum import Enum
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers.utils import RunningMeanStd

# attributes that are configuration or rendering, never simulation state
_IGNORED_TYPES = (gym.Space, gym.envs.registration.EnvSpec, dict, str, type, Enum)
_SKIP_ATTRS = {
    "metadata",
    "spec",
    "render_mode",
    "_cached_spec",
    "closed",
    "_np_random_seed",
    "_ezpickle_args",  # EzPickle's record of the constructor arguments
    "_ezpickle_kwargs",
}
_PYTHON_PLAIN = (bool, int, float, complex, str, bytes)
_RMS_ATTRS = ("mean", "var", "count")
_WRAPPERS = (gym.Wrapper, gym.vector.VectorWrapper)


class _Uncapturable(Exception):
    """A value with no plain-data encoding; `path` is where it sits inside the attribute."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _torch_can_hold(dtype: np.dtype) -> bool:
    """Whether `torch.from_numpy` takes this dtype (native byte order numbers and bools)."""
    return (
        dtype.kind in "biufc"
        and dtype.isnative
        and dtype not in (np.dtype(np.longdouble), np.dtype(np.clongdouble))
    )


def _encode_array(v: np.ndarray, path: str) -> dict[str, Any]:
    import torch  # only once a state is written: validation (`check`) reads envs without torch

    if v.dtype.hasobject:
        raise _Uncapturable(path)
    if _torch_can_hold(v.dtype):
        try:
            return {"__np__": torch.from_numpy(np.array(v, copy=True))}
        except TypeError:  # a platform alias torch does not take (numpy's ulonglong): as bytes
            pass
    # bytes, str, datetime, structured, foreign byte order: the raw buffer and its dtype
    raw = torch.from_numpy(np.frombuffer(v.tobytes(), dtype=np.uint8).copy())
    return {"__np_bytes__": raw, "dtype": np.lib.format.dtype_to_descr(v.dtype), "shape": v.shape}


def _one_numpy_scalar_type(items: deque) -> bool:
    """Whether every item is a numpy number of one type, so one array holds them all."""
    first = next(iter(items), None)
    return (
        isinstance(first, np.number | np.bool_)
        and _torch_can_hold(first.dtype)
        and all(type(x) is type(first) for x in items)
    )


def _encode(v: Any, path: str = "") -> Any:
    """`v` as tensors, Python values and tagged dicts; raises _Uncapturable where it cannot."""
    if v is None or type(v) in _PYTHON_PLAIN:
        return v
    if type(v) is np.ndarray:
        return _encode_array(v, path)
    if isinstance(v, np.generic):  # a 0-d array keeps its dtype (np.float32 stays np.float32)
        return {"__np_scalar__": _encode_array(np.asarray(v), path)}
    if type(v) in (list, tuple):
        return {
            "__seq__": [_encode(x, f"{path}[{i}]") for i, x in enumerate(v)],
            "tuple": type(v) is tuple,
        }
    if type(v) is deque:
        if _one_numpy_scalar_type(v):  # an episode statistics queue: one tensor, not one a number
            return {"__deque_np__": _encode_array(np.array(v), path), "maxlen": v.maxlen}
        return {
            "__deque__": [_encode(x, f"{path}[{i}]") for i, x in enumerate(v)],
            "maxlen": v.maxlen,
        }
    if type(v) is dict:
        return {
            "__dict__": [(_encode(k, path), _encode(x, f"{path}[{k!r}]")) for k, x in v.items()]
        }
    raise _Uncapturable(path)


def _decode(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    if "__np__" in v:
        return v["__np__"].numpy().copy()
    if "__np_bytes__" in v:
        dtype = np.lib.format.descr_to_dtype(v["dtype"])
        return np.frombuffer(v["__np_bytes__"].numpy().tobytes(), dtype).reshape(v["shape"]).copy()
    if "__np_scalar__" in v:
        return _decode(v["__np_scalar__"])[()]
    if "__seq__" in v:
        seq = [_decode(x) for x in v["__seq__"]]
        return tuple(seq) if v["tuple"] else seq
    if "__deque_np__" in v:  # iterating an array gives numpy scalars of its dtype back
        return deque(_decode(v["__deque_np__"]), maxlen=v["maxlen"])
    if "__deque__" in v:
        return deque((_decode(x) for x in v["__deque__"]), maxlen=v["maxlen"])
    if "__dict__" in v:
        return {_decode(k): _decode(x) for k, x in v["__dict__"]}
    return v  # a Generator state saved before dicts were tagged: plain already


def encode(v: Any) -> Any:
    """A plain value (an observation array, say) as data a checkpoint holds; `decode` gives it
    back."""
    return _encode(v)


def decode(v: Any) -> Any:
    return _decode(v)


def _encode_attribute(v: Any, path: str) -> Any:
    """An attribute's value; a Generator or running mean/std as what restore sets in place."""
    if isinstance(v, np.random.Generator):
        return {"__rng__": _encode(v.bit_generator.state, path)}
    if isinstance(v, RunningMeanStd):
        return {"__rms__": {k: _encode(getattr(v, k), path) for k in _RMS_ATTRS}}
    return _encode(v, path)


def _is_env(v: Any) -> bool:
    return isinstance(v, gym.Env | gym.vector.VectorEnv)


def _is_code(v: Any) -> bool:
    """Functions, classes and lists of them (a vector env's env_fns): not state."""
    if type(v) in (list, tuple):
        return len(v) > 0 and all(map(callable, v))
    return callable(v)


def _child_path(obj: Any, path: str, chain_root: str | None, child: Any) -> tuple[str, str | None]:
    """(path, chain root) of `obj.env`: a wrapper chain's innermost env is `<root>.unwrapped`."""
    if not isinstance(obj, _WRAPPERS):
        return _join(path, "env"), None
    root = path if chain_root is None else chain_root
    if isinstance(child, _WRAPPERS):
        return _join(path, "env"), root
    return _join(root, "unwrapped"), None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(obj: Any, path: str, chain_root: str | None) -> tuple[dict[str, Any], str | None]:
    """(state, the path of the first attribute that cannot be captured, or None)."""
    state: dict[str, Any] = {}
    missing: str | None = None
    for name, v in vars(obj).items():
        if name in _SKIP_ATTRS or _is_code(v):
            continue
        attr_path = _join(path, name)
        child_missing: str | None = None
        if type(v) in (list, tuple) and v and all(map(_is_env, v)):  # a vector env's envs
            children = [_walk(e, f"{attr_path}[{i}]", None) for i, e in enumerate(v)]
            state[name] = {"__list__": [c[0] for c in children]}
            child_missing = next((c[1] for c in children if c[1] is not None), None)
        elif _is_env(v):  # a wrapper's env, or one a wrapper keeps (a vector ClipReward's)
            child_path, child_root = (
                _child_path(obj, path, chain_root, v) if name == "env" else (attr_path, None)
            )
            state[name], child_missing = _walk(v, child_path, child_root)
        elif isinstance(v, _IGNORED_TYPES) and not isinstance(v, np.generic):  # np.str_ is data
            continue
        else:
            try:
                state[name] = _encode_attribute(v, attr_path)
            except _Uncapturable as e:  # a native object (physics world, renderer) or odd type
                child_missing = e.path
        missing = missing or child_missing
    return state, missing


def capture(obj: Any) -> tuple[dict[str, Any], bool]:
    """Returns (state, complete). complete is False if some state could not be captured; the
    state then holds every attribute that could."""
    state, missing = _walk(obj, "", None)
    return state, missing is None


def uncapturable(obj: Any) -> str | None:
    """The dotted path of the first attribute in `obj`'s stack that `capture` cannot encode
    (e.g. `unwrapped.envs[0].unwrapped.world`); None when the stack captures completely."""
    return _walk(obj, "", None)[1]


def resume_note(env_name: str) -> str:
    """What a run of an env whose stack `uncapturable` names says once: what a resume loses."""
    return (
        f"{env_name} runs in a simulator whose state cannot be saved: a resume of this run "
        "restarts the episodes in progress (the nets, optimizers, memory and counters resume as saved)"
    )


def restore(obj: Any, state: dict[str, Any]) -> None:
    for name, v in state.items():
        child = getattr(obj, name, None)
        if isinstance(v, dict) and "__list__" in v:
            for c, s in zip(child, v["__list__"], strict=True):
                restore(c, s)
        elif _is_env(child):
            restore(child, v)
        elif isinstance(v, dict) and "__rng__" in v:
            child.bit_generator.state = _decode(v["__rng__"])
        elif isinstance(v, dict) and "__rms__" in v:
            for k, x in v["__rms__"].items():
                setattr(child, k, _decode(x))
        else:
            setattr(obj, name, _decode(v))
