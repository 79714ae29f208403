"""Typed configs: every spec key declared once, with its type, default, meaning and limits.

A config is a frozen dataclass deriving from `Config`; each field is a spec key. The field's
annotation is the key's type (int, float, bool, str, `X | None`, `Literal[...]`, `list[...]`,
`dict[str, Any]`, `Any`, or another Config for a nested section) and `key(...)` gives its
default, its one-line meaning for the docs, and its limits. `parse(cls, section, path)` checks
a spec section against the declaration and returns the typed instance: unknown keys (with the
nearest valid one), types, limits, choices and required keys each fail with one line naming the
key path. The spec file stays plain JSON/YAML; components read the typed attributes.

Written here rather than with pydantic: specs accept ints for floats and integral floats (1e5)
for ints, unknown keys need "did you mean", keys of other components need a warning rather than
an error, and validation must stay cheap to import (`slm-lab check`, `--help`).
"""

import dataclasses
import difflib
import enum
import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field
from functools import cache
from typing import Any, ClassVar, Literal, TypeVar

from loguru import logger

C = TypeVar("C", bound="Config")


class Unset(enum.Enum):
    """The default of a key whose absence means something else than null: the component
    resolves it (e.g. env.clip_obs: 10 when normalizing observations, as SLM Lab v5; null: off).
    A spec cannot write it; the key's type lists it beside the types a spec can give."""

    UNSET = "unset"


UNSET = Unset.UNSET


class SpecError(ValueError):
    """A spec or CLI input the user must fix; the message is the whole story, on one line: a
    newline or other unprintable character that the input put in it (a key, a -s value) is
    written escaped, as in a Python string."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def one_line(text: str) -> str:
    """`text` with each unprintable character escaped ('\\n', '\\x00', '\\u2028')."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class TypeMismatch(SpecError):
    """A value of the wrong type (as opposed to one out of its limits)."""


def did_you_mean(word: str, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


@dataclass(frozen=True)
class KeyInfo:
    """What a config field declares beside its type."""

    doc: str
    required: bool = False
    gt: float | None = None
    ge: float | None = None
    le: float | None = None


def key(
    default: Any = None,
    doc: str = "",
    *,
    required: bool = False,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> Any:
    """A config field: its default (a list or dict default is copied per instance), its meaning
    and its limits (gt/ge/le for numbers). A required key has no default."""
    info = {"key": KeyInfo(doc, required, gt, ge, le)}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=info)
    return field(default=default, metadata=info)


@dataclass(frozen=True)
class Config:
    """Base of every typed config (see the module docstring)."""

    # keys SLM Lab v5 spec files carry that this section never reads: key -> its likely meaning
    # (or None); they are accepted with a warning
    DEPRECATED: ClassVar[dict[str, str | None]] = {}
    # the field that collects keys the config does not declare (e.g. an env's own arguments);
    # None: an undeclared key is an error
    EXTRA: ClassVar[str | None] = None
    # inherited keys this config does not read (a subclass that replaces a parent's key)
    UNREAD: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field]:
        return {
            f.name: f
            for f in dataclasses.fields(cls)
            if f.name != cls.EXTRA and f.name not in cls.UNREAD
        }

    def check(self, path: str) -> None:
        """Checks across keys of this section, after each key passed its own (SpecError)."""


def info(f: dataclasses.Field) -> KeyInfo:
    return f.metadata.get("key", KeyInfo(""))


@cache
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def parse(
    cls: type[C],
    section: Any,
    path: str,
    others: dict[str, str] | None = None,
    prepare: Callable[[str, Any], Any] | None = None,
) -> C:
    """The typed instance of `cls` for a spec section; SpecError on the first problem.

    `others` maps keys that other configs of the same section declare to the one-line reason
    this one ignores them (warned about, then ignored); every other undeclared key is an error.
    """
    if not isinstance(section, dict):
        raise SpecError(f"{path}: expected a mapping, got {section!r}")
    declared = cls.keys()
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value in section.items():
        full = f"{path}.{name}" if path else str(name)
        if name in declared:
            if value is None and not nullable(hints(cls)[name]):
                continue  # null stands for the default, as SLM Lab v5 specs write it
            values[name] = check_value(value, hints(cls)[name], declared[name], full)
        elif name in cls.DEPRECATED:
            meaning = cls.DEPRECATED[name]
            logger.warning(
                f"{full}: ignored (SLM Lab v5 never read it)"
                + (f"; its likely meaning is {meaning}" if meaning else "")
            )
        elif others and name in others:
            logger.warning(f"{full}: ignored ({others[name]})")
        elif cls.EXTRA is not None:
            extra[name] = value
        else:
            raise SpecError(f"{full}: unknown key{did_you_mean(str(name), declared)}")
    for name, f in declared.items():
        if info(f).required and values.get(name) is None:
            full = f"{path}.{name}" if path else name
            raise SpecError(f"{full}: required ({type_name(hints(cls)[name])}), missing")
    if cls.EXTRA is not None:
        values[cls.EXTRA] = extra
    config = cls(**values)
    config.check(path)
    return config


