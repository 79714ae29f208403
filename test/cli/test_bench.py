"""The researcher's bench through the CLI: -s overrides and shortcut options, resuming (dev runs,
finished runs, extending), the small conveniences, and Ctrl-C/SIGTERM that save and resume."""

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch
from conftest import (
    TWO_SESSIONS,
    ConsoleRun,
    assert_same_run_files,
    invoke,
    make_spec,
    progress_lines,
    progress_values,
    read_session_df,
    run_dirs,
    session_log,
    write_spec_file,
)

from slm_lab import ROOT_DIR

SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
UV = os.environ.get("UV", "uv")  # the uv that runs the tests (uv run sets UV)
NAME = "ppo_bench"
DQN_CARTPOLE = ROOT_DIR / "slm_lab" / "spec" / "benchmark" / "dqn" / "dqn_cartpole.json"


def spec_file(directory: Path, **changes: object) -> Path:
    spec = make_spec("ppo", max_frame=400)
    spec["env"].update(changes)
    return write_spec_file(directory / "bench.json", {NAME: spec})


def record(run_dir: Path) -> dict:
    [path] = [p for p in run_dir.glob("*_spec.json") if "_t0" not in p.name]
    return json.loads(path.read_text())


# -- overrides ---------------------------------------------------------------------------------
@pytest.mark.cli
def test_set_overrides_any_spec_path_and_is_recorded(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    result = invoke(
        [
            "run",
            str(path),
            NAME,
            "dev",
            "-s",
            "env.max_frame=200",
            "-s",
            "agent.algorithm.gamma=0.9",
        ]
    )
    assert result.exit_code == 0, result.stderr
    assert "trial_metrics: frame:2.00e+02" in result.stdout
    [run_dir] = run_dirs(in_tmp / "data")
    assert run_dir.name.startswith(f"{NAME}_2")  # no suffix: the env did not change
    rec = record(run_dir)
    assert rec["env"]["max_frame"] == 200 and rec["agent"]["algorithm"]["gamma"] == 0.9
    assert rec["run_info"]["overrides"] == {"env.max_frame": 200, "agent.algorithm.gamma": 0.9}
    assert rec["run_info"]["vars"] == {}


@pytest.mark.cli
def test_set_env_name_changes_the_env_and_the_run_name(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    result = invoke(["run", str(path), NAME, "dev", "-s", "env.name=Acrobot-v1"])
    assert result.exit_code == 0, result.stderr
    [run_dir] = run_dirs(in_tmp / "data")
    assert run_dir.name.startswith(f"{NAME}_acrobot_")
    assert record(run_dir)["env"]["name"] == "Acrobot-v1"


@pytest.mark.parametrize(
    ("sets", "line"),
    [
        (
            ["max_frame=2e4"],
            "-s max_frame=2e4: the spec has no ${max_frame} and 'max_frame' is not a spec path; did you mean env.max_frame?",
        ),
        (
            ["env=Acrobot-v1"],
            "-s env=Acrobot-v1: the spec has no ${env} and 'env' is not a spec path; did you mean env.name?",
        ),
        (
            ["agent.net.lr_scheduler_spec.frame=100"],
            "-s agent.net.lr_scheduler_spec.frame=100: agent.net.lr_scheduler_spec is not a mapping in the spec; set it whole, e.g. -s agent.net.lr_scheduler_spec={...}",
        ),
        (["env.max_frame=-5"], "env.max_frame: must be > 0, got -5"),
    ],
)
def test_bad_set_is_one_line(sets: list[str], line: str, in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    args = [a for s in sets for a in ("-s", s)]
    result = invoke(["run", str(path), NAME, "dev", *args])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {line}"]
    assert not (in_tmp / "data").exists()


def test_set_a_whole_mapping(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    result = invoke(["check", str(path), "-s", "agent.net.lr_scheduler_spec={name: LinearToZero}"])
    assert (result.exit_code, result.stdout) == (0, f"ok: {NAME}\n")


@pytest.mark.cli
def test_shortcut_options(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    out = in_tmp / "elsewhere"
    args = ["run", str(path), NAME, "train", "--max-frame", "200", "--sessions", "1"]
    result = invoke([*args, "--seed", "7", "--data-dir", str(out)])
    assert result.exit_code == 0, result.stderr
    [run_dir] = run_dirs(out)
    rec = record(run_dir)
    assert (rec["env"]["max_frame"], rec["meta"]["max_session"], rec["meta"]["random_seed"]) == (
        200,
        1,
        7,
    )
    assert not (in_tmp / "data").exists()


def test_a_schedule_shorter_than_the_run_is_warned_about(in_tmp: Path) -> None:
    spec = make_spec("ppo", max_frame=400)
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 200}
    path = write_spec_file(in_tmp / "s.json", {NAME: spec})
    result = invoke(["check", str(path)])
    assert result.exit_code == 0 and result.stdout == f"ok: {NAME}\n"
    assert result.stderr.strip().endswith(
        "agent.net.lr_scheduler_spec.frame: the lr stops falling at frame 200, before env.max_frame 400: the rest of the run trains at its floor; drop frame to follow max_frame"
    )


@pytest.mark.cli
def test_absolute_schedules_that_do_not_fit_the_run_are_warned_about(in_tmp: Path) -> None:
    """v5-style absolute frames keep working as written; one warning names each schedule that
    ends after max_frame (or, for LR, entropy and clip, before it) and both frames."""
    [spec] = json.loads(DQN_CARTPOLE.read_text()).values()
    spec["env"]["max_frame"] = 400
    explore = spec["agent"]["algorithm"]["explore_var_spec"]
    del explore["end_frac"]
    explore["end_step"] = 800  # as SLM Lab v5 writes it
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 1000}
    path = write_spec_file(in_tmp / "s.json", {NAME: spec})
    result = invoke(["check", str(path)])
    assert result.exit_code == 0 and result.stdout == f"ok: {NAME}\n"
    warnings = [
        line.split(" | ", 1)[-1] for line in result.stderr.splitlines() if "WARNING" in line
    ]
    assert warnings[-1].startswith("env.max_frame: 400 ends before the first update")
    assert warnings[:-1] == [
        "agent.net.lr_scheduler_spec.frame: the lr falls until frame 1000, after env.max_frame 400: the run ends before it reaches its floor; drop frame to follow max_frame",
        "agent.algorithm.explore_var_spec.end_step: 800 is after env.max_frame 400: the run ends at 0.51, not 0.02; give end_frac (a fraction of max_frame) instead to follow the run",
    ]
    fitted = invoke(["check", str(path), "-s", "env.max_frame=1000"])
    assert "after env.max_frame" not in fitted.stderr
    assert "explore_var_spec" not in fitted.stderr  # ends before max_frame: by design


@pytest.mark.cli
def test_a_schedule_given_as_a_fraction_and_set_by_hand(in_tmp: Path) -> None:
    """A v5-style end_step on a shipped spec: one line says to clear end_frac; a start after
    the end (end_frac of a short run) is warned about."""
    explore = "agent.algorithm.explore_var_spec"
    args = ["check", str(DQN_CARTPOLE), "dqn_cartpole"]
    both = invoke([*args, "-s", f"{explore}.end_step=5000"])
    assert (both.exit_code, both.stderr.splitlines()) == (
        2,
        [
            f"error: dqn_cartpole: {explore}.end_frac: set end_step (an absolute frame) or end_frac (a fraction of env.max_frame), not both; to give end_step, also set {explore}.end_frac=null"
        ],
    )
    absolute = invoke([*args, "-s", f"{explore}.end_step=5000", "-s", f"{explore}.end_frac=null"])
    assert absolute.exit_code == 0 and "WARNING" not in absolute.stderr
    late_start = invoke([*args, "-s", f"{explore}.start_step=50000"])
    assert late_start.exit_code == 0
    assert late_start.stderr.strip().endswith(
        f"{explore}: it ends at frame 20000 (of env.max_frame 200000), not after its start_step 50000: it jumps from 1.0 to 0.02 there"
    )


@pytest.mark.cli
def test_a_template_without_its_max_frame_is_not_warned_about_its_schedules(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["env"]["max_frame"] = "${max_frame}"
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 100000}
    path = write_spec_file(in_tmp / "tpl.json", {"tpl": spec})
    unfilled = invoke(["check", str(path)])
    assert unfilled.exit_code == 0 and "WARNING" not in unfilled.stderr, unfilled.stderr
    filled = invoke(["check", str(path), "-s", "max_frame=5e4"])
    assert "after env.max_frame 50000" in filled.stderr


@pytest.mark.cli
def test_a_shipped_schedule_follows_max_frame(in_tmp: Path) -> None:
    """dqn_cartpole explores over its first tenth: at --max-frame 800 that is 80 frames."""
    args = ["run", str(DQN_CARTPOLE), "dqn_cartpole", "dev", "--max-frame", "800"]
    result = invoke([*args, "-s", "meta.log_frequency=400", "-s", "meta.eval_frequency=800"])
    assert result.exit_code == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert all("before the first update" in line for line in warnings), warnings
    [run_dir] = run_dirs(in_tmp / "data")
    assert read_session_df(run_dir)["explore_var"].tolist() == [0.02, 0.02]


@pytest.mark.cli
def test_an_extended_run_warns_of_an_absolute_schedule_and_one_given_as_a_fraction_follows(
    in_tmp: Path,
) -> None:
    spec = make_spec("ppo", max_frame=400)
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": 400}
    spec["agent"]["algorithm"]["entropy_coef_spec"] = {
        "name": "linear_decay",
        "start_val": 0.01,
        "end_val": 0.0,
        "end_frac": 1.0,
    }
    path = write_spec_file(in_tmp / "s.json", {NAME: spec})
    first = invoke(["run", str(path), NAME, "dev"])
    assert first.exit_code == 0 and "WARNING" not in first.stderr, first.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    extended = invoke(["run", f"train@{run_dir}", "--max-frame", "800"])
    assert extended.exit_code == 0, extended.stderr[-3000:]
    warnings = [line for line in extended.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "agent.net.lr_scheduler_spec.frame: the lr stops falling at frame 400, before env.max_frame 800: the rest of the run trains at its floor; drop frame to follow max_frame"
    )
    rows = read_session_df(run_dir).set_index("frame")
    assert rows.loc[[600, 700, 800], "lr"].tolist() == [0, 0, 0]  # the extension at the floor
    # the entropy schedule stretched to 800 frames: 0.01 * (1 - 600/800) near frame 600
    assert 0.001 < rows.loc[600, "entropy_coef"] < 0.004


# -- resuming ----------------------------------------------------------------------------------
@pytest.mark.cli
def test_resume_of_a_finished_run_says_so_and_max_frame_extends_it(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    assert invoke(["run", str(path), NAME, "dev"]).exit_code == 0
    [run_dir] = run_dirs(in_tmp / "data")
    result = invoke(["run", str(path), NAME, f"train@{run_dir}"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {run_dir} is finished: it already has 400 frames; pass a --max-frame above 400 to train it further"
    ]
    result = invoke(["run", str(path), NAME, f"train@{run_dir}", "--max-frame", "600"])
    assert result.exit_code == 0, result.stderr
    assert "trial_metrics: frame:6.00e+02" in result.stdout
    assert read_session_df(run_dir)["frame"].tolist() == [100, 200, 300, 400, 500, 600]
    assert record(run_dir)["env"]["max_frame"] == 600
    assert len(list((run_dir / "info").glob("*_session_df.csv"))) == 1  # still the dev run's one


@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.parametrize("max_frame", ["400", "4e2", "300", "1"])
def test_a_finished_run_given_no_more_frames_says_how_many_it_has(
    max_frame: str, two_session_run: ConsoleRun
) -> None:
    """A --max-frame at or below the frames a finished run has is one line naming them; the
    run is left as it was."""
    run_dir = two_session_run.run_dir
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    result = invoke(["run", f"train@{run_dir}", "--max-frame", max_frame])
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: --max-frame {int(float(max_frame))}: {run_dir} already has 400 frames; pass a --max-frame above 400 to train it further\n",
    )
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()} == before


@pytest.mark.cli
def test_resume_elsewhere_says_which_spec_it_uses(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    assert invoke(["run", str(path), NAME, "dev", "--max-frame", "200"]).exit_code == 0
    [run_dir] = run_dirs(in_tmp / "data")
    other = write_spec_file(in_tmp / "other.json", {"other": make_spec("ppo")})
    result = invoke(["run", str(other), "other", f"train@{run_dir}", "--max-frame", "300"])
    assert result.exit_code == 0, result.stderr
    assert f"train@{run_dir} uses the spec recorded in {run_dir} ({NAME}), not" in result.stderr


@pytest.mark.cli
def test_resume_refuses_sets(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    assert invoke(["run", str(path), NAME, "dev", "--max-frame", "200"]).exit_code == 0
    [run_dir] = run_dirs(in_tmp / "data")
    result = invoke(["run", str(path), NAME, f"train@{run_dir}", "-s", "agent.algorithm.gamma=0.5"])
    assert result.exit_code == 2
    assert "-s, --sessions and --seed do not apply" in result.stderr


# -- conveniences ------------------------------------------------------------------------------
@pytest.mark.cli
def test_a_file_with_one_spec_needs_no_name_and_a_mode_can_follow_the_file(in_tmp: Path) -> None:
    path = spec_file(in_tmp)
    result = invoke(["run", str(path), "train", "--max-frame", "200", "--sessions", "1"])
    assert result.exit_code == 0, result.stderr
    assert record(run_dirs(in_tmp / "data")[0])["run_info"]["mode"] == "train"
    two = write_spec_file(in_tmp / "two.json", {"a": make_spec("ppo"), "b": make_spec("ppo")})
    result = invoke(["run", str(two)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {two} holds 2 specs (a, b); name the one to run: uv run slm-lab run {two} SPEC_NAME"
    ]


@pytest.mark.cli
@pytest.mark.subprocess
def test_enjoy_picks_a_session_and_latest(
    two_session_run: ConsoleRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, run_dir, _ = two_session_run
    monkeypatch.chdir(run_dir.parent.parent)  # enjoy@latest: the newest run in data/
    for mode, session in (("enjoy@latest", "1"), ("enjoy@latest", "0")):
        args = ["run", str(path), TWO_SESSIONS, mode, "--session", session, "--episodes", "2"]
        result = invoke(args)
        assert result.exit_code == 0, result.stderr
        assert f"_t0_s{session}_ckpt-" in result.stdout
    result = invoke(["run", str(path), TWO_SESSIONS, "enjoy@latest", "--episodes", "0"])
    assert (result.exit_code, result.stderr) == (2, "error: --episodes 0: must be >= 1\n")


def test_render_without_a_display_is_one_line(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
    result = invoke(["run", str(spec_file(in_tmp)), NAME, "dev", "--render"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --render needs a display")
    assert not (in_tmp / "data").exists()


@pytest.mark.cli
def test_a_mode_alone_runs_the_demo_and_a_run_folder_alone_continues_it(in_tmp: Path) -> None:
    """`run dev` is the demo in dev mode; `run train@<folder>` needs no spec file (the folder
    has the spec); `train@latest` does, to know which runs to look at."""
    result = invoke(["run", "dev", "--max-frame", "200"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    assert run_dir.name.startswith("ppo_cartpole_demo_")
    extended = invoke(["run", f"train@{run_dir}", "--max-frame", "400"])
    assert extended.exit_code == 0, extended.stderr[-3000:]
    assert read_session_df(run_dir)["frame"].iloc[-1] == 400
    shorter = invoke(["run", f"train@{run_dir}", "--max-frame", "300"])
    assert (shorter.exit_code, shorter.stderr) == (
        2,
        f"error: --max-frame 300: {run_dir} already has 400 frames; pass a --max-frame above 400 to train it further\n",
    )
    latest = invoke(["run", "train@latest"])
    assert latest.exit_code == 2
    assert latest.stderr.startswith("error: train@latest: name the spec whose newest run to take")
    missing = invoke(["run", f"enjoy@{run_dir}", "--session", "3"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith(f"error: {run_dir}: session 3 of trial 0 has no checkpoint")


CONSOLE_WIDTH = 100
ANSI_COLOUR = r"\x1b\[[0-9;]*m"  # a colour code: no width on the terminal


def run_in_terminal(args: list[str], cwd: Path, env: dict[str, str], columns: int) -> str:
    """What a command prints in a terminal `columns` wide (a pseudo-terminal), stdout and
    stderr together, as the terminal shows it (less its colours)."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=secondary, stderr=secondary)
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # every process holding the terminal has ended
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    assert proc.wait(timeout=STOP_TIMEOUT_S) == 0, out.decode()[-3000:]
    return re.sub(ANSI_COLOUR, "", out.decode().replace("\r\n", "\n"))


@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.parametrize("width_from", ["COLUMNS", "terminal"])
def test_progress_lines_fit_the_terminal(width_from: str, tmp_path: Path) -> None:
    """Sessions' lines interleave on one console: each session's progress line, printed from
    its own process, keeps within the terminal's width (COLUMNS, else the terminal's own),
    keeping frame and total_reward_ma; the session logs keep every column."""
    spec = make_spec("ppo", max_frame=400, max_session=2, random_seed=5)
    path = write_spec_file(tmp_path / "wide.json", {NAME: spec})
    args = [SLM_LAB, "run", str(path), NAME, "train"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["NO_COLOR"] = "1"
    if width_from == "COLUMNS":
        env["COLUMNS"] = str(CONSOLE_WIDTH)
        proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        console = proc.stderr
    else:
        console = run_in_terminal(args, tmp_path, env, CONSOLE_WIDTH)
    lines = progress_lines(console)
    assert len(lines) == 2 * 4, console
    assert max(len(line) for line in lines) <= CONSOLE_WIDTH, lines
    assert all({"frame", "total_reward_ma"} <= set(progress_values(line)) for line in lines)
    [run_dir] = run_dirs(tmp_path / "data")
    for session in (0, 1):
        full = progress_lines(session_log(run_dir, session))[-1]
        last = read_session_df(run_dir, session).iloc[-1]
        assert list(progress_values(full)) == [k for k, v in last.items() if pd.notna(v)]
        assert len(full) > CONSOLE_WIDTH


def test_version_and_short_help() -> None:
    assert invoke(["--version"]).stdout == "slm-lab 6.0.0\n"
    assert "Usage: " in invoke(["-h"]).stdout and "Usage: " in invoke(["run", "-h"]).stdout


def test_check_suggests_a_shipped_spec_file(in_tmp: Path) -> None:
    result = invoke(["check", "ppo_cartpole.json"])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("did you mean benchmark/ppo/ppo_cartpole.json?")


# -- Ctrl-C and SIGTERM ------------------------------------------------------------------------
STOP_SPEC = "ppo_stop"
STOP_FRAMES = 1500
STOP_TIMEOUT_S = 120


def stop_spec_file(directory: Path, sessions: int, frames: int) -> Path:
    spec = make_spec("ppo", max_frame=frames, max_session=sessions, random_seed=11)
    return write_spec_file(directory / "stop.json", {STOP_SPEC: spec})


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [SLM_LAB, *args, "--log-level", "WARNING"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        start_new_session=True,  # its own process group, as a terminal's job is
    )


def wait_for_rows(run_root: Path, sessions: int, rows: int) -> None:
    """Until every session has written `rows` checkpoint rows."""
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        csvs = list(run_root.glob("*/info/*_session_df.csv"))
        if len(csvs) == sessions and all(len(p.read_text().splitlines()) > rows for p in csvs):
            return
        time.sleep(0.1)
    raise TimeoutError("the run did not reach its checkpoints")


def saved_frame(run_dir: Path, session: int) -> int:
    """The frame of a session's latest saved state."""
    path = run_dir / "model" / f"{STOP_SPEC}_t0_s{session}_ckpt-latest_state.pt"
    return torch.load(path, weights_only=True)["clock"]["frame"]


def assert_saved_past_the_last_row(run_dir: Path, sessions: int) -> None:
    """Every session saved its state at or after the frame of its last metrics row."""
    for s in range(sessions):
        assert saved_frame(run_dir, s) >= read_session_df(run_dir, s)["frame"].iloc[-1]


def stop_line(err: str, run_dir: Path, frames: int) -> int:
    """The run's last stderr line says where it stopped and how to resume; the frame."""
    line = err.strip().splitlines()[-1]
    assert line.startswith("stopped at frame ") and line.endswith(
        f"every session saved; resume with: uv run slm-lab run train@{run_dir}"
    ), line
    frame = int(line.split()[3])
    assert 0 < frame < frames
    return frame


@pytest.mark.cli
@pytest.mark.subprocess
def test_ctrl_c_saves_and_resumes_to_the_rows_of_an_unbroken_run(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal's Ctrl-C reaches the job: the run saves where it is, says how to resume, and
    the resumed run ends with the same rows as one never stopped (one session: it runs in the
    CLI's own process)."""
    path = stop_spec_file(in_tmp, sessions=1, frames=STOP_FRAMES)
    stopped = start(["run", str(path), STOP_SPEC, "train", "--data-dir", "b"], in_tmp)
    wait_for_rows(in_tmp / "b", sessions=1, rows=3)
    os.killpg(stopped.pid, signal.SIGINT)
    _, err = stopped.communicate(timeout=STOP_TIMEOUT_S)
    assert stopped.returncode == 130, err
    [run_b] = run_dirs(in_tmp / "b")
    frame = stop_line(err, run_b.relative_to(in_tmp), STOP_FRAMES)
    assert saved_frame(run_b, 0) == frame  # saved where it stopped
    shorter = invoke(["run", f"train@{run_b}", "--max-frame", str(STOP_FRAMES - 100)])
    assert (shorter.exit_code, shorter.stderr) == (
        2,
        f"error: --max-frame {STOP_FRAMES - 100}: {run_b} runs to max_frame {STOP_FRAMES}; a run can be extended, not shortened\n",
    )
    resumed = invoke(["run", f"train@{run_b}"])  # the run folder has the spec
    assert resumed.exit_code == 0, resumed.stderr
    unbroken = invoke(["run", str(path), STOP_SPEC, "train", "--data-dir", "a"])
    assert unbroken.exit_code == 0, unbroken.stderr
    [run_a] = run_dirs(in_tmp / "a")
    assert len(read_session_df(run_a)) == STOP_FRAMES // 100
    # every file: the rows, the episodes (those that ended after the last row too), metrics,
    # graphs, the models
    assert_same_run_files(run_a, run_b)


@pytest.mark.cli
@pytest.mark.subprocess
def test_a_signal_to_the_process_group_through_uv_is_one_stop(tmp_path: Path) -> None:
    """`timeout`, schedulers and a terminal signal the whole process group, and uv passes the
    signal on to slm-lab once more a moment later: one stop. Every session saves, the resume
    line is the last one, and no process of the run is left behind."""
    frames = 100 * STOP_FRAMES
    path = stop_spec_file(tmp_path, sessions=2, frames=frames)
    run = subprocess.Popen(
        [UV, "run", "--project", str(ROOT_DIR), "slm-lab", "run", str(path), STOP_SPEC, "train"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        start_new_session=True,
    )
    wait_for_rows(tmp_path / "data", sessions=2, rows=3)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=STOP_TIMEOUT_S)
    assert run.returncode == 130, err[-3000:]
    [run_dir] = run_dirs(tmp_path / "data")
    stop_line(err, run_dir.relative_to(tmp_path), frames)
    assert_saved_past_the_last_row(run_dir, sessions=2)
    assert _running_in_group(run.pid) == []


def _running_in_group(pgid: int, wait_s: float = 10.0) -> list[str]:
    """The command lines of the processes of a process group still running after `wait_s`
    (the fork server ends a moment after the run's process)."""
    deadline = time.monotonic() + wait_s
    while (running := _group(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running


def _group(pgid: int) -> list[str]:
    """The command lines of the processes of a process group still running (not zombies, which
    only wait for their parent to read their exit code)."""
    running = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                running.append(" ".join(p.cmdline()))
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return running


@pytest.mark.cli
@pytest.mark.subprocess
def test_the_sessions_of_a_killed_run_save_and_end(tmp_path: Path) -> None:
    """SIGKILL of the run's process alone, which no handler sees: its fork server ends with it,
    and the sessions, told so by the kernel, save where they are and end."""
    frames = 100 * STOP_FRAMES
    path = stop_spec_file(tmp_path, sessions=2, frames=frames)
    run = start(["run", str(path), STOP_SPEC, "train"], tmp_path)
    wait_for_rows(tmp_path / "data", sessions=2, rows=3)
    os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=STOP_TIMEOUT_S)
    assert _running_in_group(run.pid, wait_s=STOP_TIMEOUT_S) == []
    [run_dir] = run_dirs(tmp_path / "data")
    assert_saved_past_the_last_row(run_dir, sessions=2)


@pytest.mark.cli
@pytest.mark.subprocess
def test_sigterm_to_the_parent_reaches_its_sessions(tmp_path: Path) -> None:
    """`kill` of the trial's process alone: it passes the signal on to its two session
    processes, and each saves its full state at the frame it stopped at."""
    frames = 100 * STOP_FRAMES  # far more than runs before the signal
    path = stop_spec_file(tmp_path, sessions=2, frames=frames)
    stopped = start(["run", str(path), STOP_SPEC, "train"], tmp_path)
    wait_for_rows(tmp_path / "data", sessions=2, rows=3)
    os.kill(stopped.pid, signal.SIGTERM)
    _, err = stopped.communicate(timeout=STOP_TIMEOUT_S)
    assert stopped.returncode == 143, err
    [run_dir] = run_dirs(tmp_path / "data")
    stop_line(err, run_dir.relative_to(tmp_path), frames)
    assert_saved_past_the_last_row(run_dir, sessions=2)
    for s in (0, 1):
        assert not (run_dir / "info" / f"{STOP_SPEC}_t0_s{s}_session_metrics.json").exists()


@pytest.mark.cli
def test_normal_tanh_trains_ppo_and_is_refused_where_it_does_not_apply(in_tmp: Path) -> None:
    spec = make_spec("ppo", env="Pendulum-v1", max_frame=400)
    spec["agent"]["algorithm"]["action_pdtype"] = "NormalTanh"
    path = write_spec_file(in_tmp / "s.json", {NAME: spec})
    result = invoke(["run", str(path), NAME, "dev"])
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(in_tmp / "data")
    rows = read_session_df(run_dir)
    assert rows["frame"].iloc[-1] == 400 and rows["loss"].notna().all()
    sac = invoke(
        ["check", str(ROOT_DIR / "slm_lab/spec/benchmark/sac/sac_pendulum.json")]
        + ["-s", "agent.algorithm.action_pdtype=NormalTanh"]
    )
    assert (sac.exit_code, sac.stderr.splitlines()) == (
        2,
        [
            "error: sac_pendulum: agent.algorithm.action_pdtype: NormalTanh is for the policy-gradient algorithms (Reinforce, ActorCritic, PPO, SIL); SoftActorCritic has its own action distribution"
        ],
    )
