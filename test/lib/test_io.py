"""Atomic writes: the files a run writes get the mode any tool's new file gets under the umask."""

import os
import stat
from collections.abc import Iterator
from pathlib import Path

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
