"""`slm-lab run-remote` against a stand-in `dstack` executable (no dstack server can be reached
here): the exact `dstack apply` call and the environment the task gets, what the .dstack/ task
configs then run (in a shell, as dstack does, with a stand-in `uv`), each bad input's one line.
With the optional dependency group (`uv sync --group dstack`), dstack's own code parses the
configs and that call; without it those tests skip."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from conftest import invoke, make_spec, write_spec_file

from slm_lab import ROOT_DIR, SPEC_DIR
from slm_lab.cli import remote
from slm_lab.cli.main import app

UV = os.environ.get("UV", "uv")  # the uv that runs the tests (uv run sets UV)
TIMEOUT_S = 300
CONFIGS = [(gpu, mode) for gpu in (False, True) for mode in remote.MODES]
HF = {"HF_REPO": "someone/slm-lab-runs", "HF_TOKEN": "hf_secret_token"}
# each mode's spec, as typed from slm_lab/ (the tests' working directory), and its -s options:
# values with spaces, brackets and braces, which a shell would split or expand
SPECS = {
    "train": (
        "spec/benchmark/ppo/ppo_classic.json",
        "ppo_classic",
        ["env=Acrobot-v1", "max_frame=3e5", "agent.net.hid_layers=[64, 64]"],
    ),
    "search": (
        "spec/benchmark/ppo/ppo_cartpole_search.json",
        "ppo_cartpole_search",
        ["meta.max_trial=16", "agent.net.actor_optim_spec={name: Adam, lr: 3e-4}"],
    ),
}
# SETS as the task gets it: quoted for a shell where a value needs it
SETS_TEXT = {
    "train": "-s env=Acrobot-v1 -s max_frame=3e5 -s 'agent.net.hid_layers=[64, 64]'",
    "search": "-s meta.max_trial=16 -s 'agent.net.actor_optim_spec={name: Adam, lr: 3e-4}'",
}
REMOTE_SPEC_FILES = {
    "train": "slm_lab/spec/benchmark/ppo/ppo_classic.json",
    "search": "slm_lab/spec/benchmark/ppo/ppo_cartpole_search.json",
}


def write_standin(directory: Path, exit_code: int = 0, wait_for_sigint: bool = False) -> Path:
    """A `dstack` executable in `directory` that records its arguments, working directory and
    environment in `directory`/dstack.json, then exits with `exit_code`; or, `wait_for_sigint`,
    waits for Ctrl-C and detaches as `dstack apply -y` does. Returns the record's path."""
    record = directory / "dstack.json"
    script = directory / "dstack"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""\
            import json, os, signal, sys
            signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})
            record = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
            with open({str(record)!r}, "w") as f:
                json.dump(record, f)
            if {wait_for_sigint!r}:
                got = signal.sigtimedwait({{signal.SIGINT}}, {TIMEOUT_S})
                print("Detached" if got else "no Ctrl-C came", flush=True)
                sys.exit(0 if got else 1)
            sys.exit({exit_code})
            """)
    )
    script.chmod(0o755)
    return record


@pytest.fixture(autouse=True)
def _restore_sigint() -> Iterator[None]:
    """run-remote leaves Ctrl-C to dstack until it exits; the test process gets its own back."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in `dstack` first on PATH, the HF variables set, the working directory at
    slm_lab/ (the specs are typed relative to it); returns the record's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for var, value in HF.items():
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(ROOT_DIR / "slm_lab")
    return write_standin(bin_dir)


def run_remote_args(mode: str, gpu: bool = False, *extra: str) -> list[str]:
    spec_file, spec_name, sets = SPECS[mode]
    gpu_flag = ["--gpu"] if gpu else []
    sets_args = [arg for item in sets for arg in ("-s", item)]
    return ["run-remote", *gpu_flag, spec_file, spec_name, mode, "-n", "my-run", *sets_args, *extra]


