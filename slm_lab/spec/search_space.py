"""The `search` block of a spec: which spec paths a search samples, and from what (torch-free,
Ray-free: `slm-lab check` validates it).

A leaf is `<dotted spec path>__<distribution>: [arguments]`, written flat
(`"agent.algorithm.gamma__uniform": [0.98, 0.999]`) or nested
(`"agent": {"algorithm": {"gamma__uniform": [...]}}`), as SLM Lab v5 specs write it. The
distributions are Ray Tune's, with its bounds and weights:

  uniform [lo, hi]          a float in [lo, hi]
  quniform [lo, hi, q]      uniform, rounded to a multiple of q (lo and hi multiples of q)
  loguniform [lo, hi]       a float in [lo, hi], uniform in log space (lo > 0)
  qloguniform [lo, hi, q]   loguniform, rounded to a multiple of q (lo and hi multiples of q)
  randn [mean, sd]          a normal float
  qrandn [mean, sd, q]      randn, rounded to a multiple of q
  randint [lo, hi]          an int in [lo, hi) (hi excluded)
  qrandint [lo, hi, q]      a multiple of q in [lo, hi], each as likely (hi included, except
                            with q = 1: then randint)
  lograndint [lo, hi]       an int in [lo, hi) (hi excluded): a float uniform in log space,
                            floored (lo > 0)
  qlograndint [lo, hi, q]   a multiple of q in [lo, hi], lograndint over the multiples'
                            indices (hi included, except with q = 1: then lograndint)
  choice [v1, v2, ...]      one of the values (any JSON value: a list, a mapping, null)

A quantized int distribution takes the multiples of q inside its bounds (qlograndint
[1, 100, 10] draws 10 to 100); a quantized float one refuses bounds that are not multiples of q,
as Ray Tune does.
"""

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slm_lab.lib.config import SpecError, did_you_mean

DIST_SEP = "__"
# distribution -> the names of its arguments
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "uniform": ("lo", "hi"),
    "quniform": ("lo", "hi", "q"),
    "loguniform": ("lo", "hi"),
    "qloguniform": ("lo", "hi", "q"),
    "randn": ("mean", "sd"),
    "qrandn": ("mean", "sd", "q"),
    "randint": ("lo", "hi"),
    "qrandint": ("lo", "hi", "q"),
    "lograndint": ("lo", "hi"),
    "qlograndint": ("lo", "hi", "q"),
    "choice": (),
}
INT_DISTS = ("randint", "qrandint", "lograndint", "qlograndint")
QUANTIZED_INT_DISTS = ("qrandint", "qlograndint")
QUANTIZED_FLOAT_DISTS = ("quniform", "qloguniform")
LOG_DISTS = ("loguniform", "qloguniform", "lograndint", "qlograndint")
NORMAL_DISTS = ("randn", "qrandn")
# a float that is not a round number, to check that a key declared int refuses float draws
NON_INTEGRAL_FRACTION = 1 / math.pi
QUANTIZED_DIGITS = 12


@dataclass(frozen=True)
class SearchParam:
    """One searched spec path: `path` (dotted), its distribution and arguments."""

    path: str
    dist: str
    args: tuple[Any, ...]

    @property
    def key(self) -> str:
        """The leaf as the spec writes it, for messages."""
        return f"search.{self.path}{DIST_SEP}{self.dist}"

    def probes(self) -> list[Any]:
        """Values the distribution draws, to validate against the spec before any trial runs:
        its smallest and largest draw, and a non-integral draw where it has one (a key declared
        int refuses it): for the float distributions an interior value (the normal ones: the
        mean, and a value within one sd), for the quantized ones the second multiple of q; every
        option of a choice."""
        if self.dist == "choice":
            return list(self.args)
        if self.dist in INT_DISTS:
            q, first, last = self.int_grid()
            return [q * first, q * last]
        if self.dist in NORMAL_DISTS:
            mean, sd = self.args[0], self.args[1]
            if self.dist == "randn":
                return [mean, mean + sd * NON_INTEGRAL_FRACTION]
            q = self.args[2]
            return [quantize(mean, q), quantize(mean + q, q)]
        lo, hi = self.args[0], self.args[1]
        if self.dist in QUANTIZED_FLOAT_DISTS:
            q = self.args[2]
            return list(dict.fromkeys([quantize(lo, q), quantize(lo + q, q), quantize(hi, q)]))
        return [lo, hi, lo + (hi - lo) * NON_INTEGRAL_FRACTION]

    def int_grid(self) -> tuple[int, int, int]:
        """(q, first, last) of an int distribution: it draws q x k for k in [first, last], as
        Ray Tune does. With q = 1 (randint and lograndint too) hi is excluded; a larger q
        takes the multiples of q inside [lo, hi], hi included."""
        lo, hi = self.args[0], self.args[1]
        q = self.args[2] if self.dist in QUANTIZED_INT_DISTS else 1
        if q == 1:
            return 1, lo, hi - 1
        return q, grid_index(lo, q, math.ceil), grid_index(hi, q, math.floor)


def grid_index(bound: float, q: float, inwards: Callable[[float], int]) -> int:
    """The index k of the multiple k x q that `bound` rounds to inwards (`math.ceil` for a lower
    bound, `math.floor` for an upper one); a bound within float error of a multiple is that
    multiple, as Ray Tune takes it."""
    scaled = bound / q
    nearest = round(scaled)
    return nearest if math.isclose(scaled, nearest) else inwards(scaled)


def quantize(x: float, q: float) -> float:
    """x rounded to the nearest multiple of q (half to even), as Ray Tune rounds, written to 12
    significant digits: 0.1 x 3 reads 0.3, not 0.30000000000000004."""
    return float(f"{round(x / q) * q:.{QUANTIZED_DIGITS}g}")


