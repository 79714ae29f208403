"""`search` mode on Ray Tune through the real CLI: a search with ASHA early stopping, a trial
that raises, a killed search resumed, the suggestions of a seed, the session processes of a
trial. Ray starts once for the module (2 CPUs: a trial of 2 seeds runs alone, so the order in
which ASHA sees the trials is fixed); the killed search is a second driver on the same cluster.
Deselect with `-m "not ray"`.
"""

import json
import logging
import math
import os
import pickle
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest
from conftest import UV, invoke, load, make_spec, run_dirs, write_spec_file

from slm_lab import ROOT_DIR
from slm_lab.experiment.analysis import TRIAL_METRICS
from slm_lab.spec import search_space
from slm_lab.spec.spec_util import SpecError

NAME = "ppo_search"
SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
PNG_MAGIC = b"\x89PNG"
CLUSTER_CPUS = 2
GAMMA = "agent.algorithm.gamma"
WAIT_S = 60.0  # the longest a test waits for a subprocess's search to get somewhere
POLL_S = 0.2
# in the environment of every process this module's searches start (Ray's, their workers', the
# sessions'): other searches on the machine are not this module's
MARK = "SLM_LAB_TEST_SEARCH"
UV_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"  # Ray's uv hook, on unless set to 0
# the ways to start the CLI: the command before `run ...`, and whether it runs from the
# repository root (the others run from elsewhere). `python -m slm_lab.cli.main` is not among
# them: to Ray it is the console script's process (the same interpreter, no uv above it), and
# each mode here costs a whole search (half a minute of the suite's longest worker)
START_MODES = {
    "uv_run_project": ([UV, "run", "--project", str(ROOT_DIR), "slm-lab"], False),
    "uv_run_no_sync": ([UV, "run", "--no-sync", "slm-lab"], True),
    "venv_script": ([SLM_LAB], False),
}
LOG_TIME = "%Y-%m-%d %H:%M:%S"  # a log line's time (slm_lab.lib.logger)


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    import ray  # heavy: only when a test of this module runs

    from slm_lab.experiment.ray_cluster import WORKER_NICENESS

    os.environ[MARK] = str(os.getpid())
    # workers at this process's niceness, as a search's own Ray has them (not starved by other
    # load); taken out again after, so that the CLI's searches below set it themselves
    ours = WORKER_NICENESS not in os.environ
    os.environ.setdefault(WORKER_NICENESS, "0")
    try:
        ray.init(
            num_cpus=CLUSTER_CPUS,
            num_gpus=0,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    finally:
        if ours:
            del os.environ[WORKER_NICENESS]
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    del os.environ[MARK]


def search_spec(search: dict[str, Any], max_trial: int, seed: int, **spec: Any) -> dict[str, Any]:
    out = make_spec("ppo", random_seed=seed, **spec)
    out["meta"]["max_trial"] = max_trial
    out["search"] = search
    return out


def experiment_df(search_dir: Path) -> pd.DataFrame:
    return pd.read_csv(search_dir / "experiment_df.csv")


def suggestions(spec: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The values the search of `spec` gives its first `n` trials (Optuna's first trials are
    drawn from its seeded sampler, whatever the results)."""
    from slm_lab.experiment import search

    searcher = search.searcher(load(spec))
    searcher.set_search_properties(None, None, {})
    return [searcher.suggest(f"trial{i}") for i in range(n)]


def session_processes() -> list[psutil.Process]:
    """Session processes of this module's searches: the children of the fork servers that
    start them."""
    servers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "multiprocessing.forkserver" in " ".join(p.info["cmdline"] or []) and marked(p)
    ]
    return [c for s in servers for c in s.children()]


def marked(p: psutil.Process) -> bool:
    try:
        return p.environ().get(MARK) == str(os.getpid())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


@pytest.mark.ray
@pytest.mark.cli
def test_asha_stops_the_trials_that_cannot_learn(ray_address: str, in_tmp: Path) -> None:
    """4 trials x 2 seeds; env.max_t 8 caps every episode at a return of 8, so ASHA stops
    those trials at its first rung (200 frames), where the trial before reached ~19."""
    search = {"env.max_t__choice": [8, 500], f"{GAMMA}__uniform": [0.95, 0.999]}
    spec = search_spec(search, 4, 42, max_frame=800, max_session=2)
    spec["meta"]["search_scheduler"] = {"grace_period": 200, "reduction_factor": 2}
    path = str(write_spec_file(in_tmp / "search.json", {NAME: spec}))
    result = invoke(["run", path, NAME, "search"])
    assert result.exit_code == 0, result.stderr
    [search_dir] = run_dirs(in_tmp / "data")
    search_dir = search_dir.resolve()

    values = suggestions(spec, 4)
    assert [v["env.max_t"] for v in values] == [500, 8, 500, 8]
    df = experiment_df(search_dir)
    assert list(df.columns) == ["trial", "status", "env.max_t", GAMMA, *TRIAL_METRICS]
    assert list(df["trial"]) == [0, 1, 2, 3]
    assert list(df[GAMMA]) == [v[GAMMA] for v in values]
    assert list(df["env.max_t"]) == [500, 8, 500, 8]
    stopped = "stopped early at frame 200"
    assert list(df["status"]) == ["completed", stopped, "completed", stopped]
    assert list(df.loc[df["env.max_t"] == 8, "total_reward_ma"]) == [8.0, 8.0]
    for i in range(4):
        trial_dir = search_dir / f"{NAME}_t{i}"
        record = json.loads((trial_dir / f"{NAME}_spec.json").read_text())
        assert record["run_info"]["trial"] == i
        assert record["env"]["max_t"] == values[i]["env.max_t"] and "search" not in record
        for s in range(2):
            assert (trial_dir / "info" / f"{NAME}_t{i}_s{s}_session_df.csv").is_file()
        metrics = json.loads((trial_dir / "info" / f"{NAME}_t{i}_trial_metrics.json").read_text())
        assert metrics["total_reward_ma"] == pytest.approx(df["total_reward_ma"][i])
        assert (trial_dir / f"{NAME}_t{i}_trial_graph.png").read_bytes()[:4] == PNG_MAGIC
    graph = search_dir / f"{NAME}_experiment_graph.png"
    assert graph.read_bytes()[:4] == PNG_MAGIC
    assert (search_dir / "tune").is_dir() and (search_dir / "log" / "search.log").is_file()
    # model files: the best 3 (the two completed, then the first of the tied stopped trials)
    with_models = {i for i in range(4) if any((search_dir / f"{NAME}_t{i}" / "model").iterdir())}
    assert with_models == {0, 1, 2}

    best = int(df.loc[df["status"] == "completed", "total_reward_ma"].idxmax())
    best_spec = search_dir / f"{NAME}_best_spec.json"
    validate = f"{NAME}_t{best}_validate"
    [(best_name, best_run)] = json.loads(best_spec.read_text()).items()
    assert best_name == validate and best_run["meta"]["random_seed"] is None
    assert best_run["agent"]["algorithm"]["gamma"] == df[GAMMA][best]
    assert "search" not in best_run and best_run["meta"]["max_trial"] == 1
    assert invoke(["check", str(best_spec)]).stdout == f"ok: {validate}\n"
    out = result.stdout.splitlines()
    assert out[0] == "search: 4 trials | completed 2 | stopped 2"
    assert out[2].startswith(f"  {NAME}_t{best} | total_reward_ma:")
    shown = search_dir.relative_to(in_tmp.resolve()) / best_spec.name
    assert out[-1] == (
        f"best: {NAME}_t{best}; validate it on new seeds with: uv run slm-lab run {shown} {validate} train"
    )
    # the printed command, cut short: a run folder named as a validation, on a new seed
    validated = invoke([*out[-1].split(" uv run slm-lab ")[1].split(), "--max-frame", "200"])
    assert validated.exit_code == 0, validated.stderr
    [run_dir] = [d for d in run_dirs(in_tmp / "data") if d.name != search_dir.name]
    assert re.fullmatch(rf"{validate}_\d{{4}}_\d{{2}}_\d{{2}}_\d{{6}}", run_dir.name)
    assert validated.stdout.splitlines()[-1] == f"run folder: data/{run_dir.name}"
    trial_seed = json.loads((search_dir / f"{NAME}_t{best}" / f"{NAME}_spec.json").read_text())
    run_seed = json.loads((run_dir / f"{validate}_spec.json").read_text())["meta"]["random_seed"]
    assert trial_seed["meta"]["random_seed"] == 42 and run_seed not in (None, 42)
    assert f"{NAME}_t1 stopped early at frame 200 | total_reward_ma:8" in result.stderr
    assert f"{NAME}_t0 started | env.max_t=500 | {GAMMA}=" in result.stderr
    assert session_processes() == []

    trial_dir = search_dir / f"{NAME}_t{best}"
    enjoyed = invoke(["run", path, NAME, f"enjoy@{trial_dir}", "--episodes", "2"])
    assert enjoyed.stdout.startswith("enjoy: 2 episodes | mean_return:"), enjoyed.stderr
    assert f"_t{best}_s0_ckpt-best_model.pt" in enjoyed.stdout
    refused = invoke(["run", path, NAME, f"train@{trial_dir}"])
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"error: {trial_dir} is a trial of the search in {search_dir}: resume the search with search@<search folder>, or train the trial's values from a spec file\n",
    )


def leftovers(folder: Path) -> list[psutil.Process]:
    """Processes working in `folder` (a trial's Ray worker, its fork server, its sessions)."""
    found = []
    for p in psutil.process_iter():
        try:
            if Path(p.cwd()).is_relative_to(folder):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(POLL_S)


def trial_statuses(search_dir: Path) -> list[str]:
    """The trial statuses the search recorded as they ended (its partial table), in index
    order."""
    table = search_dir / "experiment_df_so_far.csv"
    return list(pd.read_csv(table)["status"]) if table.exists() else []


class WritesAFile:
    """Unpickled, it writes `path`: what a pickle planted in a run folder could do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return Path.write_text, (self.path, "code ran")


def plant_pickles(search_dir: Path, marker: Path) -> list[Path]:
    """Every pickle in the search folder (Tune's and Optuna's saved state) and Tune's JSON
    experiment state (cloudpickled objects inside; one is written if Tune had saved none)
    replaced by ones that write `marker` when read back;
    returns the files replaced. Checks first that each kind does write it when read."""
    from ray.tune.utils.serialization import TuneFunctionDecoder

    payload = pickle.dumps(WritesAFile(marker))
    planted = {"_type": "CLOUDPICKLE_FALLBACK", "value": payload.hex()}
    state = json.dumps(
        {"trial_data": [[json.dumps(planted), json.dumps(planted)]], "runner_data": planted}
    )
    pickle.loads(payload)
    assert marker.read_text() == "code ran"
    marker.unlink()
    json.loads(state, cls=TuneFunctionDecoder, allow_cloudpickle=True)
    assert marker.read_text() == "code ran"
    marker.unlink()
    pickles = list(search_dir.rglob("*.pkl"))
    # Tune's experiment state, whether or not Tune had saved one before the search was killed
    state_file = search_dir / "tune" / "experiment_state-2025-06-01_12-00-00.json"
    states = list({*search_dir.rglob("experiment_state-*.json"), state_file})
    for path in pickles:
        path.write_bytes(payload)
    for path in states:
        path.write_text(state)
    return pickles + states


@pytest.mark.ray
@pytest.mark.cli
@pytest.mark.subprocess
def test_a_killed_search_resumes_only_its_unfinished_trials(
    ray_address: str, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A search SIGKILLed while its second trial runs: its sessions end with it; search@latest
    reruns that trial and runs the third, and leaves the finished first one as it was. The
    third draws init_fn dirac_, which cannot initialize a linear layer: its session raises, the
    trial is errored with that line, and the others complete. Before the resume, the trials that
    had ended are what a stopped search shows (the partial table, written as each ends). The
    resume reads no pickle: those of the killed search (Tune's and Optuna's state) are replaced
    by ones that write a file when unpickled, and the file is never written."""
    search = {
        "env.max_frame__choice": [400, 10000],
        "agent.net.init_fn__choice": ["orthogonal_", "dirac_"],
    }
    spec = search_spec(search, 3, 6, max_frame=400)
    spec["meta"]["search_resources"] = {"cpu": CLUSTER_CPUS}  # one trial at a time
    assert [(v["env.max_frame"], v["agent.net.init_fn"]) for v in suggestions(spec, 3)] == [
        (400, "orthogonal_"),
        (10000, "orthogonal_"),
        (10000, "dirac_"),
    ]
    path = str(write_spec_file(in_tmp / "search.json", {NAME: spec}))
    with open(in_tmp / "search.err", "w") as err:
        proc = subprocess.Popen(
            [SLM_LAB, "run", path, NAME, "search"],
            cwd=in_tmp,
            env={**os.environ, "RAY_ADDRESS": ray_address},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_for(lambda: run_dirs(in_tmp / "data"), "the search folder")
        [search_dir] = run_dirs(in_tmp / "data")
        search_dir = search_dir.resolve()
        t0_metrics = search_dir / f"{NAME}_t0" / "info" / f"{NAME}_t0_trial_metrics.json"
        t1_rows = search_dir / f"{NAME}_t1" / "info" / f"{NAME}_t1_s0_session_df.csv"
        wait_for(
            lambda: t1_rows.exists() and trial_statuses(search_dir) == ["completed"],
            "the first trial recorded finished and the second one running",
        )
        assert len(session_processes()) == 1  # the second trial's one seed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not leftovers(search_dir), "the killed search's processes to end")
    assert "optuna" not in (in_tmp / "search.err").read_text().lower()  # its logs: log/ray.log
    assert not (search_dir / "experiment_df.csv").exists()
    t0_written = t0_metrics.stat().st_mtime_ns
    # what a stopped search shows: the rows of the trials that ended, from its partial table;
    # what it continues with: the second trial restarted with its values, the third drawn
    from slm_lab.experiment.search import continued, trial_rows
    from slm_lab.spec import schema

    typed = schema.load({**spec, "name": NAME}, NAME)
    plan = continued(typed, search_dir)
    [so_far] = trial_rows(typed, search_dir, list(plan.ended))
    t1_values = {"env.max_frame": 10000, "agent.net.init_fn": "orthogonal_"}
    assert (plan.restarts, plan.fresh) == (((1, t1_values),), (2,))
    assert (so_far["trial"], so_far["status"], so_far["frame"]) == (0, "completed", 400)
    assert (so_far["env.max_frame"], so_far["agent.net.init_fn"]) == (400, "orthogonal_")
    from slm_lab.cli.main import _print_trials  # what Ctrl-C prints of them

    capsys.readouterr()
    _print_trials([so_far], NAME, "search stopped: 1 of 3 trials ended")
    head, top, row = capsys.readouterr().out.splitlines()
    assert (head, top) == (
        "search stopped: 1 of 3 trials ended | completed 1",
        "top trials by total_reward_ma:",
    )
    assert row.startswith(f"  {NAME}_t0 | total_reward_ma:") and row.endswith(
        '| completed | env.max_frame=400 | agent.net.init_fn="orthogonal_"'
    )

    marker = in_tmp / "code_ran.txt"
    planted = plant_pickles(search_dir, marker)
    names = sorted(str(p.relative_to(search_dir)) for p in planted)
    assert "tune/tuner.pkl" in names and any("searcher-state" in n for n in names), names
    result = invoke(["run", path, NAME, "search@latest"])
    assert result.exit_code == 0, result.stderr
    assert not marker.exists()
    df = experiment_df(search_dir)
    error = (
        f"{NAME}_t2_s0 failed: ValueError: Only tensors with 3, 4, or 5 dimensions are supported"
    )
    assert list(df["status"]) == ["completed", "completed", f"errored: {error}"]
    assert list(df["frame"][:2]) == [400, 10000] and math.isnan(df["total_reward_ma"][2])
    assert t0_metrics.stat().st_mtime_ns == t0_written
    assert f"{NAME}_t0 started" not in result.stderr
    assert f"{NAME}_t1 started" in result.stderr and f"{NAME}_t2 errored: {error}" in result.stderr
    assert "Traceback" in (search_dir / f"{NAME}_t2" / "log" / f"{NAME}_t2_s0.log").read_text()
    assert result.stdout.splitlines()[0] == "search: 3 trials | completed 2 | errored 1"
    assert not (search_dir / "experiment_df_so_far.csv").exists()

    again = invoke(["run", path, NAME, "search@latest"])
    assert (again.exit_code, again.stderr) == (
        2,
        f"error: {search_dir.relative_to(in_tmp)} is finished: its trials are in {search_dir.relative_to(in_tmp) / 'experiment_df.csv'}\n",
    )


@pytest.mark.ray
@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.xdist_group("ray")
def test_a_search_stopped_by_a_group_sigterm_through_uv_saves_and_says_how_to_resume(
    in_tmp: Path,
) -> None:
    """`timeout` stops `uv run slm-lab ... search` by signalling its whole process group,
    Ray's daemons that the search started included: the search still stops through Tune,
    prints the resume line last, and leaves no process behind (no C++ stack dump of a Ray
    daemon killed under it). Started under `nice`, its sessions run at the search's niceness,
    not at the 15 more that Ray gives its workers."""
    spec = search_spec({GAMMA + "__uniform": [0.9, 0.99]}, 2, 3, max_frame=10**6)
    path = str(write_spec_file(in_tmp / "search.json", {NAME: spec}))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # Ray on this machine
    niceness = min(os.nice(0) + 1, 19)
    command = ["nice", "-n", "1", UV, "run", "--project", str(ROOT_DIR), "slm-lab"]
    proc = subprocess.Popen(
        [*command, "run", path, NAME, "search", "--data-dir", str(in_tmp / "data")],
        cwd=ROOT_DIR,  # as the README runs it
        env={**env, MARK: str(os.getpid()), "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: list((in_tmp / "data").glob(f"*/{NAME}_t0/info/{NAME}_t0_s0_session_df.csv")),
            "the first trial's rows",
        )
        sessions = session_processes()
        assert sessions and {p.nice() for p in sessions} == {niceness}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=3 * WAIT_S)
    [search_dir] = run_dirs(in_tmp / "data")
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1] == (
        f"search stopped; resume with: uv run slm-lab run search@{search_dir}"
    )
    assert "SIGTERM received" not in err and "Traceback" not in err
    assert (search_dir / "experiment_df_so_far.csv").is_file()
    wait_for(lambda: not group_processes(proc.pid), "the search's processes to end")


@pytest.fixture(scope="module")
def tiny_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A spec file of one trial of one session, 200 frames: the cheapest search."""
    spec = search_spec({GAMMA + "__uniform": [0.9, 0.99]}, 1, 5, max_frame=200)
    return write_spec_file(tmp_path_factory.mktemp("tiny") / "search.json", {NAME: spec})


@pytest.fixture
def ray_tmpdir() -> Iterator[Path]:
    """RAY_TMPDIR for a search that starts Ray on this machine: its session's logs where the
    test finds them (a short path: Ray's sockets live under it)."""
    path = Path(tempfile.mkdtemp(prefix="slm-ray-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)  # a socket may go as it is walked


def local_search(
    command: list[str], cwd: Path, spec_file: Path, data: Path, env: dict[str, str]
) -> subprocess.Popen:
    """`command run SPEC NAME search` with Ray started on this machine (no RAY_ADDRESS, Ray's
    uv hook as the CLI leaves it unless `env` sets it), in a process group of its own."""
    base = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", UV_HOOK)}
    return subprocess.Popen(
        [*command, "run", str(spec_file), NAME, "search", "--data-dir", str(data)],
        cwd=cwd,
        env={**base, MARK: str(os.getpid()), "NO_COLOR": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_output(proc: subprocess.Popen) -> tuple[str, str]:
    """The output of a local_search, killed with its process group if it runs past 3 WAIT_S."""
    try:
        return proc.communicate(timeout=3 * WAIT_S)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)


def session_log(ray_tmpdir: Path, name: str) -> Path:
    [path] = (ray_tmpdir / "ray").glob(f"session_2*/logs/{name}")
    return path


@pytest.mark.ray
@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("mode", START_MODES)
def test_a_search_runs_its_workers_on_the_python_that_started_it(
    mode: str, tiny_search: Path, ray_tmpdir: Path, tmp_path: Path
) -> None:
    """However the CLI is started, the trials' Ray workers run its own Python and environment.
    Ray's uv hook, which would start them as `uv run` in a copy of the working directory, is
    off: with --no-sync that copy's environment is empty, the workers die before they register
    and the search waits forever; with --project from another folder, Ray refuses to start."""
    command, at_root = START_MODES[mode]
    cwd = ROOT_DIR if at_root else tmp_path
    env = {"RAY_TMPDIR": str(ray_tmpdir)}
    proc = local_search(command, cwd, tiny_search, tmp_path / "data", env)
    out, err = wait_output(proc)
    assert proc.returncode == 0, err[-3000:]
    assert out.splitlines()[0] == "search: 1 trial | completed 1"
    # the Python of each runtime environment Ray made for the trials' workers
    made = re.findall(
        r'"py_executable": "([^"]*)"', session_log(ray_tmpdir, "runtime_env_agent.log").read_text()
    )
    assert made and {Path(p).parent for p in made} == {Path(sys.executable).parent}, made


@pytest.mark.ray
@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.xdist_group("ray")
def test_a_search_whose_workers_cannot_start_stops_at_once_and_says_why(
    tiny_search: Path, ray_tmpdir: Path, tmp_path: Path
) -> None:
    """Ray's uv hook forced on under `uv run --no-sync`: each worker starts as `uv run
    --no-sync` in a copy of the project, whose new environment is empty, and dies importing
    Ray. The search ends within WAIT_S of its start with one line that says why, leaves no
    search folder to resume, and no process of its own."""
    env = {UV_HOOK: "1", "RAY_TMPDIR": str(ray_tmpdir)}
    data = tmp_path / "data"
    proc = local_search([UV, "run", "--no-sync", "slm-lab"], ROOT_DIR, tiny_search, data, env)
    _, err = wait_output(proc)
    ended = datetime.now()
    started, *rest = err.splitlines()
    assert f"running search {NAME} in" in started, err[-3000:]
    assert (ended - datetime.strptime(started.split(" INFO")[0], LOG_TIME)).total_seconds() < WAIT_S
    assert proc.returncode == 1
    raylet_err = session_log(ray_tmpdir, "raylet.err")
    assert rest == [
        f"error: no trial of {NAME} could start: Ray's workers die as they start: "
        "ModuleNotFoundError: No module named 'ray' (they start as "
        f"`{UV} run --no-sync --python {platform.python_version()} python`; Ray's log: {raylet_err})"
    ]
    assert run_dirs(data) == []
    wait_for(lambda: not group_processes(proc.pid), "the search's processes to end")


def group_processes(pgid: int) -> list[psutil.Process]:
    """The processes of a process group still running (zombies aside)."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def test_a_seed_gives_the_same_suggestions_and_each_draw_fits_its_distribution() -> None:
    search = {
        "a__uniform": [0.9, 0.99],
        "b__quniform": [0.2, 0.8, 0.2],
        "c__loguniform": [1e-4, 1e-2],
        "d__qloguniform": [1e-4, 1e-2, 1e-4],
        "e__randn": [0.5, 0.1],
        "f__qrandn": [0.2, 0.05, 0.01],
        "g__randint": [1, 4],
        "h__qrandint": [32, 128, 32],
        "i__lograndint": [1, 64],
        "j__qlograndint": [8, 64, 8],
        "k__choice": [[16], [32, 32], None, "x"],
    }
    spec = make_spec("ppo")
    spec["search"] = {f"agent.algorithm.{k}": v for k, v in search.items()}
    drawn = suggestions(spec, 20)
    assert drawn == suggestions(spec, 20)
    spec["meta"]["random_seed"] += 1
    assert drawn != suggestions(spec, 20)
    for d in [{k.rsplit(".", 1)[1]: v for k, v in d.items()} for d in drawn]:
        assert 0.9 <= d["a"] <= 0.99 and 1e-4 <= d["c"] <= 1e-2
        assert round(d["b"] / 0.2, 9).is_integer() and 0.2 <= d["b"] <= 0.8
        assert round(d["d"] / 1e-4, 9).is_integer() and math.isfinite(d["e"])
        assert round(d["f"] / 0.01, 9).is_integer()
        assert d["g"] in (1, 2, 3) and d["h"] in (32, 64, 96, 128) and 1 <= d["i"] <= 63
        assert d["j"] % 8 == 0 and 8 <= d["j"] <= 64
        assert d["k"] in ([16], [32, 32], None, "x")
    assert {json.dumps(d[next(k for k in d if k.endswith(".k"))]) for d in drawn} == {
        "[16]",
        "[32, 32]",
        "null",
        '"x"',
    }


# leaf -> (arguments, the bin a draw counts in, whether the bins are the draws' values)
RAY_TUNE_CASES: dict[str, tuple[list[Any], Any, bool]] = {
    "uniform": ([0.9, 0.99], lambda x: int((x - 0.9) / 0.009), False),
    "loguniform": ([1e-4, 1e-2], lambda x: int(math.log10(x) * 5), False),
    "randn": ([0.5, 0.1], lambda x: round((x - 0.5) / 0.1), False),
    "quniform": ([0, 1, 0.25], lambda x: round(x / 0.25), True),
    "qloguniform": ([1e-3, 1e-2, 1e-3], lambda x: round(x / 1e-3), True),
    "qrandn": ([0, 1, 0.5], lambda x: round(x / 0.5), False),
    "randint": ([1, 4], int, True),
    "qrandint": ([0, 10, 1], int, True),  # q = 1: hi excluded
    "qrandint_off_grid": ([3, 20, 5], int, True),  # bounds not multiples of q: 5 to 20
    "lograndint": ([1, 100], int, True),
    "qlograndint": ([1, 100, 10], int, True),  # 10 to 100, never 0
    "qlograndint_on_grid": ([8, 64, 8], int, True),
    "choice": ([[16], [32, 32], None, "x"], json.dumps, True),
}
RAY_TUNE_DRAWS = 2000
# the largest difference of a bin's frequency between the two samplers' draws: over 2000 draws
# each, the difference has a standard error of 0.016 at most (both samplers are seeded)
FREQUENCY_TOLERANCE = 0.05


def test_draws_have_ray_tunes_values_and_weights() -> None:
    """The search's draws (Optuna's first trials, from its seeded sampler) against Ray Tune's
    own domain sampling the same arguments: the same values (the same bins of a continuous
    distribution) with the same frequencies, within FREQUENCY_TOLERANCE."""
    from ray import tune

    spec = make_spec("ppo")
    spec["search"] = {
        f"agent.algorithm.{case}__{case.split('_')[0]}": args
        for case, (args, _, _) in RAY_TUNE_CASES.items()
    }
    drawn = suggestions(spec, RAY_TUNE_DRAWS)
    for case, (args, bin_of, discrete) in RAY_TUNE_CASES.items():
        dist = case.split("_")[0]
        ours = [bin_of(d[f"agent.algorithm.{case}"]) for d in drawn]
        domain = getattr(tune, dist)(args) if dist == "choice" else getattr(tune, dist)(*args)
        theirs = [bin_of(x) for x in domain.sample(size=RAY_TUNE_DRAWS, random_state=0)]
        if discrete:
            assert set(ours) == set(theirs), (case, sorted(set(ours) ^ set(theirs)))
        bins = set(ours) | set(theirs)
        gap = max(abs(ours.count(b) - theirs.count(b)) / RAY_TUNE_DRAWS for b in bins)
        assert gap <= FREQUENCY_TOLERANCE, (case, gap)
    lograndint = [d["agent.algorithm.qlograndint"] for d in drawn]
    assert min(lograndint) == 10 and all(x % 10 == 0 and x <= 100 for x in lograndint)


@pytest.mark.parametrize(
    ("dist", "args"),
    [
        ("quniform", [0.1, 0.9, 0.2]),
        ("quniform", [0, 0.95, 0.1]),
        ("qloguniform", [1e-5, 1e-2, 1e-4]),
        ("qrandint", [1, 9, 10]),
        ("qlograndint", [11, 19, 10]),
    ],
)
def test_bounds_ray_tune_refuses_are_refused_before_a_search(dist: str, args: list[Any]) -> None:
    from ray import tune

    with pytest.raises(ValueError, match="divisible by quantization|no multiple of the quant"):
        getattr(tune, dist)(*args).sample()
    with pytest.raises(SpecError, match=f"^search.x__{dist}: "):
        search_space.parse({f"x__{dist}": args})


def test_a_trial_reports_the_mean_of_its_seeds_that_have_a_value() -> None:
    from slm_lab.experiment import search_trial

    assert search_trial.mean_of([math.nan, 2.0, 4.0]) == 3.0 and math.isnan(
        search_trial.mean_of([math.nan])
    )
    assert search_trial.finite(math.nan) == -sys.float_info.max and search_trial.finite(1.5) == 1.5


def test_a_trial_reports_every_tenth_of_its_frames_and_at_each_rung() -> None:
    from slm_lab.experiment import search_trial

    spec = make_spec("ppo", max_frame=1000)
    assert search_trial.report_frames(load(spec)) == list(range(100, 1000, 100))
    spec["meta"]["search_scheduler"] = {"grace_period": 150, "reduction_factor": 3}
    assert search_trial.report_frames(load(spec)) == [
        100,
        150,
        200,
        300,
        400,
        450,
        500,
        600,
        700,
        800,
        900,
    ]


def test_as_many_trials_start_at_once_as_the_cluster_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_lab.experiment import ray_cluster

    monkeypatch.setattr(ray_cluster.ray, "cluster_resources", lambda: {"CPU": 8.0, "GPU": 1.0})
    spec = make_spec("ppo", max_session=2)
    spec["meta"]["max_trial"] = 16
    assert ray_cluster.concurrent_trials(load(spec)) == 4  # 2 CPUs a trial (one per seed)
    spec["meta"]["search_resources"] = {"cpu": 0.5, "gpu": 0.25}
    assert ray_cluster.concurrent_trials(load(spec)) == 4  # the GPU is the limit
    spec["meta"]["max_trial"] = 3
    assert ray_cluster.concurrent_trials(load(spec)) == 3


def test_a_search_on_this_machine_turns_rays_uv_hook_off_and_one_on_a_cluster_leaves_it() -> None:
    from slm_lab.experiment.ray_cluster import keep_workers_on_this_python

    for before, after in [
        ({}, {UV_HOOK: "0"}),
        ({UV_HOOK: "1"}, {UV_HOOK: "1"}),  # the user's
        ({"RAY_ADDRESS": "10.0.0.2:6379"}, {"RAY_ADDRESS": "10.0.0.2:6379"}),
    ]:
        keep_workers_on_this_python(before)
        assert before == after


def test_a_search_on_this_machine_runs_its_workers_at_its_own_niceness() -> None:
    from slm_lab.experiment.ray_cluster import WORKER_NICENESS, keep_workers_at_this_priority

    for before, after in [
        ({}, {WORKER_NICENESS: "0"}),  # nothing added to the niceness the workers inherit
        ({WORKER_NICENESS: "19"}, {WORKER_NICENESS: "19"}),  # the user's
        ({"RAY_ADDRESS": "10.0.0.2:6379"}, {"RAY_ADDRESS": "10.0.0.2:6379"}),  # the cluster's
    ]:
        keep_workers_at_this_priority(before)
        assert before == after


def test_a_worker_that_dies_as_it_starts_says_why_in_the_raylets_log() -> None:
    from slm_lab.experiment.ray_cluster import start_failure

    uv = (
        "warning: `VIRTUAL_ENV=/p/.venv` does not match the project environment path `.venv`\n"
        "Creating virtual environment at: .venv\n"
    )
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/p/ray/_private/workers/default_worker.py", line 8, in <module>\n'
        "    import ray\n"
        "ModuleNotFoundError: No module named 'ray'\n"
    )
    raylet = (
        "[2026-11-27 09:06:57,513 E 13215 13215] (raylet) worker_pool.cc:660: Some workers of "
        "the worker process(13647) have not registered within the timeout. The process is "
        "dead, probably it crashed during start."
    )
    assert start_failure(uv) is None
    assert start_failure(uv + traceback) == "ModuleNotFoundError: No module named 'ray'"
    assert start_failure(uv + traceback.rsplit("\n", 2)[0]) is None  # not written out yet
    assert start_failure(uv + "error: Failed to spawn: `python`\n") == (
        "error: Failed to spawn: `python`"
    )
    assert start_failure("Fatal Python error: init_fs_encoding: no encodings\n") == (
        "Fatal Python error: init_fs_encoding: no encodings"
    )
    assert start_failure(raylet) == raylet.split("worker_pool.cc:660: ")[1]


@pytest.mark.subprocess
def test_a_trial_worker_and_the_driver_import_no_torch() -> None:
    """A trial's Ray worker loads search_trial (Tune's trainable) and the driver loads search:
    neither imports torch (the sessions' fork server does); Ray starts without Tune; a session
    process imports its entry point's module (the pool's), which loads neither Ray nor torch."""
    code = (
        "import sys\n"
        "import slm_lab.experiment.pool\n"
        "session = [m for m in ('ray', 'torch') if m in sys.modules]\n"
        "import slm_lab.experiment.ray_cluster\n"
        "tune_at_start = 'ray.tune' in sys.modules\n"
        "import slm_lab.experiment.search_trial, slm_lab.experiment.search\n"
        "print(session, tune_at_start, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False", "False"]


def test_optuna_is_told_the_draws_behind_each_searched_value() -> None:
    """undraw inverts draw: the search space run on the draws optuna_draws gives for a trial's
    values gives those values again (a normal's to float precision)."""
    import optuna

    from slm_lab.experiment import search

    spec = make_spec("ppo", random_seed=4)
    spec["search"] = {
        f"agent.algorithm.{case}__{case.split('_')[0]}": args
        for case, (args, _, _) in RAY_TUNE_CASES.items()
    }
    typed = load(spec)
    for values in suggestions(spec, 30):
        params, distributions = search.optuna_draws(typed, values)
        assert set(distributions) == set(values)
        again = search.SearchSpace(typed.search)(optuna.trial.FixedTrial(params))
        for path, value in values.items():
            assert again[path] == pytest.approx(value, rel=1e-9), path
    assert search.optuna_draws(typed, {**values, "agent.algorithm.choice": "absent"}) is None


def test_a_stopped_search_continues_from_its_plain_files(tmp_path: Path) -> None:
    """The plan of search@ from the partial table and the trial folders only: the listed
    trials ended; an unlisted folder with its values restarts with them; one without (killed
    before its record) gives its index to a new draw, as do the indices after. Optuna starts
    from the ended trials and suggests the restarted one first, with its exact values."""
    import optuna

    from slm_lab.experiment import search
    from slm_lab.spec import schema

    spec = search_spec({GAMMA + "__randn": [0.97, 0.01]}, 5, 3)
    typed = schema.load({**spec, "name": NAME}, NAME)
    root = tmp_path / "search"
    trial = {i: root / f"{NAME}_t{i}" for i in range(4)}
    for folder in trial.values():
        (folder / "info").mkdir(parents=True)
    metrics = dict.fromkeys(TRIAL_METRICS, 1.0) | {"total_reward_ma": 21.5}
    (trial[0] / "info" / f"{NAME}_t0_trial_metrics.json").write_text(json.dumps(metrics))
    restarted = {GAMMA: 0.9712345678901234}
    record = {"name": NAME, "run_info": {"mode": "search", "trial": 1, "values": restarted}}
    (trial[1] / f"{NAME}_spec.json").write_text(json.dumps(record))
    table = root / "experiment_df_so_far.csv"
    table.write_text(
        f"trial,status,{GAMMA},{','.join(TRIAL_METRICS)}\n"
        f"0,completed,0.95,{','.join(['1.0'] * len(TRIAL_METRICS))}\n"
        f"2,errored: {NAME}_t2_s0 failed: ValueError: bad,0.99,{',' * (len(TRIAL_METRICS) - 1)}\n"
    )
    plan = search.continued(typed, root)
    assert [(t.index, t.status, t.values) for t in plan.ended] == [
        (0, "completed", {GAMMA: 0.95}),
        (2, f"errored: {NAME}_t2_s0 failed: ValueError: bad", {GAMMA: 0.99}),
    ]
    assert plan.ended[0].metric == 21.5 and math.isnan(plan.ended[1].metric)
    assert (plan.restarts, plan.fresh, plan.order) == (((1, restarted),), (3, 4), (1, 3, 4))

    searcher = search.searcher(typed, plan)
    searcher.set_search_properties(None, None, {})
    first, second = searcher.suggest("a"), searcher.suggest("b")
    assert first == restarted  # to the bit
    assert second != suggestions(spec, 1)[0]  # not the search's first draw again
    told = searcher._ot_study.get_trials(deepcopy=False)[:2]
    assert [(t.state, t.value) for t in told] == [
        (optuna.trial.TrialState.COMPLETE, 21.5),
        (optuna.trial.TrialState.FAIL, None),
    ]

    (trial[0] / "info" / f"{NAME}_t0_trial_metrics.json").unlink()
    with pytest.raises(SpecError, match=r"a trial that experiment_df_so_far.csv lists as ended"):
        search.continued(typed, root)
    table.write_text("trial,state\n0,done\n")
    with pytest.raises(SpecError, match=r"experiment_df_so_far.csv: not a table of this search"):
        search.continued(typed, root)
    table.write_text(f"trial,status,{GAMMA}\n0,finished,0.95\n")
    with pytest.raises(SpecError, match=r"trial 0 has the status 'finished'"):
        search.continued(typed, root)