def task_env(mode: str) -> dict[str, str]:
    """The variables run-remote passes for SPECS[mode]."""
    return {
        "SPEC_FILE": REMOTE_SPEC_FILES[mode],
        "SPEC_NAME": SPECS[mode][1],
        "MODE": mode,
        "SETS": SETS_TEXT[mode],
    }


def read_record(record: Path) -> dict[str, Any]:
    return json.loads(record.read_text())


def config_of(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT_DIR / remote.CONFIG_DIR / name).read_text())


@pytest.mark.parametrize(("gpu", "mode"), CONFIGS)
def test_run_remote_applies_the_config_of_its_machine_and_mode(
    gpu: bool, mode: str, standin: Path
) -> None:
    result = invoke(run_remote_args(mode, gpu))
    assert result.exit_code == 0, result.output
    config = f".dstack/{'gpu' if gpu else 'cpu'}-{mode}.yml"
    recorded = read_record(standin)
    assert recorded["argv"] == ["apply", "-f", config, "-y", "--name", "my-run"]
    assert recorded["cwd"] == str(ROOT_DIR)
    expected_env = {**task_env(mode), **HF}
    assert {k: recorded["env"].get(k) for k in expected_env} == expected_env
    _, spec_name, _ = SPECS[mode]
    remote_run = (
        f"uv run slm-lab run {REMOTE_SPEC_FILES[mode]} {spec_name} {mode} "
        f"{task_env(mode)['SETS']} --upload-hf"
    )
    assert result.stdout == (
        f"dstack apply -f {config} -y --name my-run  # the run: {remote_run}\n"
    )
    assert HF["HF_TOKEN"] not in result.output


@pytest.mark.parametrize("hf_set", [True, False])
def test_a_dry_run_prints_what_it_would_submit_and_runs_nothing(
    hf_set: bool, standin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without the HF variables (and dstack on PATH, never called): the dstack call,
    the task's environment (the token not shown), its command, and the config as it is."""
    if not hf_set:
        for var in HF:
            monkeypatch.delenv(var)
    result = invoke(run_remote_args("search", True, "--dry-run"))
    assert result.exit_code == 0, result.output
    assert not standin.exists()  # dstack never ran
    not_set = "(not set: export it before submitting)"
    hf_lines = (
        [f"  HF_REPO={HF['HF_REPO']}", "  HF_TOKEN=(set, not shown)"]
        if hf_set
        else [f"  HF_REPO={not_set}", f"  HF_TOKEN={not_set}"]
    )
    config = ".dstack/gpu-search.yml"
    spec_file, spec_name, _ = SPECS["search"]
    assert result.stdout == "\n".join(
        [
            "dry run: nothing is submitted",
            f"would run, in {ROOT_DIR}: dstack apply -f {config} -y --name my-run",
            "with the environment:",
            *(f"  {k}={v}" for k, v in task_env("search").items()),
            *hf_lines,
            f"the machine then runs: uv run slm-lab run {REMOTE_SPEC_FILES['search']} {spec_name} search {SETS_TEXT['search']} --upload-hf",
            f"the task config ({config}):",
            (ROOT_DIR / config).read_text(),
        ]
    )
    assert HF["HF_TOKEN"] not in result.output


def test_a_dry_run_says_dstack_is_missing_and_still_refuses_a_bad_spec(
    standin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "dstack").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    result = invoke(run_remote_args("train", False, "--dry-run"))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].endswith(
        "--name my-run (dstack is not installed here: uv sync --group dstack)"
    )
    bad = invoke(
        [
            "run-remote",
            "spec/benchmark/ppo/ppo_classic.json",
            "ppo_classic",
            "train",
            "-n",
            "my-run",
            "--dry-run",
        ]
    )
    assert (bad.exit_code, bad.stdout) == (2, "")
    assert bad.stderr.startswith("error: ppo_classic.env.name: unresolved ${env}")


def test_detach_submits_and_returns(standin: Path) -> None:
    result = invoke(run_remote_args("train", False, "--detach"))
    assert result.exit_code == 0, result.output
    assert read_record(standin)["argv"] == [
        "apply",
        "-f",
        ".dstack/cpu-train.yml",
        "-y",
        "--name",
        "my-run",
        "--detach",
    ]