def nullable(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(tp)


def check_value(value: Any, tp: Any, f: dataclasses.Field | None, path: str) -> Any:
    """`value` checked against type `tp` (and the field's limits); returns it converted
    (an integral float for an int, an int for a float, a nested Config instance)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a not in (type(None), Unset)]
        if len(options) == 1:  # X | None: X's own message (a choice's "did you mean" with it)
            return check_value(value, options[0], f, path)
        for option in options:
            try:
                return check_value(value, option, f, path)
            except TypeMismatch:
                continue
        raise TypeMismatch(f"{path}: expected {type_name(tp)}, got {value!r}")
    if isinstance(tp, type) and issubclass(tp, Config):
        if not isinstance(value, dict):
            raise TypeMismatch(f"{path}: expected a mapping, got {value!r}")
        try:
            return parse(tp, value, path)
        except TypeMismatch as e:  # a key inside the mapping: its own message stands
            raise SpecError(str(e)) from None
    if origin is Literal:
        if value not in args:
            options = ", ".join(str(a) for a in args)
            hint = did_you_mean(str(value), [str(a) for a in args])
            raise TypeMismatch(f"{path}: {value!r} is not one of {options}{hint}")
        return value
    if tp is Any:
        return value
    converted = _convert(value, origin or tp, path, tp)
    if origin is list and args and args[0] is not Any:
        converted = [check_value(v, args[0], None, f"{path}[{i}]") for i, v in enumerate(value)]
    if f is not None and isinstance(converted, int | float) and not isinstance(converted, bool):
        _check_limits(converted, info(f), path)
    return converted


def _convert(value: Any, kind: Any, path: str, tp: Any) -> Any:
    bad = TypeMismatch(f"{path}: expected {type_name(tp)}, got {value!r}")
    if kind is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise bad
        return int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        return float(value)
    if kind in (str, list, dict):
        if not isinstance(value, kind):
            raise bad
        return value
    raise TypeError(f"{path}: a config field of type {tp} is not supported")  # a declaration bug


def _check_limits(value: float, k: KeyInfo, path: str) -> None:
    lo, hi = (k.gt, "(") if k.gt is not None else (k.ge, "["), k.le
    if lo[0] is not None and hi is not None:  # an interval: say it whole
        if not ((value > lo[0]) if lo[1] == "(" else (value >= lo[0])) or value > hi:
            raise SpecError(
                f"{path}: must be in {lo[1]}{_num(lo[0])}, {_num(hi)}], got {_num(value)}"
            )
        return
    for bound, ok, word in (
        (k.gt, lambda b: value > b, ">"),
        (k.ge, lambda b: value >= b, ">="),
        (k.le, lambda b: value <= b, "<="),
    ):
        if bound is not None and not ok(bound):
            raise SpecError(f"{path}: must be {word} {_num(bound)}, got {_num(value)}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


def type_name(tp: Any) -> str:
    """How a type reads in messages and docs: int, float, str or null, one of a, b, ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a not in (type(None), Unset)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is list:
        return f"list of {type_name(args[0])}" if args and args[0] is not Any else "list"
    if origin is dict:
        return "mapping"
    if isinstance(tp, type) and issubclass(tp, Config):
        return "mapping"
    if tp is Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


def default_text(f: dataclasses.Field) -> str:
    """A field's default as the docs show it."""
    if info(f).required:
        return "required"
    if f.default_factory is not MISSING:
        return repr(f.default_factory())
    if f.default is UNSET:
        return "not set"
    return "null" if f.default is None else repr(f.default)
