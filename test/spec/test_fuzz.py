"""Spec input, fuzzed: mutants of the shipped specs (keys dropped, wrong types, numbers out of
range, NaN and infinities, unicode, huge lists, deep nesting, broken files, wrong -s paths)
through the CLI as a user types it. `check` accepts a mutant or refuses it with one `error:`
line (exit 2, no traceback, no folder made); a mutant `check` accepts goes on to `run ... dev`
(a few frames), which trains it or refuses it the same way (or its dev checks stop it, one
line, when its numbers turn non-finite).

The budget is fixed and the examples derandomized, so the fast tier always tries the same
ones; SLM_FUZZ_EXAMPLES=N tries N (e.g. 2000, a long run to find new failures). The failures
found are pinned by the plain tests at the end of this file.
"""

import copy
import json
import math
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import invoke, make_spec, set_path, write_spec_file
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from typer.testing import Result

from slm_lab import SPEC_DIR
from slm_lab.agent.net.config import (
    FLAG_OPTIM_ARGS,
    NONNEGATIVE_OPTIM_ARGS,
    OptimSpec,
    torch_names,
)
from slm_lab.lib import util
from slm_lab.lib.config import SpecError

EXAMPLES = int(os.environ.get("SLM_FUZZ_EXAMPLES", "40"))
RUN_FRAMES = 64  # the frames a `run ... dev` of a mutant check accepted trains for
RUN_TEXT_LIMIT = 20_000  # bigger mutant files (a huge list) are checked, not run
SHIPPED = sorted(SPEC_DIR.glob("benchmark/**/*.json")) + sorted(SPEC_DIR.glob("demo*.json"))
SEEDS: list[tuple[str, str, dict[str, Any]]] = [
    (path.stem, name, spec)
    for path in SHIPPED
    for name, spec in json.loads(path.read_text()).items()
    if not name.startswith("_")
]
# a console line of the logger (its warnings may come before the error): time, level, message
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|SUCCESS|WARNING) ")
# what a dev run says when its training turns a number non-finite (a valid but absurd value, e.g.
# actor_init_std 1e298): a training outcome, which no check of the spec can foresee
DEV_CHECK = "FloatingPointError: dev check: non-finite"
DEEP = "@@deep@@"  # a value the file's text replaces with deeply nested brackets
# the changes at a key path, weighted: those that keep the spec valid more often come up more
OPS = ["drop"] * 3 + ["scale"] * 3 + ["replace"] * 2 + ["add_key", "huge_list", "deep", "nest"]

# -- values -----------------------------------------------------------------------------------
NAMES = ["PPO", "SAC", "Adam", "MLPNet", "ConvNet", "CartPole-v1", "ALE/Pong-v5", "linear_decay"]
SPECIAL_NUMBERS = [0, -1, 1, 0.5, -1e-9, 1e-300, 1e300, -1e300, 2**31, 2**63, 10**30, 1e20]
SPECIAL_NUMBERS += [math.nan, math.inf, -math.inf]
scalars = st.one_of(
    st.sampled_from(SPECIAL_NUMBERS),
    st.integers(-(2**70), 2**70),
    # no subnormals: a session flushes them to zero in this process (torch.set_flush_denormal)
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),  # unicode: any code point, lone surrogates too
    st.sampled_from(NAMES),
    st.sampled_from(["${env}", "${max_frame}", "${}", "$", "{}", "1e5", "nan", "inf", " "]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
# -s values, as text a user types (read as YAML)
set_texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["nan", ".nan", "inf", "-.inf", "1e400", "[1, 2", "{name: Adam}", "null", "~", "[]", "-1"]
    ),
    st.sampled_from(
        ["0", "1e9", "true", "CartPole-v1", "Pendulum-v1", "ALE/Pong-v5", "{a: {b: 1}}"]
    ),
    st.sampled_from([200, 5000]).map(lambda depth: "[" * depth + "]" * depth),
)


