"""Sharing run folders through a Hugging Face dataset repo: `slm-lab push`, `list`, `pull` and
`run --upload-hf`, through the real huggingface_hub client against the stand-in Hub of
hub_server.py on the loopback interface (the real Hub cannot be reached from here)."""

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import invoke, make_spec, run_dirs, write_spec_file
from hub_server import (
    GITATTRIBUTES,
    STATE,
    HubServer,
    HubState,
    Repo,
    fake_run,
    folder_files,
    shared,
    stand_in,
)
from huggingface_hub import constants
from typer.testing import Result

from slm_lab.lib import hub as hub_lib

REPO = "me/slm-lab-runs"
TOKEN = "hf_" + "StandInHubToken" * 2 + "0042"  # the shape of a real one
PLAIN_TOKEN = "open-sesame-0042"  # not that shape: scrubbed because it is the one in use
PPO = "ppo_cartpole"
SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
COMMAND_S = 60  # the longest a command against the stand-in may take
DQN = "dqn_cartpole"


class StandIn(NamedTuple):
    server: HubServer
    home: Path  # HF_HOME

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def state(self) -> HubState:
        return self.server.state

    def files(self, repo: str = REPO) -> dict[str, bytes]:
        return self.state.repos[repo].files("main") or {}

    def commit_url(self, repo: str = REPO) -> str:
        return f"{self.endpoint}/datasets/{repo}/commit/{self.state.repos[repo].head}"


