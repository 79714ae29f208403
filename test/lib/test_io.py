"""Atomic writes: the files a run writes get the mode any tool's new file gets under the umask;
JSON written without NaN (null instead), read back either way."""

import json
import math
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slm_lab.lib import io


@pytest.fixture
def with_umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process under the umask the test is parametrized with (read afresh), restored after."""
    old = os.umask(request.param)
    io.umask.cache_clear()
    try:
        yield request.param
    finally:
        os.umask(old)
        io.umask.cache_clear()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("with_umask", "expected"),
    [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
    indirect=["with_umask"],
)
def test_written_files_follow_the_umask(tmp_path: Path, with_umask: int, expected: int) -> None:
    assert io.umask() == with_umask
    io.write_json({"consistency": 0.5}, tmp_path / "metrics.json")
    io.write_text("frame,total_reward\n", tmp_path / "rows.csv")
    io.save_torch({"w": [1.0]}, tmp_path / "model.pt")
    (tmp_path / "plain.log").write_text("a log line\n")  # as open() makes any file
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {
        "metrics.json": expected,
        "rows.csv": expected,
        "model.pt": expected,
        "plain.log": expected,
    }


@pytest.mark.parametrize("with_umask", [0o022], indirect=True)
def test_a_rewrite_takes_the_umask_mode_too(tmp_path: Path, with_umask: int) -> None:
    path = tmp_path / "spec.json"
    io.write_json({}, path)
    path.chmod(0o600)
    io.write_json({"a": 1}, path)  # replaced by a new file
    assert mode(path) == 0o644 and io.read_json(path) == {"a": 1}


def strict_json(text: str) -> Any:
    """JSON as a strict parser reads it: a bare NaN or Infinity is an error."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_metric_is_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "trial_metrics.json"
    metrics = {"frame": 20000.0, "strength": 1.5, "consistency": math.nan, "stability": -math.inf}
    io.write_json({**metrics, "curve": [1.0, math.nan], "nested": {"x": (math.inf, 2)}}, path)
    assert strict_json(path.read_text()) == {
        "frame": 20000.0,
        "strength": 1.5,
        "consistency": None,
        "stability": None,
        "curve": [1.0, None],
        "nested": {"x": [None, 2]},
    }
    read = io.read_metrics(path)
    assert math.isnan(read["consistency"]) and math.isnan(read["stability"])
    assert read["strength"] == 1.5


def test_an_older_metrics_file_with_a_bare_nan_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "trial_metrics.json"
    path.write_text('{\n  "frame": 20000.0,\n  "consistency": NaN\n}\n')
    assert math.isnan(io.read_metrics(path)["consistency"])
    assert math.isnan(io.read_json(path)["consistency"])


def test_git_state_names_the_commit_and_whether_tracked_files_differ(tmp_path: Path) -> None:
    """A run records its commit and whether the code it ran had uncommitted changes to tracked
    files (untracked ones, such as run output, do not count)."""

    def git(*args: str) -> None:
        ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", *ident, *args], cwd=tmp_path, check=True, capture_output=True)

    assert io.git_state(tmp_path) == (None, None)  # not a checkout
    git("init", "-q")
    assert io.git_state(tmp_path) == (None, None)  # no commit yet
    (tmp_path / "spec.json").write_text("{}")
    git("add", "spec.json")
    git("commit", "-q", "-m", "a spec")
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "run.csv").write_text("frame\n")  # untracked
    assert io.git_state(tmp_path) == (sha, False)
    (tmp_path / "spec.json").write_text('{"gamma": 0.999}')
    assert io.git_state(tmp_path) == (sha, True)
    git("add", "spec.json")  # staged, not committed: still not the commit's code
    assert io.git_state(tmp_path) == (sha, True)