def node_paths(node: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every key path in a spec, its sections and its list items too."""
    if path:
        yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from node_paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from node_paths(v, (*path, i))


def parent_of(spec: dict[str, Any], path: tuple) -> Any:
    node: Any = spec
    for k in path[:-1]:
        node = node[k]
    return node


@dataclass
class Mutant:
    """A spec file's text and the command's arguments."""

    seed: str
    ops: list[str] = field(default_factory=list)
    text: bytes = b""
    suffix: str = ".json"
    name: str = ""
    sets: list[str] = field(default_factory=list)
    file_arg: str | None = None  # a spec file argument other than the written file


def mutate_spec(draw: Any, spec: dict[str, Any], ops: list[str]) -> None:
    """1 to 3 changes at key paths of the spec, in place."""
    for _ in range(draw(st.integers(1, 3))):
        paths = list(node_paths(spec))
        if not paths:
            return
        path = draw(st.sampled_from(paths))
        parent, leaf = parent_of(spec, path), path[-1]
        op = draw(st.sampled_from(OPS))
        ops.append(f"{op} {'.'.join(map(str, path))}")
        old = parent[leaf]
        if op == "drop":
            del parent[leaf]
        elif op == "replace":
            parent[leaf] = draw(values)
        elif op == "scale" and isinstance(old, int | float) and not isinstance(old, bool):
            factor = draw(st.sampled_from([-1, 0, 1e-9, 1e9, 1e300, math.nan, math.inf]))
            parent[leaf] = type(old)(old * factor) if math.isfinite(old * factor) else old * factor
        elif op == "scale":
            parent[leaf] = draw(st.sampled_from(SPECIAL_NUMBERS))
        elif op == "add_key":
            target = old if isinstance(old, dict) else parent
            if isinstance(target, dict):
                target[draw(st.text(min_size=1, max_size=8) | st.sampled_from(NAMES))] = draw(
                    values
                )
        elif op == "huge_list":
            parent[leaf] = [draw(scalars)] * draw(st.sampled_from([1000, 50_000]))
        elif op == "deep":
            parent[leaf] = DEEP
        elif op == "nest":  # the value inside a list or mapping of itself
            parent[leaf] = draw(st.sampled_from([[old], {"name": old}, [[old, old]]]))


def file_text(draw: Any, specs: dict[str, Any], suffix: str, ops: list[str]) -> bytes:
    """The spec file's bytes, sometimes broken as a file (truncated, not UTF-8, a BOM)."""
    if suffix == ".json":
        text = json.dumps(specs, indent=2)  # NaN and Infinity as Python's json writes them
    else:
        text = yaml.safe_dump(specs, allow_unicode=False)
    if DEEP in text:
        depth = draw(st.sampled_from([50, 600, 2000, 200_000]))
        nested = "[" * depth + "]" * depth
        text = text.replace(f'"{DEEP}"', nested).replace(f"'{DEEP}'", nested).replace(DEEP, nested)
    data = text.encode("utf-8", "surrogatepass")
    broken = draw(st.sampled_from(["none"] * 12 + ["truncate", "latin1", "bom", "empty", "nul"]))
    if broken != "none":
        ops.append(f"file {broken}")
    if broken == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif broken == "latin1":
        data = data.replace(b'"', b'"\xe9', 1)
    elif broken == "bom":
        data = b"\xef\xbb\xbf" + data
    elif broken == "empty":
        data = b""
    elif broken == "nul":
        data = data[: len(data) // 2] + b"\x00" + data[len(data) // 2 :]
    return data


@st.composite
def mutants(draw: Any) -> Mutant:
    file, name, spec = draw(st.sampled_from(SEEDS))
    m = Mutant(f"{file}:{name}")
    spec = copy.deepcopy(spec)
    if draw(st.integers(0, 9)):  # mostly; else only the command or the file is wrong
        mutate_spec(draw, spec, m.ops)
    m.suffix = draw(st.sampled_from([".json"] * 3 + [".yaml"]))
    m.text = file_text(draw, {name: spec}, m.suffix, m.ops)
    m.name = draw(st.sampled_from([name] * 8 + ["", "_" + name, name + "x", "ṗpo"]))
    paths = [".".join(map(str, p)) for p in node_paths(spec)]
    placeholders = sorted(set(re.findall(r"\$\{([^}]*)\}", json.dumps(spec))))
    for var in placeholders:  # a template's values, as a user gives them
        if draw(st.integers(0, 4)):
            pool = ["CartPole-v1", "Pendulum-v1", "Acrobot-v1"] if var == "env" else ["1e4"]
            m.sets.append(f"{var}={draw(st.sampled_from(pool) | set_texts)}")
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        key = draw(
            st.sampled_from(paths or ["env.name"])
            | st.sampled_from(paths or ["env.name"]).map(lambda p: p + ".x")
            | st.text(max_size=10)
            | st.sampled_from(["max_frame", "agent..net", ".env", "env.", "meta.random_seed"])
        )
        sep = draw(st.sampled_from(["="] * 6 + ["", "=="]))
        m.sets.append(f"{key}{sep}{draw(set_texts)}")
    m.ops += [f"-s {s}" for s in m.sets[len(placeholders) :]]
    wrong_file = draw(st.sampled_from([None] * 10 + ["missing", "dir", "unicode"]))
    if wrong_file is not None:
        m.ops.append(f"file argument {wrong_file}")
        m.file_arg = {"missing": "nope/none.json", "dir": ".", "unicode": "spéc✓.json"}[wrong_file]
    return m


# -- the property ------------------------------------------------------------------------------
@dataclass
class Tally:
    """What the fuzzer saw, printed at the end of the test (pytest -s shows it)."""

    examples: int = 0
    runs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)


def error_kind(line: str) -> str:
    """An error line less its values: the messages that differ only in a path or a number."""
    line = re.sub(r"(/[^\s:;,]+)+", "<path>", line)
    return re.sub(r"'[^']*'|-?\d[\d.e+-]*|nan|inf", "<v>", line)[:160]


def assert_clean(result: Result, what: str, tally: Tally, where: Path) -> None:
    """Exit 0, or exit 2 with one `error:` line (log lines aside) and no run folder; never a
    traceback."""
    out = result.stdout + result.stderr
    assert "Traceback" not in out, f"{what}: a traceback\n{out[-3000:]}"
    assert result.exit_code in (0, 2), (
        f"{what}: exit {result.exit_code} ({result.exception!r})\n{out[-3000:]}"
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{what}: {result.exception!r}"
    )
    tally.outcomes[f"{what.split()[0]} exit {result.exit_code}"] += 1
    if result.exit_code == 0:
        return
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    others = [line for line in lines if not line.startswith("error: ") and not LOG_LINE.match(line)]
    assert len(errors) == 1 and not others, f"{what}: not one error line\n{result.stderr[-3000:]}"
    tally.errors[error_kind(errors[0])] += 1
    assert not (where / "data").exists(), f"{what}: refused, yet made {where / 'data'}"


TALLY = Tally()


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    # no shrinking: a failure's message names the seed spec and its changes, and shrinking
    # a mutant that runs a session took minutes
    phases=(Phase.explicit, Phase.generate),
)
@given(m=mutants())
def test_mutated_specs_pass_or_fail_in_one_line(m: Mutant, in_tmp: Path) -> None:
    where = Path(tempfile.mkdtemp(dir=in_tmp))
    try:
        path = where / f"spec{m.suffix}"
        path.write_bytes(m.text)
        spec_file = str(where / m.file_arg) if m.file_arg else str(path)
        args = [spec_file, *([m.name] if m.name else [])]
        sets = [arg for s in m.sets for arg in ("-s", s)]
        what = f"check {m.seed} {m.ops}"
        TALLY.examples += 1
        checked = invoke(["check", *args, *sets])
        assert_clean(checked, what, TALLY, where)
        if checked.exit_code != 0 or len(m.text) > RUN_TEXT_LIMIT or not m.name:
            return
        TALLY.runs += 1
        data = where / "runs"
        ran = invoke(
            ["run", *args, "dev", "--max-frame", str(RUN_FRAMES), "--data-dir", str(data), *sets]
        )
        if ran.exit_code == 1 and DEV_CHECK in ran.stderr:  # trained, to non-finite numbers
            TALLY.outcomes["run exit 1 (dev check)"] += 1
            return
        assert_clean(ran, f"run {m.seed} {m.ops}", TALLY, where)
        if ran.exit_code == 2:
            assert not data.exists(), f"run {m.seed} {m.ops}: refused, yet made {data}"
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_fuzz_tally() -> None:
    """The fuzzer's counts (after the fuzz test, in the same process): it tried its budget and
    both stages saw their outcomes."""
    if not TALLY.examples:
        pytest.skip("the fuzz test did not run in this process")
    print(
        f"\nfuzz: {TALLY.examples} examples, {TALLY.runs} runs, {dict(TALLY.outcomes)}, "
        f"{len(TALLY.errors)} distinct errors"
    )
    for line, n in TALLY.errors.most_common():
        print(f"  {n:4d}  {line}")
    assert TALLY.examples >= EXAMPLES
    assert TALLY.outcomes["check exit 2"] and TALLY.outcomes["check exit 0"]


