"""The rules of continuing a run (experiment/resume.py), on run folders made without training:
a finished session is its metrics file at max_frame, its resume state an empty state file."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load, make_spec

from slm_lab.experiment import record, resume
from slm_lab.experiment.layout import RunLayout
from slm_lab.lib import io
from slm_lab.spec.spec_util import SpecError

MAX_FRAME = 400


def new_run(search_dir: str | None = None) -> RunLayout:
    """A run folder of a one-session PPO spec in io.DATA_DIR, as `run` starts it (no session
    run yet); `search_dir`: a trial of that search."""
    spec = load({**make_spec("ppo", max_frame=MAX_FRAME), "name": "ppo_resume"})
    return record.new_run(
        spec, record.RunInfo("train", "spec.json", "ppo_resume", search_dir=search_dir)
    )


def finish(run: RunLayout, frames: int = MAX_FRAME, state: bool = True) -> None:
    """Session 0 of trial 0 finished at `frames`, with (or without) its resume state."""
    io.write_json({"frame": frames}, run.session_metrics(0, 0))
    if state:
        resume.state_files(run, range(1))[0].touch()


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(io, "DATA_DIR", tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def run(data: Path) -> RunLayout:
    return new_run()


@pytest.mark.parametrize(
    ("mode", "respecified", "max_frame", "line"),
    [
        ("train@R", True, None, "train@R continues the spec recorded in the run folder: -s, "),
        ("enjoy@R", False, 800.0, "enjoy@R continues the run as recorded: --max-frame does not"),
        ("search@R", False, 800.0, "search@R continues the run as recorded: --max-frame does not"),
    ],
)
def test_options_a_continued_run_does_not_take_are_refused(
    run: RunLayout, mode: str, respecified: bool, max_frame: float | None, line: str
) -> None:
    mode = mode.replace("@R", f"@{run.root}")
    with pytest.raises(SpecError) as e:
        resume.open_run(mode, None, None, respecified, max_frame)
    assert str(e.value).startswith(line.replace("@R", f"@{run.root}"))


def test_open_run_reads_the_recorded_spec_and_info(run: RunLayout) -> None:
    continued = resume.open_run(f"train@{run.root}", None, None, False, 800.0)
    assert continued.root == run.root
    assert continued.spec.name == "ppo_resume" and continued.spec.env.max_frame == MAX_FRAME
    assert continued.info.mode == "train" and continued.info.spec_name == "ppo_resume"


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=f"^{re.escape(str(tmp_path))}: not a run folder"):
        resume.find_run("train", str(tmp_path), None, None)
    with pytest.raises(SpecError, match=f"^{re.escape(str(tmp_path))}: not a search folder"):
        resume.find_run("search", str(tmp_path), None, None)
    with pytest.raises(SpecError, match="^train@latest: name the spec whose newest run"):
        resume.find_run("train", "latest", None, None)


def test_a_search_trial_is_resumed_through_its_search(data: Path) -> None:
    trial = new_run(search_dir="data/ppo_resume_search")
    with pytest.raises(SpecError, match="is a trial of the search in data/ppo_resume_search"):
        resume.open_run(f"train@{trial.root}", None, None, False, None)
    assert resume.open_run(f"enjoy@{trial.root}", None, None, False, None).root == trial.root


def test_an_unfinished_run_resumes_as_recorded(run: RunLayout) -> None:
    spec, info = record.read(run.root)
    resumed, layout = resume.resume_train(run.root, spec, info, range(1), None)
    assert resumed == spec and layout == run


@pytest.mark.parametrize(
    ("max_frame", "state", "line"),
    [
        (None, True, "{root} is finished: it already has 400 frames; pass a --max-frame above"),
        (400.0, True, "--max-frame 400: {root} already has 400 frames; pass a --max-frame above"),
        (800.0, False, "{root} finished without its resume state (--drop-state deleted"),
    ],
)
def test_a_finished_run_is_refused_what_it_cannot_do(
    run: RunLayout, max_frame: float | None, state: bool, line: str
) -> None:
    finish(run, state=state)
    spec, info = record.read(run.root)
    with pytest.raises(SpecError) as e:
        resume.resume_train(run.root, spec, info, range(1), max_frame)
    assert str(e.value).startswith(line.format(root=run.root))
    assert record.read(run.root)[0] == spec  # nothing rewritten


def test_a_run_is_extended_not_shortened(run: RunLayout) -> None:
    spec, info = record.read(run.root)
    with pytest.raises(SpecError, match=f"--max-frame 300: .* runs to max_frame {MAX_FRAME};"):
        resume.resume_train(run.root, spec, info, range(1), 300.0)
    finish(run)
    extended, _ = resume.resume_train(run.root, spec, info, range(1), 800.0)
    assert extended.env.max_frame == 800
    assert record.read(run.root)[0] == extended  # the record follows: a later train@ reads it
    assert record.read_trial_spec(run, 0) == extended


def test_every_session_needs_its_state_to_extend(run: RunLayout) -> None:
    """A two-session run with session 1's state gone is refused, as one with none."""
    spec, info = record.read(run.root)
    spec = spec.with_values({"meta.max_session": 2})
    for s in range(2):
        io.write_json({"frame": MAX_FRAME}, run.session_metrics(0, s))
    resume.state_files(run, range(2))[0].touch()
    with pytest.raises(SpecError, match="finished without its resume state"):
        resume.resume_train(run.root, spec, info, range(2), 800.0)


@pytest.mark.subprocess
def test_the_rules_load_no_torch() -> None:
    """`run` checks a continued run in the CLI's own process, before any session starts."""
    code = "import sys, slm_lab.experiment.resume\nprint('torch' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
