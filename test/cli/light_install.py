"""The light core install (the project in light/: no torch, no Gymnasium) runs the commands
README's Install section names, through the console script as a user runs them, and `run` says
in one line that it needs the full install; a plain `uv run` in light/ leaves it light.

Not a pytest module (pytest is not in the light core): .ci/light_install.sh runs it with the
light environment's Python, `uv run python ../test/cli/light_install.py` in light/; an assertion
failing exits 1.
"""

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

from hub_server import HubState, Repo, fake_run, serve

ROOT = Path(__file__).resolve().parents[2]
LIGHT = ROOT / "light"  # the light core's project: every uv run there syncs only it
SLM_LAB = Path(sys.executable).parent / "slm-lab"
V5_RUN = ROOT / "test/fixtures/v5_run/ppo_cartpole_2026_01_11_100728"
SPEC_FILE, SPEC_NAME = "benchmark/ppo/ppo_cartpole.json", "ppo_cartpole"
REPO, TOKEN = "me/slm-lab-runs", "hf_" + "LightInstallToken" * 2
FULL_INSTALL_FIX = "run uv sync in the repository root, not in light/"
SYNTAX_ONLY = f"syntax only: env spaces not checked without the full install; {FULL_INSTALL_FIX}"
NEEDS_FULL = (
    f"error: slm-lab run needs the full install (torch, Gymnasium...): {FULL_INSTALL_FIX}\n"
)
LOAD_AGENT_NEEDS_FULL = (
    f"load_agent needs the full install (torch, Gymnasium...): {FULL_INSTALL_FIX}"
)
TIMEOUT_S = 120


def slm_lab(
    *args: str, code: int = 0, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`slm-lab ARGS` in a fresh process; its exit code asserted, and no traceback."""
    out = subprocess.run(
        [str(SLM_LAB), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    shown = f"slm-lab {' '.join(args)}: exit {out.returncode}\n{out.stdout}{out.stderr}"
    assert out.returncode == code and "Traceback" not in out.stderr, shown
    print(f"ok  slm-lab {' '.join(args)}: exit {out.returncode}")
    return out


def check_no_heavy() -> None:
    assert Path(sys.prefix) == LIGHT / ".venv", f"not light/'s environment: {sys.prefix}"
    importlib.invalidate_caches()  # packages a uv run since the start may have installed
    heavy = [m for m in ("torch", "gymnasium", "ray", "ale_py", "torcharc") if find_spec(m)]
    assert not heavy, f"the light environment has {heavy}"


def check_uv_run_stays_light(tmp: Path) -> None:
    """A plain `uv run` in light/, as README writes it, syncs the light project and no more."""
    out = subprocess.run(
        ["uv", "run", "slm-lab", "plot", "-f", str(V5_RUN), "-o", str(tmp / "uv_run")],
        cwd=LIGHT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp / "uv_run" / "CartPole-v1.png").is_file()
    check_no_heavy()
    print("ok  uv run slm-lab plot in light/: still no torch")


def check_spec_syntax() -> None:
    out = slm_lab("check", SPEC_FILE)
    assert out.stdout == f"ok: {SPEC_NAME} ({SYNTAX_ONLY})\n", out.stdout
    out = slm_lab("check", SPEC_FILE, "-s", "agent.algorithm.gamma=2", code=2)
    assert "agent.algorithm.gamma: must be in (0, 1], got 2" in out.stderr, out.stderr


def check_plot_and_retro(tmp: Path) -> None:
    slm_lab("plot", "-f", str(V5_RUN), "-o", str(tmp / "plots"))
    assert (tmp / "plots" / "CartPole-v1.png").is_file()
    out = slm_lab("plot-list", str(V5_RUN.parent))
    assert V5_RUN.name in out.stdout, out.stdout
    # the v5 fixture keeps its trial metrics only: retro recomputes from a session's rows
    run = Path(shutil.copytree(V5_RUN, tmp / V5_RUN.name))
    rows = "frame,total_reward\n" + "".join(f"{100 * i},{10 * i}\n" for i in range(1, 5))
    (run / "info" / f"{SPEC_NAME}_t0_s0_session_df.csv").write_text(rows)
    out = slm_lab("retro", str(run))
    assert "trial_metrics: frame:4.00e+02 | total_reward_ma:25.00" in out.stdout, out.stdout
    assert (run / "graph" / f"{SPEC_NAME}_t0_trial_graph.png").is_file()


def check_hub(tmp: Path) -> None:
    """push, list and pull against the stand-in Hub on the loopback interface."""
    state = HubState(tokens={TOKEN})
    state.repos[REPO] = Repo()
    files = fake_run(tmp / "data", "ppo_light")
    name = "ppo_light_2025_06_01_120000"
    with serve(state) as server:
        env = {
            "HF_ENDPOINT": server.endpoint,
            "HF_HOME": str(tmp / "hf_home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_REPO": REPO,
            "HF_TOKEN": TOKEN,
        }
        slm_lab("push", f"data/{name}", cwd=tmp, env=env)
        assert slm_lab("list", cwd=tmp, env=env).stdout == f"{name}\n"
        slm_lab("pull", "ppo_light", "--data-dir", "pulled", cwd=tmp, env=env)
    pulled = tmp / "pulled" / name / "info" / "ppo_light_t0_s0_session_df.csv"
    assert pulled.read_bytes() == files["info/ppo_light_t0_s0_session_df.csv"]


def check_run_remote(tmp: Path) -> None:
    """The spec checked and a stand-in `dstack` called with the remote command."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    dstack = bin_dir / "dstack"
    dstack.write_text(f'#!/bin/sh\necho "$@" > {tmp / "dstack_args"}\n')
    dstack.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {"PATH": path, "HF_REPO": REPO, "HF_TOKEN": TOKEN}
    slm_lab("run-remote", SPEC_FILE, SPEC_NAME, "train", "-n", "light", cwd=tmp, env=env)
    args = (tmp / "dstack_args").read_text()
    assert args.startswith("apply"), args


def check_run_refused(tmp: Path) -> None:
    for args in ((), (SPEC_FILE, SPEC_NAME, "train"), ("enjoy@latest",)):
        out = slm_lab("run", *args, code=1, cwd=tmp)
        assert out.stderr == NEEDS_FULL and not out.stdout, out.stderr


def check_load_agent_refused() -> None:
    """`load_agent` raises one error saying what to install, not Gymnasium's own."""
    code = f"import slm_lab; slm_lab.load_agent({str(V5_RUN)!r})"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines()[-1] == f"ModuleNotFoundError: {LOAD_AGENT_NEEDS_FULL}", (
        out.stderr
    )
    assert "During handling" not in out.stderr, out.stderr
    print("ok  load_agent: needs the full install")


def main() -> None:
    check_no_heavy()
    slm_lab("--help")
    check_spec_syntax()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        check_plot_and_retro(tmp)
        check_uv_run_stays_light(tmp)
        check_hub(tmp)
        check_run_remote(tmp)
        check_run_refused(tmp)
    check_load_agent_refused()
    print("light install: every light command ran without torch")


if __name__ == "__main__":
    main()
