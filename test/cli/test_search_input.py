"""`search` mode's bad input through the CLI: each mistake is one `error:` line, exit 2, nothing
written, and Ray never imported (these need no Ray: validation stops them first)."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke, make_spec, run_dirs, write_spec_file

NAME = "ppo_search"
GAMMA = "agent.algorithm.gamma"


def search_spec(search: Any = None, **meta: Any) -> dict[str, Any]:
    spec = make_spec("ppo", max_frame=400, max_session=2)
    spec["meta"].update(max_trial=2, **meta)
    if search is not None:
        spec["search"] = search
    return spec


def run_search(directory: Path, spec: dict[str, Any], *extra: str) -> tuple[int, list[str], str]:
    path = write_spec_file(directory / "search.json", {NAME: spec})
    result = invoke(["run", str(path), NAME, "search", *extra])
    return result.exit_code, result.stderr.splitlines(), result.stdout


BAD_SEARCHES: list[tuple[Any, str]] = [
    ({f"{GAMMA}__grid_search": [0.9, 0.99]}, f"search.{GAMMA}__grid_search: grid_search cannot be sampled by Optuna; use {GAMMA}__choice with the same values"),
    ({f"{GAMMA}__unifrom": [0.9, 0.99]}, f"search.{GAMMA}__unifrom: 'unifrom' is not a search distribution; did you mean uniform?"),
    ({f"{GAMMA}__uniform": [0.9]}, f"search.{GAMMA}__uniform: expected 2 arguments [lo, hi], got 1: [0.9]"),
    ({"agent.algorithm.training_epoch__qrandint": [1, 8]}, "search.agent.algorithm.training_epoch__qrandint: expected 3 arguments [lo, hi, q], got 2: [1, 8]"),
    ({f"{GAMMA}__randn": [0.99]}, f"search.{GAMMA}__randn: expected 2 arguments [mean, sd], got 1: [0.99]"),
    ({f"{GAMMA}__choice": []}, f"search.{GAMMA}__choice: expected at least one value to choose from, got []"),
    ({f"{GAMMA}__uniform": [0.99, 0.9]}, f"search.{GAMMA}__uniform: lo must be below hi, got [0.99, 0.9]"),
    ({"agent.net.actor_optim_spec.lr__loguniform": [0, 0.01]}, "search.agent.net.actor_optim_spec.lr__loguniform: lo must be > 0 for a log-scale distribution, got 0"),
    ({"agent.algorithm.training_epoch__randint": [1.5, 4]}, "search.agent.algorithm.training_epoch__randint: lo must be an int, got 1.5"),
    ({f"{GAMMA}__quniform": [0.9, 0.99, 0]}, f"search.{GAMMA}__quniform: q must be > 0, got 0"),
    ({f"{GAMMA}__randn": [0.99, -0.01]}, f"search.{GAMMA}__randn: sd must be > 0, got -0.01"),
    ({f"{GAMMA}__quniform": [0.9, 0.99, 0.02]}, f"search.{GAMMA}__quniform: hi 0.99 is not a multiple of q 0.02, which Ray Tune refuses; use 0.98 or 1.0"),
    ({"agent.algorithm.training_epoch__qrandint": [1, 7, 8]}, "search.agent.algorithm.training_epoch__qrandint: no multiple of q 8 lies in [1, 7], so there is nothing to draw; widen the bounds or use a smaller q"),
    ({"agent.algorithm.gammma__uniform": [0.9, 0.99]}, "search.agent.algorithm.gammma__uniform: agent.algorithm.gammma is not a spec key; did you mean gamma?"),
    ({"agent.algorithm.training_frequency__randint": [1, 8]}, "search.agent.algorithm.training_frequency__randint: PPO does not read training_frequency (read by Reinforce, ActorCritic, SARSA,"),
    ({"agent.memory.batch_size__choice": [16, 32]}, "search.agent.memory.batch_size__choice: OnPolicyBatchReplay does not read batch_size (read by Replay, PrioritizedReplay)"),
    ({"agent.net.lr_decay__choice": [0.9]}, "search.agent.net.lr_decay__choice: agent.net.lr_decay is not read (SLM Lab v5 never read it)"),
    ({"agent.net.actor_optim_spec.lrr__loguniform": [1e-4, 1e-3]}, "search.agent.net.actor_optim_spec.lrr__loguniform: Adam takes no argument lrr; did you mean lr?"),
    ({"agent.net.optim_spec.lr__loguniform": [1e-4, 1e-3]}, "search.agent.net.optim_spec.lr__loguniform: agent.net.optim_spec is not set in the spec (each net has its own); did you mean agent.net.actor_optim_spec.lr or agent.net.critic_optim_spec.lr?"),
    ({"meta.max_trial__choice": [2, 4]}, "search.meta.max_trial__choice: meta.max_trial sets up the search; it cannot be searched"),
    ({"name__choice": ["a", "b"]}, "search.name__choice: not a spec path a search can set"),
    ({"env.gravity__uniform": [9, 10]}, "search.env.gravity__uniform: the value 9 does not fit: env.gravity: unknown key (not an SLM Lab env key, nor an argument of CartPole-v1)"),
    ({"agent.algorithm.training_epoch__uniform": [1, 8]}, "search.agent.algorithm.training_epoch__uniform: the value 3.228169203286535 does not fit: agent.algorithm.training_epoch: expected int, got 3.228169203286535"),
    ({f"{GAMMA}__uniform": [0.9, 1.5]}, f"search.{GAMMA}__uniform: the value 1.5 does not fit: agent.algorithm.gamma: must be in (0, 1], got 1.5"),
    ({"agent.algorithm.minibatch_size__choice": [32, 1000]}, "search.agent.algorithm.minibatch_size__choice: the value 1000 does not fit: agent.algorithm.minibatch_size: 1000 is larger than the batch of 64"),
    ({"agent": {"algorithm": {"gamma": [0.9, 0.99]}}}, f"search.{GAMMA}: a search leaf is named <spec path>__<distribution>, e.g. agent.algorithm.gamma__uniform"),
    ({f"{GAMMA}__uniform": [0.9, 0.99], "agent": {"algorithm": {"gamma__choice": [0.9]}}}, f"search.{GAMMA}__choice: {GAMMA} is searched twice (also search.{GAMMA}__uniform)"),
    ([], "search: expected a mapping of <spec path>__<distribution>, got []"),
]  # fmt: skip


@pytest.mark.parametrize(("search", "line"), BAD_SEARCHES)
def test_bad_search_block_is_one_line_and_writes_nothing(
    search: Any, line: str, in_tmp: Path
) -> None:
    code, err, out = run_search(in_tmp, search_spec(search))
    assert (code, out, len(err)) == (2, "", 1), err
    assert err[0].startswith(f"error: {line}"), err[0]
    assert run_dirs(in_tmp / "data") == []


GOOD = {f"{GAMMA}__uniform": [0.9, 0.99]}


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"search": None},
            'search: required by search mode, missing; add a search block, e.g. "search": {"agent.algorithm.gamma__uniform": [0.98, 0.999]}',
        ),
        (
            {"search_resources": {"cpu": 10**4}},
            "meta.search_resources.cpu: a trial asks for 10000 CPUs, this machine has ",
        ),
        (
            {"max_session": 10**4},
            "meta.search_resources.cpu: a trial asks for 10000 CPUs (one per session by default), this machine has ",
        ),
        (
            {"search_resources": {"cpu": 1, "gpu": 1}},
            "meta.search_resources.gpu: a trial asks for 1 GPUs, this machine has 0",
        ),
        (
            {"search_scheduler": {"grace_period": 400}},
            "meta.search_scheduler.grace_period: 400 frames is not below env.max_frame 400: no trial could be stopped early",
        ),
        (
            {"search_scheduler": {"grace_period": 100, "reduction_factor": 1}},
            "meta.search_scheduler.reduction_factor: must be > 1, got 1",
        ),
        (
            {"search_scheduler": {"grace_perod": 100}},
            "meta.search_scheduler.grace_perod: unknown key; did you mean grace_period?",
        ),
        ({"search_resources": {"cpu": 0}}, "meta.search_resources.cpu: must be > 0, got 0"),
    ],
)
def test_search_run_settings_are_checked_before_ray(
    changes: dict[str, Any], line: str, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever the machine has
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    search = changes.pop("search", GOOD)
    code, err, out = run_search(in_tmp, search_spec(search, **changes))
    assert (code, out, len(err)) == (2, "", 1), err
    assert err[0].startswith(f"error: {line}"), err[0]
    assert run_dirs(in_tmp / "data") == []


@pytest.mark.cli
def test_search_folder_mistakes(in_tmp: Path) -> None:
    spec = search_spec(GOOD)
    path = str(write_spec_file(in_tmp / "search.json", {NAME: spec}))
    # one session runs in this process (none spawned): a train folder all the same
    args = ["run", path, NAME, "train", "--max-frame", "100", "--sessions", "1"]
    assert invoke(args).exit_code == 0
    [train_dir] = run_dirs(in_tmp / "data")
    cases = [
        (
            [f"search@{train_dir}"],
            f"error: {train_dir}: not a search folder (expected a folder made by slm-lab run ... search, with <spec_name>_spec.json and tune/)",
        ),
        (["search@latest"], f"error: search@latest: no search of {NAME} in data/"),
        (
            ["search@latest", "-s", "meta.max_trial=3"],
            "error: search@latest continues the spec recorded in the run folder: -s, --sessions and --seed do not apply",
        ),
        (["serch"], "error: mode 'serch': unknown; one of dev, train, search, "),
    ]
    for args, line in cases:
        result = invoke(["run", path, NAME, *args])
        assert (result.exit_code, len(result.stderr.splitlines())) == (2, 1), result.stderr
        assert result.stderr.startswith(line), result.stderr
    assert run_dirs(in_tmp / "data") == [train_dir]


@pytest.mark.subprocess
def test_check_accepts_every_distribution_and_imports_no_ray(tmp_path: Path) -> None:
    """v5's flat and nested forms, each of Ray Tune's distributions; neither `check` nor a
    search refused by validation loads Ray."""
    search = {
        f"{GAMMA}__uniform": [0.9, 0.99],
        "agent.algorithm.lam__quniform": [0.9, 0.99, 0.01],
        "agent.net.actor_optim_spec.lr__loguniform": [1e-4, 1e-2],
        "agent.net.critic_optim_spec.lr__qloguniform": [1e-4, 1e-2, 1e-4],
        "agent.algorithm.val_loss_coef__randn": [0.5, 0.1],
        "agent.algorithm.clip_eps_spec.start_val__qrandn": [0.2, 0.05, 0.01],
        "agent.algorithm.training_epoch__randint": [1, 4],
        "agent.algorithm.time_horizon__qrandint": [32, 64, 16],
        "env.num_envs__lograndint": [1, 4],
        "agent": {
            "algorithm": {"minibatch_size__qlograndint": [8, 32, 8]},
            "net": {"hid_layers__choice": [[16], [32, 32]]},
        },
        "meta.num_threads__choice": [1],
    }
    good = write_spec_file(tmp_path / "good.json", {NAME: search_spec(search)})
    bad = write_spec_file(tmp_path / "bad.json", {NAME: search_spec({f"{GAMMA}__x": [1]})})
    code = (
        "import sys\n"
        "from slm_lab.cli.main import app\n"
        f"app(['check', {str(good)!r}], standalone_mode=False)\n"
        "try:\n"
        f"    app(['run', {str(bad)!r}, {NAME!r}, 'search'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('ray' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.stdout.splitlines() == [f"ok: {NAME}", "False"], out.stderr
    assert out.stderr.splitlines() == [
        f"error: search.{GAMMA}__x: 'x' is not a search distribution (one of uniform, quniform, loguniform, qloguniform, randn, qrandn, randint, qrandint, lograndint, qlograndint, choice)"
    ]
    assert not (tmp_path / "data").exists()
