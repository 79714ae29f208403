"""The CLI on bad input: one `error: ...` line on stderr, a non-zero exit, no traceback, no run folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BAD_INPUTS, SPEC_NAME, bad_input, invoke, make_spec, write_spec_file
from typer.testing import Result

from slm_lab import ROOT_DIR
from slm_lab.cli import main
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


@pytest.mark.subprocess
@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["no-such-command"], 2)])
def test_the_console_script_ends_with_its_code_after_the_exit_handlers(
    args: list[str], code: int, tmp_path: Path
) -> None:
    """`cli` ends the process without the interpreter's teardown: the exit code is the
    command's, the exit handlers ran (an atexit handler's line, and a buffered file it writes,
    reach their destinations), a non-daemon thread finished, and what the command printed came
    out."""
    out_file, thread_file = tmp_path / "handler.txt", tmp_path / "thread.txt"
    script = (
        "import atexit, sys, threading, time\n"
        "def late():\n"
        "    time.sleep(1.5)\n"
        f"    open({str(thread_file)!r}, 'w').write('thread done')\n"
        "def handler():\n"
        "    print('handler ran')\n"
        f"    f = open({str(out_file)!r}, 'w', buffering=1 << 20)\n"
        "    f.write('written at exit')\n"
        "    f.close()\n"
        "atexit.register(handler)\n"
        "from slm_lab.cli.main import cli\n"
        f"sys.argv = ['slm-lab', *{args!r}]\n"
        "threading.Thread(target=late).start()\n"
        "cli()\n"
        "print('not reached')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered streams
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.endswith("handler ran\n")
    assert "not reached" not in proc.stdout
    assert out_file.read_text() == "written at exit"
    assert thread_file.read_text() == "thread done"  # a non-daemon thread was joined
    if code == 0:
        assert proc.stdout.startswith("slm-lab ")
    else:
        assert "no-such-command" in proc.stderr or "No such command" in proc.stderr


# SLM Lab v5's README and benchmark pages leave `run` out: `uv run slm-lab SPEC_FILE SPEC_NAME MODE`
V5_LINES = [
    (
        "uv run slm-lab slm_lab/spec/benchmark/ppo/ppo_cartpole.json ppo_cartpole train",
        ("train", "ppo_cartpole", False),
    ),
    (
        "uv run slm-lab --render slm_lab/spec/benchmark/ppo/ppo_cartpole.json ppo_cartpole dev",
        ("dev", "ppo_cartpole", True),
    ),
    (
        "uv run slm-lab slm_lab/spec/demo.json ppo_cartpole_demo dev",
        ("dev", "ppo_cartpole_demo", False),
    ),
    (
        "uv run slm-lab slm_lab/spec/benchmark/ppo/ppo_cartpole_search.json ppo_cartpole_search search",
        ("search", "ppo_cartpole_search", False),
    ),
]


def v5_invoke(line: str) -> Result:
    """A v5 command line, less its `uv run slm-lab`, as the console script reads it."""
    args = line.split()
    assert args[:3] == ["uv", "run", "slm-lab"]
    return invoke(main.command_args(args[3:]))


@pytest.mark.parametrize(("line", "expected"), V5_LINES)
def test_v5_command_lines_run_without_the_word_run(
    line: str,
    expected: tuple[str, str, bool],
    in_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each v5 line reaches the run it names (the run itself stubbed: a real one is in
    test_uv_journeys), with --max-frame after it (above the search's grace_period)."""
    started: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(
        main, "_train", lambda spec, info, *a: started.append((info.mode, spec.name, a[3]))
    )
    monkeypatch.setattr(
        main, "_search", lambda spec, info, *a: started.append((info.mode, spec.name, False))
    )
    monkeypatch.setenv("DISPLAY", ":0")  # --render asks for one before the run starts
    monkeypatch.chdir(ROOT_DIR)  # v5's paths are from the repository root
    result = v5_invoke(f"{line} --max-frame 40000")
    assert result.exit_code == 0, result.stderr
    assert started == [expected]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["slm_lab/spec/demo.json", "ppo_cartpole_demo", "dev"],
            ["run", "slm_lab/spec/demo.json", "ppo_cartpole_demo", "dev"],
        ),
        (["--render", "demo.json"], ["run", "--render", "demo.json"]),
        (
            ["-s", "env.max_frame=1000", "demo.json"],
            ["run", "-s", "env.max_frame=1000", "demo.json"],
        ),
        (["train"], ["run", "train"]),
        (
            ["enjoy@data/ppo_cartpole_2025_06_01_120000"],
            ["run", "enjoy@data/ppo_cartpole_2025_06_01_120000"],
        ),
        (["run", "demo.json"], ["run", "demo.json"]),
        (["check", "demo.json"], ["check", "demo.json"]),
        (["plot-list"], ["plot-list"]),
        (["run-remote", "-h"], ["run-remote", "-h"]),
        (["--help"], ["--help"]),
        (["-h"], ["-h"]),
        (["--version"], ["--version"]),
        (["chek", "demo.json"], ["chek", "demo.json"]),  # a command's typo: Typer names `check`
        ([], []),
    ],
)
def test_command_args_puts_run_where_v5_leaves_it_out(args: list[str], expected: list[str]) -> None:
    assert main.command_args(args) == expected


def test_v5_render_line_without_a_display_is_a_run_error(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--render` first is read as run's option, not Typer's `No such option`."""
    for var in main.DISPLAY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    result = v5_invoke("uv run slm-lab --render demo.json ppo_cartpole_demo dev")
    assert_clean_error(result, "--render needs a display (DISPLAY is not set)", in_tmp)


def test_a_command_typo_is_still_no_such_command(in_tmp: Path) -> None:
    result = v5_invoke("uv run slm-lab chek demo.json")
    assert result.exit_code == 2
    assert "No such command 'chek'" in result.stderr


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [(0, "episode", "0 episodes"), (1, "episode", "1 episode"), (2, "thread", "2 threads")],
)
def test_counted_says_one_noun_in_the_singular(n: int, noun: str, text: str) -> None:
    assert util.counted(n, noun) == text


@pytest.mark.cli
def test_enjoy_says_its_folder_and_one_episode_in_the_singular(in_tmp: Path) -> None:
    spec_file = write_spec_file(in_tmp / "s.json", {SPEC_NAME: make_spec("ppo")})
    trained = invoke(["run", str(spec_file), SPEC_NAME, "dev"])
    assert trained.exit_code == 0, trained.stderr[-3000:]
    [run_dir] = list(Path("data").iterdir())
    result = invoke(["run", f"enjoy@{run_dir}", "--episodes", "1"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [enjoy_dir] = set(Path("data").iterdir()) - {run_dir}
    first, last = result.stdout.splitlines()
    assert first.startswith("enjoy: 1 episode | mean_return:")
    assert last == f"enjoy folder: {enjoy_dir}"
    assert (enjoy_dir / "enjoy_metrics.json").is_file()
