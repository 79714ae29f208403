"""The README's commands as a user types them, `uv run slm-lab ...` from the repository root:
check a spec, a dev run, its replay, its resume-and-extend, a mistake's one line, a quiet run and
TensorBoard on it, sharing runs through a Hugging Face dataset repo (a stand-in Hub). (train and search through uv, stopped by a signal to their process group, are
in test_bench.py and test_search.py.)"""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import (
    UV,
    ConsoleRun,
    make_spec,
    progress_lines,
    read_session_df,
    run_dirs,
    write_spec_file,
)
from hub_server import HubState, Repo, fake_run, folder_files, shared, stand_in

from slm_lab import ROOT_DIR

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


def readme_command(prefix: str) -> str:
    """The one command of the README that starts with `prefix`."""
    readme = (ROOT_DIR / "README.md").read_text()
    [command] = [line for line in readme.splitlines() if line.startswith(prefix)]
    return command


@pytest.mark.cli
@pytest.mark.subprocess
def test_readme_quiet_run_and_its_tensorboard(two_session_run: ConsoleRun) -> None:
    """The shared run ran with `--log-level WARNING`, as the README suggests for a quiet run:
    no progress line; TensorBoard, as the README opens it, finds each session's rows."""
    assert (
        "`--log-level WARNING` leaves out the building and progress lines"
        in (ROOT_DIR / "README.md").read_text()
    )
    run = two_session_run
    assert progress_lines(run.proc.stderr) == [] and "building env" not in run.proc.stderr
    assert run.proc.stdout.startswith("trial_metrics: ")

    command = readme_command("uv run tensorboard ")
    assert command == "uv run tensorboard --logdir data/<run folder>/log/tb"
    logdir = command.split("--logdir ")[1].replace("data/<run folder>", str(run.run_dir))
    inspected = subprocess.run(
        [UV, "run", "tensorboard", "--inspect", "--logdir", logdir],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert inspected.returncode == 0, inspected.stderr[-3000:]
    out = inspected.stdout + inspected.stderr
    for session in (0, 1):
        assert f"Event statistics for {logdir}/ppo_cartpole_t0_s{session}:" in out
    assert "total_reward_ma" in out


def imported_modules(stderr: str) -> set[str]:
    """The modules a process imported, from its PYTHONPROFILEIMPORTTIME lines."""
    prefix = "import time:"
    return {
        line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith(prefix)
    }


@pytest.mark.subprocess
def test_push_list_pull_through_uv_run_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the README shares runs, against the stand-in Hub; none of the three loads torch."""
    repo, token = "me/slm-lab-runs", "hf_" + "UvJourneyToken" * 2 + "004200"
    state = HubState(tokens={token})
    state.repos[repo] = Repo()
    files = fake_run(tmp_path / "data", "ppo_cartpole")
    [run_dir] = run_dirs(tmp_path / "data")
    other = tmp_path / "other"
    with stand_in(state, tmp_path / "hf_home", monkeypatch):
        for key, value in {
            "HF_REPO": repo,
            "HF_TOKEN": token,
            "PYTHONPROFILEIMPORTTIME": "1",
        }.items():
            monkeypatch.setenv(key, value)
        pushed = uv_slm_lab("push", str(run_dir))
        listed = uv_slm_lab("list", "ppo")
        pulled = uv_slm_lab("pull", "ppo_cartpole_2025", "--data-dir", str(other))
    for proc in (pushed, listed, pulled):
        assert proc.returncode == 0, proc.stderr[-3000:]
        modules = imported_modules(proc.stderr)
        assert "huggingface_hub" in modules
        assert not {m for m in modules if m.split(".")[0] == "torch"}, proc.args
        assert token not in proc.stdout + proc.stderr
    assert pushed.stdout.startswith(f"pushed {run_dir} to {repo}: http://127.0.0.1:")
    assert listed.stdout == f"{run_dir.name}\n"
    assert pulled.stdout == f"pulled {run_dir.name} -> {other / run_dir.name}\n"
    assert folder_files(other / run_dir.name) == shared(files)


@pytest.mark.cli
@pytest.mark.subprocess
def test_plot_a_run_beside_slm_lab_v5s_published_one_through_uv_run(
    two_session_run: ConsoleRun, tmp_path: Path
) -> None:
    """`uv run slm-lab plot`, as the README has it, of the shared run and a run folder in SLM
    Lab v5's format (test/fixtures/README.md): one PNG named by the title."""
    v5_run = ROOT_DIR / "test" / "fixtures" / "v5_run" / "ppo_cartpole_2026_01_11_100728"
    folders = f"{two_session_run.run_dir},{v5_run}"
    out = tmp_path / "plots"
    plotted = uv_slm_lab(
        "plot", "-t", "CartPole-v1 ours vs v5", "-f", folders, "-l", "ours,v5", "-o", str(out)
    )
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    png = out / "CartPole-v1_ours_vs_v5.png"
    lines = plotted.stdout.splitlines()
    assert lines[0].startswith("ours (PPO, CartPole-v1): 2 sessions | frame:400 | total_reward_ma:")
    assert lines[1].startswith("v5 (PPO, CartPole-v1): 2 sessions | frame:100000 | ")
    assert lines[2:] == [f"plot: {png}"]
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    assert "uv run slm-lab plot -t CartPole-v1 -f " in (ROOT_DIR / "README.md").read_text()


@pytest.mark.cli
@pytest.mark.subprocess
def test_v5_quick_start_line_through_uv_run(tmp_path: Path) -> None:
    """SLM Lab v5's quick start, `uv run slm-lab SPEC_FILE SPEC_NAME MODE` with no `run`, through
    the console script (a small budget after it); `--help` still lists the commands."""
    line = "uv run slm-lab slm_lab/spec/benchmark/ppo/ppo_cartpole.json ppo_cartpole dev"
    args = line.split()[3:]
    dev = uv_slm_lab(*args, "--max-frame", "1024", "--data-dir", str(tmp_path / "data"))
    assert dev.returncode == 0, dev.stderr[-3000:]
    assert dev.stdout.startswith("trial_metrics: frame:1.02e+03 | ")
    [run_dir] = run_dirs(tmp_path / "data")
    assert run_dir.name.startswith("ppo_cartpole_")

    helped = uv_slm_lab("--help")
    assert helped.returncode == 0, helped.stderr
    commands = helped.stdout.split("Commands:\n")[1]
    assert [line.split()[0] for line in commands.splitlines()][:3] == ["run", "retro", "check"]
