"""The CLI on bad input: one `error: ...` line on stderr, a non-zero exit, no traceback, no run folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BAD_INPUTS, SPEC_NAME, bad_input, invoke, make_spec, write_spec_file
from typer.testing import Result

from slm_lab.lib import util

SLM_LAB = str(Path(sys.executable).parent / "slm-lab")  # the installed console script


def set_args(sets: list[str]) -> list[str]:
    return [arg for s in sets for arg in ("-s", s)]


def assert_clean_error(result: Result, fragment: str, cwd: Path) -> None:
    assert result.exit_code not in (0, None), result.stdout
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert not (cwd / "data").exists()


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_run_bad_input(case: str, in_tmp: Path) -> None:
    spec_file, spec_name, sets, fragment = bad_input(case, in_tmp)
    assert_clean_error(
        invoke(["run", spec_file, spec_name, "dev", *set_args(sets)]), fragment, in_tmp
    )


# a spec with ${vars} left is a template to `check` (see test_check.py), an error to `run`
@pytest.mark.parametrize("case", [c for c in BAD_INPUTS if c != "unresolved_var"])
def test_check_bad_input(case: str, in_tmp: Path) -> None:
    spec_file, spec_name, sets, fragment = bad_input(case, in_tmp)
    assert_clean_error(invoke(["check", spec_file, spec_name, *set_args(sets)]), fragment, in_tmp)


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("trian", "mode 'trian': unknown; one of dev, train, search"),
        ("trian", "did you mean train?"),
        ("enjoy", "mode 'enjoy' needs the run to replay: enjoy@<run folder> or enjoy@latest"),
        ("dev@somewhere", "mode 'dev@somewhere': unknown"),
        ("enjoy@/nonexistent", "/nonexistent: not a run folder"),
        ("train@/nonexistent", "/nonexistent: not a run folder"),
    ],
)
def test_run_bad_mode(mode: str, fragment: str, in_tmp: Path) -> None:
    spec_file = write_spec_file(in_tmp / "good.json", {SPEC_NAME: make_spec("ppo")})
    assert_clean_error(invoke(["run", str(spec_file), SPEC_NAME, mode]), fragment, in_tmp)


def test_run_at_a_folder_that_is_not_a_run(in_tmp: Path) -> None:
    spec_file = write_spec_file(in_tmp / "good.json", {SPEC_NAME: make_spec("ppo")})
    not_run = in_tmp / "not_a_run"
    (not_run / "info").mkdir(parents=True)  # an info/ folder but no <name>_spec.json record
    for mode in (f"train@{not_run}", f"enjoy@{not_run}"):
        assert_clean_error(
            invoke(["run", str(spec_file), SPEC_NAME, mode]), f"{not_run}: not a run folder", in_tmp
        )


def test_train_at_latest_without_any_run(in_tmp: Path) -> None:
    spec_file = write_spec_file(in_tmp / "good.json", {SPEC_NAME: make_spec("ppo")})
    assert_clean_error(
        invoke(["run", str(spec_file), SPEC_NAME, "train@latest"]),
        f"train@latest: no run of {SPEC_NAME} in data/",
        in_tmp,
    )


def test_check_validates_every_spec_in_a_file(in_tmp: Path) -> None:
    bad = make_spec("a2c_gae")
    bad["agent"]["algorithm"]["lamm"] = 0.9
    path = write_spec_file(
        in_tmp / "many.json",
        {"a": make_spec("ppo"), "b": bad, "c": make_spec("random", "Pendulum-v1")},
    )
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    assert result.stdout.splitlines() == ["ok: a", "ok: c"]
    assert result.stderr.splitlines() == [
        "error: b: agent.algorithm.lamm: unknown key; did you mean lam?"
    ]
    good = write_spec_file(
        in_tmp / "good.json", {"a": make_spec("ppo"), "c": make_spec("reinforce", "Pendulum-v1")}
    )
    result = invoke(["check", str(good)])
    assert (result.exit_code, result.stdout.splitlines(), result.stderr) == (
        0,
        ["ok: a", "ok: c"],
        "",
    )
    assert not (in_tmp / "data").exists()


def test_check_substitutes_vars(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["env"]["name"] = "${env}"
    path = write_spec_file(in_tmp / "vars.json", {SPEC_NAME: spec})
    assert invoke(["check", str(path), "-s", "env=Acrobot-v1"]).stdout == f"ok: {SPEC_NAME}\n"


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("case", "command"),
    [("unknown_key", "run"), ("invalid_yaml", "check")],
)
def test_console_script_bad_input(case: str, command: str, tmp_path: Path) -> None:
    """The installed `slm-lab` script, in a fresh process: same single line, no traceback."""
    spec_file, spec_name, sets, fragment = bad_input(case, tmp_path)
    args = [
        SLM_LAB,
        command,
        spec_file,
        spec_name,
        *(["dev"] if command == "run" else []),
        *set_args(sets),
    ]
    proc = subprocess.run(
        args,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("error: ")
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "data").exists()


def test_run_without_the_full_install_says_how_to_get_it(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The light core has no torch nor Gymnasium: every mode of `run` is refused in one line."""
    monkeypatch.setattr(util, "FULL_INSTALL_MODULES", ("torch", "no_such_module"))
    for args in ([], ["demo.json", "demo", "train"], ["enjoy@latest"]):
        result = invoke(["run", *args])
        assert_clean_error(result, "slm-lab run needs the full install", in_tmp)
        assert result.exit_code == 1
        assert result.stderr.endswith(
            "(torch, Gymnasium...): run uv sync in the repository root, not in light/\n"
        )


@pytest.mark.subprocess
def test_the_light_commands_import_no_torch_nor_gymnasium() -> None:
    """The modules of plot, plot-list, retro, check, push, pull, list and run-remote (the light
    core's commands) import none of the full install's packages: a fresh process loads them."""
    code = (
        "import sys\n"
        "import slm_lab.cli.main, slm_lab.cli.remote, slm_lab.experiment.plot\n"
        "import slm_lab.experiment.record, slm_lab.experiment.retro, slm_lab.lib.hub\n"
        "import slm_lab.spec.spec_util\n"
        "heavy = ('torch', 'gymnasium', 'ray', 'optuna', 'ale_py', 'torcharc', 'cv2', 'imageio')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