# -- what the fuzzer found, pinned -------------------------------------------------------------
def refused(in_tmp: Path, args: list[str]) -> str:
    """The one error line of a `check` (and of a `run ... dev`) of `args`; no folder made."""
    lines = []
    for command in (["check", *args], ["run", *args[:2], "dev", *args[2:]]):
        result = invoke(command)
        assert result.exit_code == 2, result.stdout + result.stderr
        assert isinstance(result.exception, SystemExit), repr(result.exception)
        assert "Traceback" not in result.stdout + result.stderr
        [line] = result.stderr.splitlines()
        lines.append(line.removeprefix("error: ").removeprefix(f"{args[1]}: "))
        assert not (in_tmp / "data").exists()
    assert lines[0] == lines[1]  # check and run refuse it alike
    return lines[0]


def test_yaml_with_a_nul_character_is_one_line(in_tmp: Path) -> None:
    path = in_tmp / "spec.yaml"
    text = yaml.safe_dump({"a": make_spec("ppo")}).replace("env:", "en\0v:")
    path.write_text(text)
    line = text[: text.index("\0")].count("\n") + 1
    assert refused(in_tmp, [str(path), "a"]) == (
        f"{path}: invalid YAML at line {line} column 5: character '\\x00' is not allowed"
    )


def test_a_file_that_is_not_utf8_is_one_line(in_tmp: Path) -> None:
    path = in_tmp / "spec.json"
    text = json.dumps({"a": make_spec("ppo")}, indent=2).encode()
    path.write_bytes(text.replace(b'"env"', b'"\xe9nv"'))
    line = text[: text.index(b'"env"')].count(b"\n") + 1
    assert refused(in_tmp, [str(path), "a"]) == (
        f"{path}: not UTF-8 text: byte 0xe9 at line {line}; save the file as UTF-8"
    )


