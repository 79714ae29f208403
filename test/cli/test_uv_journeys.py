"""The README's commands as a user types them, `uv run slm-lab ...` from the repository root:
check a spec, a dev run, its replay, its resume-and-extend, and a mistake's one line. (train
and search through uv, stopped by a signal to their process group, are in test_bench.py and
test_search.py.)"""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import make_spec, read_session_df, run_dirs, write_spec_file

from slm_lab import ROOT_DIR

UV = os.environ.get("UV", "uv")  # the uv that runs the tests (uv run sets UV)
TIMEOUT_S = 300


def uv_slm_lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [UV, "run", "slm-lab", *args],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.mark.cli
@pytest.mark.subprocess
def test_check_dev_enjoy_resume_and_a_mistake_through_uv_run(tmp_path: Path) -> None:
    spec_file = str(write_spec_file(tmp_path / "uv.json", {"uv_ppo": make_spec("ppo")}))
    data = str(tmp_path / "data")

    checked = uv_slm_lab("check", spec_file)
    assert (checked.returncode, checked.stdout) == (0, "ok: uv_ppo\n"), checked.stderr

    dev = uv_slm_lab("run", spec_file, "uv_ppo", "dev", "--data-dir", data)
    assert dev.returncode == 0, dev.stderr[-3000:]
    assert dev.stdout.startswith("trial_metrics: frame:4.00e+02 | ")
    [run_dir] = run_dirs(tmp_path / "data")

    enjoyed = uv_slm_lab("run", f"enjoy@{run_dir}", "--episodes", "2", "--data-dir", data)
    assert enjoyed.returncode == 0, enjoyed.stderr[-3000:]
    assert enjoyed.stdout.startswith("enjoy: 2 episodes | mean_return:")

    extended = uv_slm_lab("run", f"train@{run_dir}", "--max-frame", "600")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "resumed at frame 400" in extended.stderr
    assert read_session_df(run_dir)["frame"].iloc[-1] == 600

    mistake = uv_slm_lab("run", spec_file, "uv_ppo", "trian", "--data-dir", data)
    assert mistake.returncode == 2
    assert mistake.stderr.strip().splitlines() == [
        "error: mode 'trian': unknown; one of dev, train, search, enjoy@<run folder>, "
        "train@<run folder>, train@latest, search@<search folder>, search@latest; did you mean train?"
    ]
