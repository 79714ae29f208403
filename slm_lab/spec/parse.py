"""Spec files: find and read them (JSON/YAML), substitute ${vars}, set the spec paths -s names.

Every mistake in a file or an -s value raises SpecError with one line: the key path, the bad
value, and where it helps, the nearest valid key ("did you mean ...").
"""

import json
import re
from pathlib import Path
from typing import Any

import yaml

from slm_lab import SPEC_DIR
from slm_lab.agent.net.config import ROLE_PREFIXES
from slm_lab.lib.config import SpecError, did_you_mean

NET_SECTIONS = ("agent.net", "agent.critic_net")
VAR_PATTERN = re.compile(r"\$\{([^}]*)\}")

# levels of mappings and lists a spec may nest: far past any real one, and well inside Python's
# recursion limit, which validation's walks and copies of the spec would hit first
MAX_NESTING = 100

# a ${var} not inside a quoted string: quoted for parsing a template (check of an unfilled spec)
BARE_VAR_PATTERN = re.compile(r"(?<![\"'\w$])\$\{([^}]*)\}(?![\"'\w])")


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads `1e6` and `3e-4` as floats (YAML 1.2); PyYAML's YAML 1.1 needs a dot."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


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


def spec_from_file(
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
                    raise SpecError(f"-s {path}={text}: {roles_hint(keys, roles)}")
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


def roles_hint(keys: list[str], roles: list[str]) -> str:
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


def fill_template(node: Any, key: str = "") -> Any:
    """Placeholders replaced for validation: a numeric stand-in, except in keys that take a
    string (names, types), which keep the placeholder text."""
    if isinstance(node, dict):
        return {k: fill_template(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [fill_template(v, key) for v in node]
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