@pytest.fixture
def hub(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    """The stand-in Hub with the public dataset repo REPO, which TOKEN may write; HF_REPO and
    HF_TOKEN set; the working directory (and HF_HOME in it) a fresh tmp folder."""
    state = HubState(tokens={TOKEN, PLAIN_TOKEN})
    state.repos[REPO] = Repo()
    home = in_tmp / "hf_home"
    with stand_in(state, home, monkeypatch) as server:
        monkeypatch.setenv("HF_REPO", REPO)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield StandIn(server, home)


def assert_token_nowhere(directory: Path, *results: Result, token: str = TOKEN) -> None:
    """Not in any output, nor in any file under `directory` (run folders, HF_HOME)."""
    for result in results:
        assert token not in result.stdout + result.stderr
    for path in directory.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def assert_one_line(result: Result, line: str, code: int = 1) -> None:
    """One `error:` line starting with `line` on stderr, exit `code`, no traceback."""
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(line), result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_push_list_pull_round_trip(hub: StandIn, in_tmp: Path) -> None:
    ppo = fake_run(in_tmp / "data", PPO)
    dqn = fake_run(in_tmp / "data", DQN, stamp="2025_06_02_080000")
    ppo_dir, dqn_dir = f"{PPO}_2025_06_01_120000", f"{DQN}_2025_06_02_080000"
    results = []

    for folder in (ppo_dir, dqn_dir):
        pushed = invoke(["push", f"data/{folder}"])
        assert pushed.exit_code == 0, pushed.stderr
        assert pushed.stdout == f"pushed data/{folder} to {REPO}: {hub.commit_url()}\n"
        results.append(pushed)
    # the repo holds each folder under data/, less the training state, which stays on disk
    uploaded = {f"data/{ppo_dir}/{p}": c for p, c in shared(ppo).items()}
    uploaded |= {f"data/{dqn_dir}/{p}": c for p, c in shared(dqn).items()}
    assert hub.files() == {".gitattributes": GITATTRIBUTES, **uploaded}
    assert folder_files(in_tmp / "data" / ppo_dir) == ppo

    listed = [invoke(["list", *pattern]) for pattern in ([], ["ppo"], ["*_2025_06_02_*"])]
    assert [r.stdout for r in listed] == [f"{dqn_dir}\n{ppo_dir}\n", f"{ppo_dir}\n", f"{dqn_dir}\n"]
    nothing = invoke(["list", "sac"])
    assert (nothing.exit_code, nothing.stdout) == (0, "")
    assert nothing.stderr == f"no run folder in {REPO} matches 'sac'\n"

    other = in_tmp / "other"
    preview = invoke(["pull", "cartpole", "--list", "--data-dir", str(other)])
    assert preview.stdout == f"{dqn_dir}\n{ppo_dir}\n", preview.stderr
    assert not other.exists()

    pulled = invoke(["pull", f"data/{ppo_dir}", "--data-dir", str(other)])
    assert pulled.exit_code == 0, pulled.stderr
    assert pulled.stdout == f"pulled {ppo_dir} -> {other / ppo_dir}\n"
    assert folder_files(other / ppo_dir) == shared(ppo)  # byte for byte
    assert [p.name for p in other.iterdir()] == [ppo_dir]  # no staging folder left

    preview = invoke(["pull", "cartpole", "--list", "--data-dir", str(other)])
    assert preview.stdout == f"{dqn_dir}\n{ppo_dir} (already in {other / ppo_dir})\n"
    again = invoke(["pull", "cartpole", "--data-dir", str(other)])
    assert again.stdout == (
        f"skip {ppo_dir}: already in {other / ppo_dir}\npulled {dqn_dir} -> {other / dqn_dir}\n"
    )
    assert folder_files(other / dqn_dir) == shared(dqn)
    downloads = len(hub.state.requests)
    skipped = invoke(["pull", "cartpole", "--data-dir", str(other)])
    assert skipped.stdout == "".join(
        f"skip {d}: already in {other / d}\n" for d in (dqn_dir, ppo_dir)
    )
    # listed, nothing downloaded
    assert not [path for _, path in hub.state.requests[downloads:] if "/resolve/" in path]
    assert_token_nowhere(in_tmp, *results, *listed, preview, pulled, again, skipped)


def test_a_pattern_is_a_substring_or_else_a_glob_over_the_whole_name() -> None:
    name = "ppo_cartpole_2025_06_01_120000"
    assert hub_lib.matches(name, "cartpole_2025")
    assert hub_lib.matches(name, "data/ppo_cartpole_2025_06_01_120000/")
    assert hub_lib.matches(name, "")
    assert hub_lib.matches(name, "ppo_*_06_0[1-3]_*")
    assert not hub_lib.matches(name, "cartpole*")  # a glob matches the whole name
    assert not hub_lib.matches(name, "a2c")


def test_the_saved_login_token_pushes_and_a_public_repo_reads_without_one(
    hub: StandIn, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = fake_run(in_tmp / "data", PPO)
    folder = f"{PPO}_2025_06_01_120000"
    monkeypatch.delenv("HF_TOKEN")
    hub.home.mkdir()
    (hub.home / "token").write_text(TOKEN)  # where `hf auth login` saves it
    pushed = invoke(["push", f"data/{folder}"])  # the stand-in refuses a write without a token
    assert pushed.exit_code == 0, pushed.stderr
    (hub.home / "token").unlink()
    assert invoke(["list"]).stdout == f"{folder}\n"
    pulled = invoke(["pull", PPO, "--data-dir", "other"])
    assert pulled.exit_code == 0, pulled.stderr
    assert folder_files(in_tmp / "other" / folder) == shared(files)


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port bound and not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


COMMANDS = {
    "push": ["push", f"data/{PPO}_2025_06_01_120000"],
    "list": ["list"],
    "pull": ["pull", PPO],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("failure", ["no network", "missing repo", "private repo, no token"])
def test_no_network_or_no_repo_is_one_line(
    command: str,
    failure: str,
    hub: StandIn,
    in_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    refused_port: int,
) -> None:
    fake_run(in_tmp / "data", PPO)
    endpoint = hub.endpoint
    if failure == "no network":
        endpoint = f"http://127.0.0.1:{refused_port}"
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        line = f"error: cannot reach the Hub at {endpoint}: "  # then the OS's words
    elif failure == "missing repo":
        monkeypatch.setenv("HF_REPO", "me/no-such-repo")
        line = f"error: dataset repo me/no-such-repo not found at {endpoint} (or it is private and your token cannot read it); create it at {endpoint}/new-dataset, or set HF_REPO to one that exists"
    else:
        hub.state.repos["me/private"] = Repo(private=True)
        monkeypatch.setenv("HF_REPO", "me/private")
        monkeypatch.delenv("HF_TOKEN")
        line = (
            "error: no Hugging Face token: set HF_TOKEN to a token with write access, or run hf auth login"
            if command == "push"
            else f"error: dataset repo me/private not found at {endpoint} (or it is private and no token is set: set HF_TOKEN or run hf auth login)"
        )
    result = invoke(COMMANDS[command])
    assert_one_line(result, line, 2 if line.startswith("error: no Hugging Face token") else 1)
    if failure == "no network":
        assert "Connection refused" in result.stderr
    assert hub.files() == {".gitattributes": GITATTRIBUTES}
    assert run_dirs(in_tmp / "data") == [in_tmp / "data" / f"{PPO}_2025_06_01_120000"]


@pytest.mark.parametrize("token", [TOKEN, PLAIN_TOKEN])
def test_a_refused_token_is_one_line_that_never_shows_the_token(
    token: str, hub: StandIn, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in echoes the Authorization header in its error, as a careless server or proxy
    might; the line keeps the Hub's words and scrubs the token."""
    fake_run(in_tmp / "data", PPO)
    hub.state.tokens.clear()  # the Hub knows no token now
    hub.state.echo_auth = True
    monkeypatch.setenv("HF_TOKEN", token)
    results = [invoke(args) for args in COMMANDS.values()]
    for result in results:
        assert_one_line(
            result,
            "error: the Hub refused the token (401: Invalid credentials in Authorization header (request had Authorization: Bearer hf_***)); set HF_TOKEN to a valid token, or run hf auth login",
        )
    assert_token_nowhere(in_tmp, *results, token=token)


def test_push_takes_a_run_folder_and_needs_hf_repo(
    hub: StandIn, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_run(in_tmp / "data", PPO)
    assert_one_line(
        invoke(["push", "data"]),
        "error: data: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)",
        2,
    )
    monkeypatch.delenv("HF_REPO")
    line = "error: HF_REPO is not set: name the dataset repo that holds the runs, e.g. export HF_REPO=<user>/slm-lab-runs"
    for args in COMMANDS.values():
        assert_one_line(invoke(args), line, 2)
    monkeypatch.setenv("HF_REPO", "slm-lab-runs")
    assert_one_line(
        invoke(["list"]), "error: HF_REPO='slm-lab-runs': expected <user or org>/<dataset name>", 2
    )


# -- run --upload-hf ---------------------------------------------------------------------------
def spec_file(directory: Path, **meta: object) -> str:
    spec = make_spec("ppo", max_frame=64, log_frequency=32)
    spec["meta"].update(meta)
    spec["search"] = {"agent.algorithm.gamma__uniform": [0.9, 0.99]}  # for search mode
    return str(write_spec_file(directory / "spec.json", {PPO: spec}))


@pytest.mark.parametrize("mode", ["dev", "train", "search"])
def test_upload_hf_without_hf_repo_is_refused_before_the_run(
    mode: str, hub: StandIn, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_REPO")
    result = invoke(["run", spec_file(in_tmp, max_trial=2), PPO, mode, "--upload-hf"])
    assert_one_line(result, "error: --upload-hf: HF_REPO is not set", 2)
    assert not (in_tmp / "data").exists()


def test_upload_hf_with_a_missing_repo_is_refused_before_the_run(
    hub: StandIn, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_REPO", "me/typo")
    result = invoke(["run", spec_file(in_tmp), PPO, "train", "--upload-hf"])
    assert_one_line(result, "error: --upload-hf: dataset repo me/typo not found", 1)
    assert not (in_tmp / "data").exists()


@pytest.mark.cli
def test_a_train_run_with_upload_hf_pushes_its_folder_when_it_ends(
    hub: StandIn, in_tmp: Path
) -> None:
    # one session runs in this process (none spawned)
    result = invoke(["run", spec_file(in_tmp), PPO, "train", "--sessions", "1", "--upload-hf"])
    assert result.exit_code == 0, result.stderr
    [run_dir] = run_dirs(in_tmp / "data")
    lines = result.stdout.splitlines()
    assert lines[-2:] == [
        f"run folder: {Path('data') / run_dir.name}",
        f"pushed {Path('data') / run_dir.name} to {REPO}: {hub.commit_url()}",
    ]
    local = folder_files(run_dir)
    assert any(path.endswith(STATE) for path in local)
    prefix = f"data/{run_dir.name}/"
    assert hub.files() == {
        ".gitattributes": GITATTRIBUTES,
        **{prefix + path: content for path, content in shared(local).items()},
    }
    assert_token_nowhere(in_tmp, result)


# -- what travels: data, never code ----------------------------------------------------------
def fake_search(data_dir: Path, name: str) -> tuple[Path, dict[str, bytes]]:
    """A search folder in small: its spec record, a trial's run folder, and Ray Tune's folder
    with the pickles and JSON state Tune writes (never uploaded) beside its plain per-trial
    results (uploaded)."""
    root = data_dir / f"{name}_2025_06_03_090000"
    trial = fake_run(root, f"{name}_t0", stamp="x")  # its files, in a folder of its own
    files = {f"{name}_t0_x/{path}": content for path, content in trial.items()}
    files |= {
        f"{name}_spec.json": b'{"run_info": {"mode": "search"}}',
        "tune/tuner.pkl": b"\x80\x04pickle",
        "tune/trainable.pkl": b"\x80\x04pickle",
        "tune/searcher-state-2025-06-03_09-00-00.pkl": b"\x80\x04pickle",
        "tune/experiment_state-2025-06-03_09-00-00.json": b'{"trial_data": []}',
        "tune/basic-variant-state-2025-06-03_09-00-00.json": b"{}",
        "tune/t0/params.pkl": b"\x80\x04pickle",
        "tune/t0/params.json": b'{"agent.algorithm.gamma": 0.95}',
        "tune/t0/result.json": b'{"frame": 200}\n',
    }
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    return root, files


def test_push_uploads_no_pickle_and_a_pulled_search_folder_is_one(
    hub: StandIn, in_tmp: Path
) -> None:
    from slm_lab.experiment.layout import is_search_dir

    root, files = fake_search(in_tmp / "data", PPO)
    pushed = invoke(["push", f"data/{root.name}"])
    assert pushed.exit_code == 0, pushed.stderr
    sent = {p.removeprefix(f"data/{root.name}/") for p in hub.files() if p != ".gitattributes"}
    assert not [p for p in sent if p.endswith(".pkl") or "state" in p]
    tune_state = {p for p in files if p.startswith("tune/") and "state" in p}
    assert sent == {p for p in shared(files) if not p.endswith(".pkl")} - tune_state
    assert {"tune/t0/params.json", "tune/t0/result.json"} <= sent
    pulled = invoke(["pull", root.name, "--data-dir", "other"])
    assert pulled.exit_code == 0, pulled.stderr
    assert is_search_dir(in_tmp / "other" / root.name)


def commit(hub: StandIn, files: dict[str, bytes]) -> None:
    """Files put in REPO as whoever can write it could (not through slm-lab push)."""
    repo = hub.state.repos[REPO]
    head = f"{len(repo.commits):040x}"
    repo.commits[head] = {**(repo.files("main") or {}), **files}
    repo.head = head


def test_a_pull_leaves_out_pickles_and_training_state_whoever_pushed_them(
    hub: StandIn, in_tmp: Path
) -> None:
    commit(
        hub,
        {
            "data/run_a/a.txt": b"a",
            "data/run_a/tune/tuner.pkl": b"\x80\x04pickle",
            "data/run_a/tune/experiment_state-1.json": b"{}",
            f"data/run_a/model/a{STATE}": b"state",
        },
    )
    pulled = invoke(["pull", "run_a"])
    assert pulled.exit_code == 0, pulled.stderr
    assert folder_files(in_tmp / "data" / "run_a") == {"a.txt": b"a"}


def test_a_repo_path_that_climbs_out_of_its_folder_is_refused_and_nothing_is_written(
    hub: StandIn, in_tmp: Path
) -> None:
    (in_tmp / "data").mkdir()
    commit(hub, {"data/x/ok.txt": b"ok", "data/x/../../../pwned.txt": b"pwned"})
    assert invoke(["list"]).stdout == "x\n"
    result = invoke(["pull", "x"])
    assert_one_line(
        result,
        f"error: {REPO} holds 'data/x/../../../pwned.txt', which a pull would write outside data/x/; nothing pulled",
    )
    assert [p for p in in_tmp.rglob("*") if p.name in ("pwned.txt", "ok.txt")] == []
    assert list((in_tmp / "data").iterdir()) == []  # no staging folder left


def test_a_folder_name_with_glob_characters_is_pulled_as_named(hub: StandIn, in_tmp: Path) -> None:
    """`run[1]` is a glob too (it matches run1) and the folder's whole name: both are pulled,
    each with its own files."""
    commit(hub, {"data/run[1]/a.txt": b"bracketed", "data/run1/b.txt": b"plain"})
    pulled = invoke(["pull", "run[1]"])
    assert pulled.exit_code == 0, pulled.stderr
    assert pulled.stdout == "".join(
        f"pulled {n} -> {Path('data') / n}\n" for n in ("run1", "run[1]")
    )
    assert folder_files(in_tmp / "data" / "run[1]") == {"a.txt": b"bracketed"}
    assert folder_files(in_tmp / "data" / "run1") == {"b.txt": b"plain"}


@pytest.mark.subprocess
def test_the_hub_stand_in_started_as_documented_takes_a_push_list_and_pull(in_tmp: Path) -> None:
    """`python -m slm_lab.dev.hub_stand_in` prints the variables to export; slm-lab run with
    them pushes, lists and pulls through it; Ctrl-C stops it, also started as a background job
    (SIGINT ignored, as a shell or a CI runner starts one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    stand_in = subprocess.Popen(
        [sys.executable, "-m", "slm_lab.dev.hub_stand_in", "--repo", "me/tries"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        head, export = stand_in.stdout.readline(), stand_in.stdout.readline()
        assert head.startswith("Hub stand-in at http://127.0.0.1:"), head + stand_in.stderr.read()
        words = export.split()
        assert words[0] == "export", export
        hub_env = dict(word.split("=", 1) for word in words[1:])
        assert set(hub_env) == {"HF_ENDPOINT", "HF_REPO", "HF_TOKEN"}
        env |= hub_env | {"HF_HOME": str(in_tmp / "hf_home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        files = fake_run(in_tmp / "data", PPO)
        folder = f"{PPO}_2025_06_01_120000"
        outs = []
        for args in (["push", f"data/{folder}"], ["list"], ["pull", PPO, "--data-dir", "other"]):
            done = subprocess.run(
                [SLM_LAB, *args],
                cwd=in_tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_S,
            )
            assert done.returncode == 0, done.stderr
            outs.append(done.stdout)
        assert outs[0].startswith(f"pushed data/{folder} to me/tries: {hub_env['HF_ENDPOINT']}/")
        assert outs[1] == f"{folder}\n"
        assert folder_files(in_tmp / "other" / folder) == shared(files)
    finally:
        stand_in.send_signal(signal.SIGINT)
        stand_in.wait(timeout=COMMAND_S)
    assert stand_in.returncode == 0