def test_dstack_failing_is_run_remote_failing_with_its_exit_code(standin: Path) -> None:
    write_standin(standin.parent, exit_code=3)
    result = invoke(run_remote_args("train"))
    assert result.exit_code == 3
    assert standin.exists()
    assert "error:" not in result.output  # dstack said why, on its own output


def test_configs_pass_the_task_what_run_remote_sets() -> None:
    """Each config's env names exactly the variables run-remote sets and the HF ones, without
    values, so dstack takes them from the environment run-remote gives it."""
    for gpu, mode in CONFIGS:
        config = config_of(Path(remote.config_file(gpu, mode)).name)
        assert config["type"] == "task"
        assert config["env"] == ["SPEC_FILE", "SPEC_NAME", "MODE", "SETS", *remote.HF_VARS]
        assert config["repos"] == ["..:/workflow"] and config["working_dir"] == "/workflow"
        assert config["retry"] == {"on_events": ["no-capacity"], "duration": "1h"}
        assert (config["resources"]["gpu"] != 0) == gpu


def run_task_commands(config: str, shell: str, env: dict[str, str], tmp_path: Path) -> list:
    """The config's commands as dstack runs them (joined with &&, in one shell: the runner's
    `shell -i -c`, here without -i), with a stand-in `uv` first on PATH that records its
    arguments; returns them, one list per call."""
    bin_dir = tmp_path / "task_bin"
    bin_dir.mkdir()
    calls = tmp_path / "uv_calls.jsonl"
    uv = bin_dir / "uv"
    uv.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(calls)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    uv.chmod(0o755)
    commands = " && ".join(config_of(config)["commands"])
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    proc = subprocess.run(
        [shell, "-c", commands],
        cwd=tmp_path,
        env={"PATH": path, "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()]


@pytest.mark.parametrize("shell", ["bash", "sh"])
@pytest.mark.parametrize(("gpu", "mode"), CONFIGS)
def test_the_task_runs_the_spec_with_its_options_as_given(
    gpu: bool, mode: str, shell: str, standin: Path, tmp_path: Path
) -> None:
    """What run-remote sends reaches `slm-lab run` on the machine argument for argument: a
    -s value with spaces, brackets or braces stays one argument."""
    assert invoke(run_remote_args(mode, gpu)).exit_code == 0
    sent = read_record(standin)["env"]
    env = {k: sent[k] for k in [*task_env(mode), *remote.HF_VARS]}
    calls = run_task_commands(Path(remote.config_file(gpu, mode)).name, shell, env, tmp_path)
    _, spec_name, sets = SPECS[mode]
    sets_args = [arg for item in sets for arg in ("-s", item)]
    run = ["run", "slm-lab", "run", REMOTE_SPEC_FILES[mode], spec_name, mode, *sets_args]
    assert calls == [["sync", "--frozen"], [*run, "--upload-hf"]]
    # and `slm-lab run` takes them so: the spec, its -s values, --upload-hf
    command = typer.main.get_command(app)
    with command.make_context("slm-lab", calls[1][2:]) as ctx:
        run_command = command.get_command(ctx, "run")
        params = run_command.make_context("run", calls[1][3:], parent=ctx).params
    assert (params["spec_file"], params["spec_name"], params["mode"]) == (
        REMOTE_SPEC_FILES[mode],
        spec_name,
        mode,
    )
    assert params["set_"] == sets and params["upload_hf"]


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_the_task_keeps_any_quoted_value_one_argument(shell: str, tmp_path: Path) -> None:
    values = ['a=it\'s "quoted"', "b=$HOME `id` $(id) *", "c=two\nlines", "d="]
    sets = shlex.join(arg for value in values for arg in ("-s", value))
    env = {"SPEC_FILE": "x.json", "SPEC_NAME": "x", "MODE": "train", "SETS": sets, **HF}
    calls = run_task_commands("cpu-train.yml", shell, env, tmp_path)
    sets_args = [arg for value in values for arg in ("-s", value)]
    assert calls[1] == ["run", "slm-lab", "run", "x.json", "x", "train", *sets_args, "--upload-hf"]


# -- bad input: (run-remote arguments, environment changes, the one line it prints) --------------
TMP = "<tmp>"  # stands for the test's tmp_path in a case
OUTSIDE_SPEC = f"{TMP}/outside.json"
BAD_INPUTS: dict[str, tuple[list[str], dict[str, str | None], str]] = {
    "unknown_mode": (
        ["spec/benchmark/ppo/ppo_classic.json", "ppo_classic", "trian", "-s", "env=Acrobot-v1"],
        {},
        "mode 'trian': run-remote runs train or search; did you mean train? (dev, enjoy@ and train@ run here, with slm-lab run)",
    ),
    "dev_mode": (
        ["spec/benchmark/ppo/ppo_classic.json", "ppo_classic", "dev", "-s", "env=Acrobot-v1"],
        {},
        "mode 'dev': run-remote runs train or search (dev, enjoy@ and train@ run here, with slm-lab run)",
    ),
    "bad_spec": (
        ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train"]
        + ["-s", "agent.algorithm.clip_vlos=true"],
        {},
        "agent.algorithm.clip_vlos: unknown key; did you mean clip_vloss?",
    ),
    "unfilled_template": (
        ["spec/benchmark/ppo/ppo_classic.json", "ppo_classic", "train"],
        {},
        "ppo_classic.env.name: unresolved ${env}; pass it with -s env=VALUE",
    ),
    "search_without_search_block": (
        ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "search"],
        {},
        'search: required by search mode, missing; add a search block, e.g. "search": {"agent.algorithm.gamma__uniform": [0.98, 0.999]}',
    ),
    "spec_outside_the_repository": (
        [OUTSIDE_SPEC, "ppo_cartpole", "train"],
        {},
        f"{OUTSIDE_SPEC}: outside the repository ({ROOT_DIR}), which is what the remote machine gets; put the spec file in it",
    ),
    "no_hf_repo": (
        ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train"],
        {"HF_REPO": None},
        "HF_REPO not set: the remote run uploads its folder to the Hugging Face dataset repo HF_REPO with the token HF_TOKEN (export HF_REPO=<user>/<dataset> HF_TOKEN=hf_...)",
    ),
    "no_hf_vars": (
        ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train"],
        {"HF_REPO": "", "HF_TOKEN": None},
        "HF_REPO and HF_TOKEN not set: the remote run uploads its folder to the Hugging Face dataset repo HF_REPO with the token HF_TOKEN (export HF_REPO=<user>/<dataset> HF_TOKEN=hf_...)",
    ),
    "no_dstack": (
        ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train"],
        {"PATH": "<no dstack>"},
        "dstack: not found; install it with: uv sync --group dstack (then point it at your dstack server: https://dstack.ai/docs/quickstart)",
    ),
}
BAD_RUN_NAMES = ["My_Run", "1run", "r", "a" * 42]


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_before_dstack(
    case: str, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, env, line = BAD_INPUTS[case]
    write_spec_file(tmp_path / "outside.json", {"ppo_cartpole": make_spec("ppo")})
    for var, value in env.items():
        if value is None:
            monkeypatch.delenv(var)
        elif value == "<no dstack>":  # PATH without the stand-in, nor a dstack of the venv's
            path = [
                d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "dstack").exists()
            ]
            monkeypatch.setenv(var, os.pathsep.join(path))
            assert shutil.which("git") is not None
        else:
            monkeypatch.setenv(var, value)
    args = [arg.replace(TMP, str(tmp_path)) for arg in args]
    result = invoke(["run-remote", *args, "-n", "my-run"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"error: {line.replace(TMP, str(tmp_path))}"]
    assert not standin.exists()


@pytest.mark.parametrize("run_name", BAD_RUN_NAMES)
def test_a_run_name_dstack_refuses_is_one_line(run_name: str, standin: Path) -> None:
    args = ["spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train", "-n", run_name]
    result = invoke(["run-remote", *args])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: -n {run_name}: a dstack run name is 2 to 41 lowercase letters, digits and dashes, starting with a letter (e.g. ppo-hopper)"
    ]
    assert not standin.exists()


def test_the_run_name_is_required(standin: Path) -> None:
    result = invoke(["run-remote", "spec/benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", "train"])
    assert result.exit_code == 2
    assert "Missing option '--name' / '-n'" in result.stderr
    assert not standin.exists()


# -- the checkout the machine gets: a repository of the test's own in place of this one ----------
def make_repo(root: Path, git: bool = True, configs: bool = True) -> Path:
    """A repository like this one: the .dstack/ configs, data/ ignored, a spec in specs/ and in
    data/ (neither committed)."""
    root.mkdir()
    if configs:
        shutil.copytree(ROOT_DIR / remote.CONFIG_DIR, root / remote.CONFIG_DIR)
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("data/\n")
    for folder in ("specs", "data"):
        (root / folder).mkdir()
        write_spec_file(root / folder / "mine.json", {"ppo_cartpole": make_spec("ppo")})
    return root


@pytest.fixture
def in_repo(standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the repository run-remote takes, the stand-in's record), the working directory in it."""
    repo = tmp_path.resolve() / "repo"  # resolved, as ROOT_DIR is
    monkeypatch.setattr(remote, "ROOT_DIR", repo)
    return repo, standin


def test_an_untracked_spec_in_the_repository_goes_by_its_path_in_it(
    in_repo: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, record = in_repo
    make_repo(repo)
    monkeypatch.chdir(repo / "specs")
    result = invoke(["run-remote", "mine.json", "ppo_cartpole", "train", "-n", "my-run"])
    assert result.exit_code == 0, result.output
    assert read_record(record)["env"]["SPEC_FILE"] == "specs/mine.json"
    assert read_record(record)["cwd"] == str(repo)


@pytest.mark.parametrize(
    ("git", "configs", "spec_file", "line"),
    [
        (
            True,
            True,
            "data/mine.json",
            "data/mine.json: git ignores it, so the remote machine does not get it (dstack sends the repository's git checkout); move it out of the ignored folder",
        ),
        (
            False,
            True,
            "specs/mine.json",
            "{repo}: not a git repository; dstack sends the remote machine a git checkout, so run-remote runs from a git clone of SLM Lab",
        ),
        (
            True,
            False,
            "specs/mine.json",
            ".dstack/cpu-train.yml: not found in {repo}; run-remote runs from a git clone of SLM Lab, which has the dstack task configs",
        ),
    ],
    ids=["ignored_spec", "no_git", "no_configs"],
)
def test_a_checkout_the_machine_cannot_run_from_is_one_line(
    git: bool,
    configs: bool,
    spec_file: str,
    line: str,
    in_repo: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, record = in_repo
    make_repo(repo, git, configs)
    monkeypatch.chdir(repo)
    result = invoke(["run-remote", spec_file, "ppo_cartpole", "train", "-n", "my-run"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {line.format(repo=repo)}"]
    assert not record.exists()


# -- dstack's own code, when the optional group is installed ------------------------------------
@pytest.mark.parametrize(("gpu", "mode"), CONFIGS)
def test_dstack_parses_the_call_and_resolves_the_task_env(
    gpu: bool, mode: str, standin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded call through dstack's own `apply` argument parser, configuration loader and
    task configurator (all that `dstack apply` does before it asks the server for a plan): the
    config parses as a task, the run gets its name, every env variable its value."""
    pytest.importorskip("dstack")
    import argparse

    from dstack._internal.cli.commands.apply import ApplyCommand
    from dstack._internal.cli.services.configurators import (
        get_apply_configurator_class,
        load_apply_configuration,
    )
    from dstack._internal.core.models.configurations import TaskConfiguration
    from dstack._internal.core.models.profiles import RetryEvent

    assert invoke(run_remote_args(mode, gpu)).exit_code == 0
    recorded = read_record(standin)
    parser = argparse.ArgumentParser()
    ApplyCommand.register(parser.add_subparsers())
    args, extra = parser.parse_known_args(recorded["argv"])
    assert args.yes and not args.detach
    monkeypatch.chdir(recorded["cwd"])
    _, conf = load_apply_configuration(args.configuration_file)
    assert isinstance(conf, TaskConfiguration)
    configurator = get_apply_configurator_class(conf.type)(api_client=None)
    configurator_args, unknown = configurator.get_parser().parse_known_args(extra)
    assert unknown == []
    for var in [*task_env(mode), *remote.HF_VARS]:  # dstack apply's environment, as recorded
        monkeypatch.setenv(var, recorded["env"][var])
    configurator.apply_args(conf, configurator_args)
    assert conf.name == "my-run"
    assert conf.env.as_dict() == {**task_env(mode), **HF}
    assert (conf.resources.gpu.count.min >= 1) == gpu and conf.resources.gpu.count.max == int(gpu)
    assert conf.retry.on_events == [RetryEvent.NO_CAPACITY]
    [repo] = conf.repos
    assert (Path(recorded["cwd"]) / ".dstack" / repo.local_path).resolve() == ROOT_DIR


# -- the console script and a fresh process ------------------------------------------------------
@pytest.mark.subprocess
def test_run_remote_through_uv_run_leaves_ctrl_c_to_dstack(tmp_path: Path) -> None:
    """`uv run slm-lab run-remote --gpu ...` as typed, dstack waiting on its run: Ctrl-C (SIGINT
    to the whole process group, as a terminal sends it) is dstack's, which detaches; run-remote
    exits with dstack's code, no traceback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = write_standin(bin_dir, wait_for_sigint=True)
    # uv run puts the project environment's bin first on PATH, where `uv sync --group dstack`
    # installs the real dstack: env puts the stand-in before it
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    spec_file, spec_name, sets = SPECS["train"]
    sets_args = [arg for item in sets for arg in ("-s", item)]
    args = ["--gpu", f"slm_lab/{spec_file}", spec_name, "train", "-n", "my-run", *sets_args]
    proc = subprocess.Popen(
        [UV, "run", "env", f"PATH={path}", "slm-lab", "run-remote", *args],
        cwd=ROOT_DIR,
        env={**os.environ, **HF, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert record.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, stderr
    recorded = read_record(record)
    assert recorded["argv"] == ["apply", "-f", ".dstack/gpu-train.yml", "-y", "--name", "my-run"]
    assert recorded["cwd"] == str(ROOT_DIR)
    expected_env = {**task_env("train"), **HF}
    assert {k: recorded["env"].get(k) for k in expected_env} == expected_env
    assert stdout.splitlines()[-1] == "Detached"
    assert "Traceback" not in stderr and HF["HF_TOKEN"] not in stdout + stderr


@pytest.mark.subprocess
def test_run_remote_imports_no_torch(tmp_path: Path) -> None:
    """A fresh process that submits a run: the spec checked, dstack called, torch never loaded.
    The spec named from slm_lab/spec/ goes by its path in the repository."""
    record = write_standin(tmp_path)
    spec_file = str(Path(REMOTE_SPEC_FILES["train"]).relative_to("slm_lab/spec"))
    assert (SPEC_DIR / spec_file).is_file()
    _, spec_name, sets = SPECS["train"]
    sets_args = [arg for item in sets for arg in ("-s", item)]
    args = ["run-remote", spec_file, spec_name, "train", "-n", "my-run", *sets_args]
    code = (
        "import sys\n"
        "from slm_lab.cli.main import app\n"
        f"code = app({args!r}, standalone_mode=False)\n"
        "print(code, 'torch' in sys.modules)\n"
    )
    path = f"{tmp_path}{os.pathsep}{os.environ['PATH']}"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, **HF, "PATH": path},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "None False"
    assert read_record(record)["env"]["SPEC_FILE"] == REMOTE_SPEC_FILES["train"]