def parse(block: Any) -> list[SearchParam]:
    """The searched paths of a `search` block; SpecError (the leaf's path first) on the first
    malformed leaf."""
    if not isinstance(block, dict) or not block:
        raise SpecError(f"search: expected a mapping of <spec path>__<distribution>, got {block!r}")
    params: list[SearchParam] = []
    _collect(block, "", params)
    seen: dict[str, SearchParam] = {}
    for p in params:
        if p.path in seen:
            raise SpecError(f"{p.key}: {p.path} is searched twice (also {seen[p.path].key})")
        seen[p.path] = p
    return params


def paths(spec: dict[str, Any]) -> list[str]:
    """The searched paths of a spec with a search block, in the block's order."""
    return [p.path for p in parse(spec["search"])]


def _collect(node: dict[str, Any], prefix: str, out: list[SearchParam]) -> None:
    for name, value in node.items():
        path = f"{prefix}{name}"
        if DIST_SEP in str(name):
            target, dist = str(path).rsplit(DIST_SEP, 1)
            out.append(_param(target, dist, value))
        elif isinstance(value, dict):
            _collect(value, f"{path}.", out)
        elif isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            _collect(value[0], f"{path}.", out)  # v4's single-element agent/env lists
        else:
            raise SpecError(
                f"search.{path}: a search leaf is named <spec path>__<distribution>, e.g. agent.algorithm.gamma__uniform"
            )


def _param(path: str, dist: str, args: Any) -> SearchParam:
    key = f"search.{path}{DIST_SEP}{dist}"
    if dist == "grid_search":
        raise SpecError(
            f"{key}: grid_search cannot be sampled by Optuna; use {path}{DIST_SEP}choice with the same values"
        )
    if dist not in DISTRIBUTIONS:
        raise SpecError(
            f"{key}: {dist!r} is not a search distribution{did_you_mean(dist, DISTRIBUTIONS)} (one of {', '.join(DISTRIBUTIONS)})"
        )
    if not isinstance(args, list):
        raise SpecError(f"{key}: expected a list of arguments, got {args!r}")
    if dist == "choice":
        if not args:
            raise SpecError(f"{key}: expected at least one value to choose from, got []")
        return SearchParam(path, dist, tuple(args))
    names = DISTRIBUTIONS[dist]
    if len(args) != len(names):
        raise SpecError(
            f"{key}: expected {len(names)} arguments [{', '.join(names)}], got {len(args)}: {args!r}"
        )
    ints = dist in INT_DISTS
    for name, v in zip(names, args, strict=True):
        numeric = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not numeric or (ints and not float(v).is_integer()):
            kind = "an int" if ints else "a finite number"
            raise SpecError(f"{key}: {name} must be {kind}, got {v!r}")
    args = [int(v) for v in args] if ints else args
    if dist in NORMAL_DISTS:
        if args[1] <= 0:
            raise SpecError(f"{key}: sd must be > 0, got {args[1]!r}")
    elif args[0] >= args[1]:
        raise SpecError(f"{key}: lo must be below hi, got [{args[0]!r}, {args[1]!r}]")
    elif dist in LOG_DISTS and args[0] <= 0:
        raise SpecError(f"{key}: lo must be > 0 for a log-scale distribution, got {args[0]!r}")
    if len(args) == len(DISTRIBUTIONS["quniform"]) and args[2] <= 0:
        raise SpecError(f"{key}: q must be > 0, got {args[2]!r}")
    param = SearchParam(path, dist, tuple(args))
    if dist in QUANTIZED_FLOAT_DISTS:
        for name, bound in zip(names[:2], args[:2], strict=True):
            _check_multiple(key, name, bound, args[2], dist in LOG_DISTS)
    elif dist in QUANTIZED_INT_DISTS:
        q, first, last = param.int_grid()
        if first > last:
            raise SpecError(
                f"{key}: no multiple of q {q} lies in [{args[0]}, {args[1]}], so there is nothing to draw; widen the bounds or use a smaller q"
            )
    return param


def _check_multiple(key: str, name: str, bound: float, q: float, log: bool) -> None:
    """A quantized float distribution's bound must be a multiple of q, as Ray Tune requires
    (rounding the draws keeps them inside the bounds only then)."""
    scaled = bound / q
    if math.isclose(scaled, round(scaled)):
        return
    near = [quantize(k * q, q) for k in (math.floor(scaled), math.ceil(scaled))]
    fits = " or ".join(f"{m!r}" for m in near if not (log and m <= 0))
    raise SpecError(
        f"{key}: {name} {bound!r} is not a multiple of q {q!r}, which Ray Tune refuses; use {fits}"
    )


def set_paths(spec: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of `spec` with each dotted path set to its value (missing mappings on the way
    are made)."""
    out = copy.deepcopy(spec)
    for path, value in values.items():
        *parents, leaf = path.split(".")
        node = out
        for depth, k in enumerate(parents):
            child = node.setdefault(k, {})
            if not isinstance(child, dict):
                where = ".".join(parents[: depth + 1])
                raise SpecError(
                    f"search.{path}: {where} is {child!r} in the spec, not a mapping to set {leaf} in"
                )
            node = child
        node[leaf] = copy.deepcopy(value)
    return out


def trial_spec(spec: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The spec one trial runs: `spec` without its search block, each searched path set to its
    value (missing mappings on the way are made), and one trial."""
    out = set_paths({k: v for k, v in spec.items() if k != "search"}, values)
    out.setdefault("meta", {})["max_trial"] = 1
    return out