def test_a_key_with_a_newline_is_shown_escaped(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["agent"]["net"]["hid\nlayers"] = [16]
    path = write_spec_file(in_tmp / "spec.json", {"a": spec})
    assert (
        refused(in_tmp, [str(path), "a"])
        == "agent.net.hid\\nlayers: unknown key; did you mean hid_layers?"
    )


def test_a_set_with_a_carriage_return_is_shown_escaped(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "spec.json", {"a": make_spec("ppo")})
    line = refused(in_tmp, [str(path), "a", "-s", "env.=\r1"])
    assert line.startswith("-s env.=\\r1: the spec has no ${env.} and 'env.' is not a spec path")


@pytest.mark.parametrize("depth", [600, 200_000])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_deep_nesting_in_a_file_is_one_line(depth: int, suffix: str, in_tmp: Path) -> None:
    path = in_tmp / f"spec{suffix}"
    nested = "[" * depth + "]" * depth
    path.write_text(
        json.dumps({"a": make_spec("ppo")}).replace('"max_t": null', f'"max_t": {nested}')
    )
    line = refused(in_tmp, [str(path), "a"])
    assert line.startswith(f"{path}: ") and line.endswith(
        "nests mappings and lists more than 100 levels deep"
    )


def test_deep_nesting_in_a_set_is_one_line(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "spec.json", {"a": make_spec("ppo")})
    for depth in (200, 5000):
        line = refused(in_tmp, [str(path), "a", "-s", f"env.max_t={'[' * depth}{']' * depth}"])
        assert line.startswith("-s env.max_t: ") and line.endswith("more than 100 levels deep")


@pytest.mark.parametrize(
    ("path", "value", "line"),
    [
        ("agent.algorithm.name", {"a": 1}, "agent.algorithm.name: expected str, got {'a': 1}"),
        ("agent.memory.name", ["Replay"], "agent.memory.name: expected str, got ['Replay']"),
    ],
)
def test_a_name_that_is_not_a_string_is_one_line(
    path: str, value: Any, line: str, in_tmp: Path
) -> None:
    spec = make_spec("ppo")
    set_path(spec, path, value)
    spec_file = write_spec_file(in_tmp / "spec.json", {"a": spec})
    assert refused(in_tmp, [str(spec_file), "a"]) == line


def test_gpu_true_without_a_gpu_is_refused_before_the_run(in_tmp: Path) -> None:
    if util.machine_gpus():
        pytest.skip("this machine has a GPU")
    spec = make_spec("ppo")
    spec["agent"]["net"]["gpu"] = True
    path = write_spec_file(in_tmp / "spec.json", {"a": spec})
    assert invoke(["check", str(path), "a"]).exit_code == 0  # the spec may be for another machine
    result = invoke(["run", str(path), "a", "dev"])
    assert (result.exit_code, result.stderr.splitlines()) == (
        2,
        [
            "error: agent.net.gpu: true needs a CUDA GPU and this machine has none; set it to auto (CUDA when there is one) or false"
        ],
    )
    assert not (in_tmp / "data").exists()


@pytest.mark.parametrize("gpu", ["banana", 2, [True], math.nan])
def test_gpu_other_than_auto_true_false_is_refused(gpu: Any, in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["agent"]["net"]["gpu"] = gpu
    path = write_spec_file(in_tmp / "spec.json", {"a": spec})
    assert refused(in_tmp, [str(path), "a"]) == (
        f"agent.net.gpu: expected auto, true or false, got {gpu!r}"
    )


OPTIM_VALUES = [-1.0, math.nan, math.inf, 0.0, 0.5, 2.0, 5e17, "x", [0.9], [0.9, 1.0], True, None]


@pytest.mark.parametrize(
    "name", ["Adam", "AdamW", "RMSprop", "SGD", "Adagrad", "Adadelta", "NAdam"]
)
def test_optimizer_arguments_torch_refuses_are_refused_by_check(name: str) -> None:
    """Each value of a common argument that torch's optimizer refuses when a session builds it
    (after the run folder is made), the spec's check refuses; NaN, infinity and booleans too."""
    sig = torch_names()["optimizers"][name]
    keys = [
        k
        for k in sig["optional"]
        if k in (*NONNEGATIVE_OPTIM_ARGS, *FLAG_OPTIM_ARGS, "rho", "betas")
    ]
    assert keys
    for key in keys:
        for value in OPTIM_VALUES:
            param = torch.zeros(2, requires_grad=True)
            try:
                optim = getattr(torch.optim, name)([param], **{key: value})
                param.grad = torch.ones(2)
                optim.step()
                torch_error = False
            except (ValueError, TypeError, RuntimeError, IndexError):
                torch_error = True
            try:
                OptimSpec(name, kwargs={key: value}).check("net.optim_spec")
                refused_here = False
            except SpecError:
                refused_here = True
            assert refused_here or not torch_error, f"{name} {key}={value!r}: torch refuses it"
            # stricter than torch on NaN, infinity, a bool for a number, a number for a flag
            stricter = (
                isinstance(value, bool)
                or value != value
                or value == math.inf
                or key in FLAG_OPTIM_ARGS
            )
            assert refused_here == torch_error or stricter, f"{name} {key}={value!r}"


def test_an_optimizer_argument_out_of_range_is_one_line(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["agent"]["net"]["critic_optim_spec"]["betas"] = [5e17, 0.999]
    path = write_spec_file(in_tmp / "spec.json", {"a": spec})
    assert refused(in_tmp, [str(path), "a"]) == (
        "agent.net.critic_optim_spec.betas: expected [beta1, beta2], each in [0, 1), got [5e+17, 0.999]"
    )
