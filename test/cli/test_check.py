"""`slm-lab check` through the CLI: missing keys, every spec of a file reported, template specs,
and the SLM Lab v5 spec keys and features (known, or one line saying they are not available)."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke, make_spec, set_path, write_spec_file

from slm_lab import SPEC_DIR
from slm_lab.cli import main
from slm_lab.lib import util

CROSSQ = {
    "name": "CrossQ",
    "gamma": 0.99,
    "training_frequency": 1,
    "policy_delay": 3,
    "log_alpha_max": 1.0,
}
SAC_MEMORY = {"name": "Replay", "batch_size": 32, "max_size": 1000, "use_cer": False}
SAC_NET = {
    "type": "MLPNet",
    "hid_layers": [16],
    "hid_layers_activation": "relu",
    "actor_optim_spec": {"name": "Adam", "lr": 3e-4},
    "critic_optim_spec": {"name": "Adam", "lr": 3e-4},
}


def crossq_spec() -> dict[str, Any]:
    spec = make_spec("random", "Pendulum-v1")
    spec["agent"] = {
        "name": "CrossQ",
        "algorithm": dict(CROSSQ),
        "memory": dict(SAC_MEMORY),
        "net": dict(SAC_NET),
        "critic_net": {**SAC_NET, "batch_renorm": True},
    }
    return spec


def check(
    in_tmp: Path, specs: dict[str, Any] | str, suffix: str = ".json"
) -> tuple[int, list, list]:
    path = write_spec_file(in_tmp / f"specs{suffix}", specs)
    result = invoke(["check", str(path)])
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


def console(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed `slm-lab` script in a fresh process."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "slm-lab"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )


def without(spec: dict[str, Any], path: str) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    *parents, leaf = path.split(".")
    node = spec
    for key in parents:
        node = node[key]
    del node[leaf]
    return spec


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("env.name", "env.name: required (str), missing"),
        ("env.max_frame", "env.max_frame: required (int), missing"),
        ("agent.algorithm.name", "agent.algorithm.name: required (str), missing"),
        ("agent.algorithm", "agent.algorithm: required (mapping), missing"),
        (
            "agent.net.type",
            "agent.net.type: required (one of MLPNet, ConvNet, RecurrentNet, DuelingMLPNet, DuelingConvNet, TorchArcNet), missing",
        ),
        ("meta", "meta: required (mapping), missing"),
        (
            "agent.algorithm.clip_eps_spec.name",
            "clip_eps_spec.name: required (one of no_decay, linear_decay, rate_decay, periodic_decay), missing",
        ),
        (
            "agent.algorithm.entropy_coef_spec.start_val",
            "entropy_coef_spec.start_val: required (float), missing",
        ),
    ],
)
def test_missing_required_key_is_one_line_and_every_spec_is_reported(
    path: str, line: str, in_tmp: Path
) -> None:
    good = make_spec("ppo")
    code, out, err = check(in_tmp, {"a": without(good, path), "b": good, "c": without(good, path)})
    assert code == 2
    assert out == ["ok: b"]
    assert len(err) == 2 and all(e.startswith(("error: a: ", "error: c: ")) for e in err)
    assert line in err[0] and line in err[1]


def test_run_without_env_name_is_one_line(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"a": without(make_spec("ppo"), "env.name")})
    result = invoke(["run", str(path), "a", "dev"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: env.name: required (str), missing"]
    assert not (in_tmp / "data").exists()


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"env.name": "ALE/Pongg-v5"},
            "env.name: 'ALE/Pongg-v5' is not an ALE v5 game; did you mean ALE/Pong-v5?",
        ),
        (
            {"env.name": "VideoPinball-v0"},
            "env.name: VideoPinball-v0: a legacy Atari id; SLM Lab runs ALE v5: use ALE/VideoPinball-v5 (frameskip 4 and sticky actions 0.25 by default; env.frameskip and env.repeat_action_probability set them)",
        ),
        (
            {"env.name": "PongNoFrameskip-v4"},
            "env.name: PongNoFrameskip-v4: a legacy Atari id; SLM Lab runs ALE v5: use ALE/Pong-v5",
        ),
        ({"agent.algorithm.symlog": True}, "agent.algorithm.symlog: symlog value compression"),
        ({"agent.algorithm.spectral_norm": True}, "spectral normalization of the critic"),
    ],
)
def test_v5_features_not_available_yet_are_named(
    changes: dict[str, Any], line: str, in_tmp: Path
) -> None:
    spec = make_spec("ppo")
    for path, value in changes.items():
        set_path(spec, path, value)
    code, out, err = check(in_tmp, {"v5": spec})
    assert (code, out, len(err)) == (2, [], 1)
    assert line in err[0]


# every key SLM Lab v5's benchmark specs (and v4's, for the torch schedulers) use that is not
# in the minimal specs above
V5_KEYS: list[tuple[str, str, Any]] = [
    ("ppo", "agent.algorithm.normalize_advantages", "percentile"),
    ("ppo", "agent.algorithm.normalize_advantages", "standardize"),
    ("ppo", "agent.algorithm.spectral_norm", False),
    ("ppo", "agent.algorithm.symlog", False),
    ("ppo", "meta.rigorous_eval", 0),
    ("ppo", "meta.eval_frequency", 1000),
    ("ppo", "meta.search_resources", {"cpu": 1, "gpu": 0.25}),
    ("ppo", "meta.search_scheduler", {"grace_period": 10000, "reduction_factor": 3}),
    (
        "ppo",
        "agent.net.lr_scheduler_spec",
        {"name": "LinearToMin", "frame": 4e2, "min_factor": 0.033},  # the run's max_frame
    ),
    ("ppo", "agent.net.lr_scheduler_spec", None),
    ("ppo", "agent.net.actor_optim_spec", {"name": "Adam", "lr": 3e-4, "eps": 1e-5}),
    ("ppo", "agent.net.actor_optim_spec", {"name": "Adam", "lr": 3e-4, "betas": [0.9, 0.999]}),
    ("ppo", "agent.net.critic_optim_spec", {"name": "AdamW", "lr": 3e-4, "eps": 1e-5}),
    (
        "ppo",
        "agent.net.critic_optim_spec",
        {"name": "RMSprop", "lr": 7e-4, "alpha": 0.99, "eps": 1e-5},
    ),
    ("ppo", "agent.net.loss_spec", {"name": "SmoothL1Loss"}),
    ("ppo", "agent.net.loss_spec", {"name": "CrossEntropyLoss"}),
    ("ppo", "agent.net.lr_scheduler_spec", {"name": "StepLR", "step_size": 1000, "gamma": 0.9}),
    (
        "ppo",
        "agent.net.lr_scheduler_spec",
        {"name": "MultiStepLR", "milestones": [100, 200], "gamma": 0.5},
    ),
    ("crossq", "agent.algorithm.log_alpha_max", 2.0),
    ("crossq", "agent.algorithm.log_alpha_min", -5.0),
]


@pytest.mark.parametrize(("algo", "path", "value"), V5_KEYS)
def test_v5_spec_keys_are_known(algo: str, path: str, value: Any, in_tmp: Path) -> None:
    spec = crossq_spec() if algo == "crossq" else make_spec(algo)
    set_path(spec, path, value)
    code, out, err = check(in_tmp, {"v5": spec})
    assert (code, out, err) == (0, ["ok: v5"], [])


@pytest.mark.parametrize(
    ("path", "meaning"),
    [("agent.algorithm.clip_val_loss", "clip_vloss"), ("meta.num_gpus", "agent.net.gpu")],
)
def test_v5_keys_v5_never_read_warn(path: str, meaning: str, in_tmp: Path) -> None:
    spec = make_spec("ppo")
    set_path(spec, path, 1 if path == "meta.num_gpus" else False)
    code, out, err = check(in_tmp, {"v5": spec})
    assert (code, out, len(err)) == (0, ["ok: v5"], 1)
    assert err[0].endswith(
        f"{path}: ignored (SLM Lab v5 never read it); its likely meaning is {meaning}"
    )


@pytest.mark.box2d
def test_lunar_continuous_kwarg_passes_to_gymnasium(in_tmp: Path) -> None:
    spec = make_spec("ppo", "LunarLander-v3")
    spec["env"]["continuous"] = True
    assert check(in_tmp, {"v5": spec}) == (0, ["ok: v5"], [])


def test_bad_advantage_normalizer(in_tmp: Path) -> None:
    spec = make_spec("ppo")
    spec["agent"]["algorithm"]["normalize_advantages"] = "percentil"
    code, _, err = check(in_tmp, {"v5": spec})
    assert code == 2 and "is not one of standardize, percentile; did you mean percentile?" in err[0]


@pytest.mark.parametrize(
    ("algo", "changes", "line"),
    [
        (
            "crossq",
            {"agent.algorithm.log_alpha_min": 1.5, "agent.algorithm.log_alpha_max": 0.5},
            "agent.algorithm.log_alpha_min: must be <= log_alpha_max (0.5), got 1.5",
        ),
        (
            "crossq",
            {"agent.algorithm.log_alpha_min": 3.0, "agent.algorithm.log_alpha_max": None},
            "agent.algorithm.log_alpha_min: must be <= log_alpha_max (2.0, the default), got 3.0",
        ),
        (
            "crossq",
            {"agent.algorithm.log_alpha_max": -6.0},
            "agent.algorithm.log_alpha_max: must be >= log_alpha_min (-5.0, the default), got -6.0",
        ),
        (
            "crossq",
            {"agent.algorithm.fixed_alpha": 0.2},
            "agent.algorithm.log_alpha_max: bounds the tuned alpha, and fixed_alpha 0.2 turns the tuning off; remove one",
        ),
        (
            "ppo",
            {
                "agent.algorithm.normalize_advs": False,
                "agent.algorithm.normalize_advantages": "percentile",
            },
            "agent.algorithm.normalize_advantages: 'percentile' contradicts normalize_advs false (advantages used as computed); remove one",
        ),
    ],
)
def test_v5_algorithm_keys_out_of_place_are_one_line(
    algo: str, changes: dict[str, Any], line: str, in_tmp: Path
) -> None:
    spec = crossq_spec() if algo == "crossq" else make_spec(algo)
    for path, value in changes.items():
        set_path(spec, path, value)
    code, out, err = check(in_tmp, {"v5": spec})
    assert (code, out, err) == (2, [], [f"error: v5: {line}"])


@pytest.mark.parametrize(
    ("algo", "path", "value", "readers"),
    [
        ("ppo", "agent.algorithm.log_alpha_max", 1.0, "SoftActorCritic, CrossQ"),
        ("a2c_gae", "agent.algorithm.log_alpha_min", -5.0, "SoftActorCritic, CrossQ"),
        ("a2c_gae", "agent.algorithm.normalize_advantages", "percentile", "PPO, PPOSIL"),
        ("crossq", "agent.algorithm.normalize_advantages", "standardize", "PPO, PPOSIL"),
    ],
)
def test_another_algorithms_key_is_a_warning_naming_its_readers(
    algo: str, path: str, value: Any, readers: str, in_tmp: Path
) -> None:
    """SLM Lab v5 ran a spec whose algorithm ignored a key; it runs here, with one line saying so."""
    spec = crossq_spec() if algo == "crossq" else make_spec(algo)
    set_path(spec, path, value)
    name = spec["agent"]["algorithm"]["name"]
    code, out, err = check(in_tmp, {"v5": spec})
    assert (code, out, len(err)) == (0, ["ok: v5"], 1)
    assert err[0].endswith(f"{path}: ignored (read by {readers}, not by {name})")


@pytest.mark.parametrize(
    ("algo", "changes"),
    [
        ("ppo_sil", {"agent.algorithm.normalize_advantages": "percentile"}),
        (
            "ppo",
            {
                "agent.algorithm.normalize_advs": True,
                "agent.algorithm.normalize_advantages": "percentile",
            },
        ),
        ("crossq", {"agent.algorithm.log_alpha_min": 0.5, "agent.algorithm.log_alpha_max": 0.5}),
        # one advantage per minibatch is fine when it is not standardized
        (
            "ppo",
            {
                "agent.algorithm.minibatch_size": 1,
                "agent.algorithm.normalize_advantages": "percentile",
            },
        ),
        (
            "ppo",
            {"agent.algorithm.minibatch_size": 1, "agent.algorithm.normalize_advs": False},
        ),
    ],
)
def test_v5_algorithm_keys_in_place_are_ok(
    algo: str, changes: dict[str, Any], in_tmp: Path
) -> None:
    spec = crossq_spec() if algo == "crossq" else make_spec(algo)
    for path, value in changes.items():
        set_path(spec, path, value)
    assert check(in_tmp, {"v5": spec}) == (0, ["ok: v5"], [])


def template_spec() -> dict[str, Any]:
    spec = make_spec("ppo")
    spec["env"]["name"] = "${env}"
    spec["env"]["max_frame"] = "${max_frame}"
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero", "frame": "${max_frame}"}
    return spec


TEMPLATE_LINE = "ok: tpl (template: run it with -s env=VALUE -s max_frame=VALUE)"


def test_template_json_is_checked_and_names_its_vars(in_tmp: Path) -> None:
    assert check(in_tmp, {"tpl": template_spec()}) == (0, [TEMPLATE_LINE], [])


def test_template_with_bare_placeholders(in_tmp: Path) -> None:
    """Unquoted ${max_frame} in JSON (invalid JSON until substituted) and in YAML."""
    text = json.dumps({"tpl": template_spec()}).replace('"${max_frame}"', "${max_frame}")
    assert "${max_frame}," in text or "${max_frame}}" in text
    assert check(in_tmp, text) == (0, [TEMPLATE_LINE], [])
    yaml_text = (
        "tpl:\n"
        "  agent:\n"
        "    algorithm: {name: PPO, time_horizon: 8, minibatch_size: 8, training_epoch: 1}\n"
        "    memory: {name: OnPolicyBatchReplay}\n"
        "    net:\n"
        "      type: MLPNet\n"
        "      lr_scheduler_spec:\n"
        "        name: LinearToZero\n"
        "        frame: ${max_frame}\n"
        "  env:\n"
        "    name: ${env}\n"
        "    max_frame: ${max_frame}\n"
        "  meta: {max_session: 1}\n"
    )
    assert check(in_tmp, yaml_text, ".yaml") == (0, [TEMPLATE_LINE], [])


def test_template_still_catches_what_it_can(in_tmp: Path) -> None:
    spec = template_spec()
    spec["agent"]["algorithm"]["lamm"] = 0.9
    code, out, err = check(in_tmp, {"tpl": spec})
    assert (code, out) == (2, [])
    assert err == ["error: tpl: agent.algorithm.lamm: unknown key; did you mean lam?"]


def test_template_filled_with_set_is_a_plain_spec(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "t.json", {"tpl": template_spec()})
    result = invoke(["check", str(path), "-s", "env=Acrobot-v1", "-s", "max_frame=1e3"])
    assert (result.exit_code, result.stdout) == (0, "ok: tpl\n")
    result = invoke(["run", str(path), "tpl", "dev"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: tpl.env.name: unresolved ${env}; pass it with -s env=VALUE"
    ]


def test_a_var_of_another_spec_in_the_file(in_tmp: Path) -> None:
    """-s max_frame beside a template with ${max_frame}: a whole-file check fills the template
    and says the full spec leaves it out; a run of the full spec refuses it in one line."""
    full = make_spec("ppo")
    path = write_spec_file(in_tmp / "t.json", {"tpl": template_spec(), "full": full})
    result = invoke(["check", str(path), "-s", "env=Acrobot-v1", "-s", "max_frame=1e3"])
    assert (result.exit_code, result.stdout.splitlines()) == (
        0,
        [
            "ok: tpl",
            "ok: full (no ${env}: -s env not used; no ${max_frame}: -s max_frame not used)",
        ],
    )
    for command in (["check", str(path), "full"], ["run", str(path), "full", "dev"]):
        result = invoke([*command, "-s", "max_frame=1e3"])
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr.splitlines()[-1].endswith(
            "-s max_frame=1e3: the spec has no ${max_frame} and 'max_frame' is not a spec path; "
            "did you mean env.max_frame?"
        )
    assert not (in_tmp / "data").exists()  # nothing half-written


# a net's optimizer, LR scheduler and loss arguments are those their torch classes take
TORCH_ARGUMENTS: list[tuple[str, str]] = [
    ("agent.net.actor_optim_spec.lrr=3e-4", "agent.net.actor_optim_spec.lrr: Adam takes no argument lrr; did you mean lr?"),
    ("agent.net.critic_optim_spec.beta=[0.9, 0.99]", "agent.net.critic_optim_spec.beta: Adam takes no argument beta; did you mean betas?"),
    ("agent.net.loss_spec.deltaa=1.0", "agent.net.loss_spec.deltaa: HuberLoss takes no argument deltaa; did you mean delta?"),
    ("agent.net.loss_spec={name: SmoothL1Loss, deltaa: 1.0}", "agent.net.loss_spec.deltaa: SmoothL1Loss takes no argument deltaa; did you mean beta?"),
    ("agent.net.lr_scheduler_spec={name: StepLR, step_sizee: 100}", "agent.net.lr_scheduler_spec.step_sizee: StepLR takes no argument step_sizee; did you mean step_size?"),
    ("agent.net.lr_scheduler_spec={name: StepLR}", "agent.net.lr_scheduler_spec.step_size: required by StepLR"),
    ("agent.net.lr_scheduler_spec={name: StepLR, step_size: 100, frame: 400}", "agent.net.lr_scheduler_spec.frame: StepLR takes no argument frame"),
    ("agent.net.lr_scheduler_spec={name: LinearToZero, frme: 400}", "agent.net.lr_scheduler_spec.frme: LinearToZero takes no argument frme; did you mean frame?"),
    ("agent.net.actor_lr_scheduler_spec={name: ExponentialLR, gamma: 0.9, gama: 0.9}", "agent.net.actor_lr_scheduler_spec.gama: ExponentialLR takes no argument gama; did you mean gamma?"),
]  # fmt: skip


def kwargs_spec() -> dict[str, Any]:
    spec = make_spec("ppo")
    spec["agent"]["net"]["loss_spec"] = {"name": "HuberLoss"}
    return spec


@pytest.mark.parametrize(("set_", "line"), TORCH_ARGUMENTS)
def test_an_argument_torch_does_not_take_is_one_line(set_: str, line: str, in_tmp: Path) -> None:
    """What the run would fail on at its first step (TypeError: unexpected keyword argument)."""
    path = write_spec_file(in_tmp / "s.json", {"v5": kwargs_spec()})
    result = invoke(["check", str(path), "v5", "-s", set_])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"error: v5: {line}"]


def test_an_argument_written_in_the_spec_is_checked(in_tmp: Path) -> None:
    spec = kwargs_spec()
    spec["agent"]["net"]["actor_optim_spec"]["lrr"] = 3e-4
    assert check(in_tmp, {"v5": spec}) == (
        2,
        [],
        ["error: v5: agent.net.actor_optim_spec.lrr: Adam takes no argument lrr; did you mean lr?"],
    )


@pytest.mark.parametrize(
    ("search", "line"),
    [
        (
            {"agent.net.actor_optim_spec.lrr__loguniform": [1e-4, 1e-3]},
            "search.agent.net.actor_optim_spec.lrr__loguniform: Adam takes no argument lrr; did you mean lr?",
        ),
        (
            {"agent": {"net": {"loss_spec": {"deltaa__uniform": [0.5, 2.0]}}}},
            "search.agent.net.loss_spec.deltaa__uniform: HuberLoss takes no argument deltaa; did you mean delta?",
        ),
        (
            {"agent.net.optim_spec.lr__loguniform": [1e-4, 1e-3]},
            "search.agent.net.optim_spec.lr__loguniform: agent.net.optim_spec is not set in the spec (each net has its own); did you mean agent.net.actor_optim_spec.lr or agent.net.critic_optim_spec.lr?",
        ),
    ],
)
def test_a_searched_argument_torch_does_not_take_is_one_line(
    search: dict[str, Any], line: str, in_tmp: Path
) -> None:
    """Every trial of the search would fail at its start."""
    spec = kwargs_spec()
    spec["search"] = search
    assert check(in_tmp, {"v5": spec}) == (2, [], [f"error: v5: {line}"])


def test_a_shared_key_set_on_per_net_optimizers_names_them(in_tmp: Path) -> None:
    path = write_spec_file(in_tmp / "s.json", {"v5": kwargs_spec()})
    result = invoke(["check", str(path), "v5", "-s", "agent.net.optim_spec.lr=1e-3"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "error: v5: -s agent.net.optim_spec.lr=1e-3: agent.net.optim_spec is not set in the spec (each net has its own); did you mean agent.net.actor_optim_spec.lr or agent.net.critic_optim_spec.lr?"
    ]


def test_check_refuses_quantized_bounds_ray_tune_refuses(in_tmp: Path) -> None:
    """A quantized float's bounds off its grid: Ray Tune refuses them, and so does `check`."""
    spec = make_spec("ppo")
    spec["search"] = {"agent.algorithm.lam__quniform": [0.9, 0.95, 0.02]}
    code, out, err = check(in_tmp, {"a": spec})
    assert (code, out) == (2, [])
    assert err == [
        "error: a: search.agent.algorithm.lam__quniform: hi 0.95 is not a multiple of q 0.02, which Ray Tune refuses; use 0.94 or 0.96"
    ]


def test_check_tries_the_values_a_quantized_int_draws(in_tmp: Path) -> None:
    """qrandint with q = 1 excludes hi, as Ray Tune's does: a hi one past the largest
    minibatch is fine; with a larger q hi is drawn, and tried."""
    spec = make_spec("ppo")  # a batch of 64
    spec["search"] = {"agent.algorithm.minibatch_size__qrandint": [32, 65, 1]}
    assert check(in_tmp, {"a": spec}) == (0, ["ok: a"], [])
    spec["search"] = {"agent.algorithm.minibatch_size__qlograndint": [1, 80, 16]}
    assert check(in_tmp, {"a": spec})[2] == [
        "error: a: search.agent.algorithm.minibatch_size__qlograndint: the value 80 does not fit: agent.algorithm.minibatch_size: 80 is larger than the batch of 64 (time_horizon x num_unrolls x num_envs)"
    ]


def test_check_without_the_full_install_checks_the_syntax_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The light core (the project in light/, no Gymnasium): the typed spec is
    validated, its fit to the env's spaces is not, and the line says so."""
    misfit = make_spec("ppo", "Pendulum-v1")  # a discrete distribution, a Box action space
    set_path(misfit, "agent.algorithm.action_pdtype", "Categorical")
    bad_syntax = make_spec("ppo", "Pendulum-v1")
    set_path(bad_syntax, "agent.algorithm.gamma", 2)
    path = write_spec_file(tmp_path / "s.json", {"misfit": misfit, "bad_syntax": bad_syntax})
    result = invoke(["check", str(path), "misfit"])
    assert (
        result.exit_code == 2 and "Categorical does not fit the Box action space" in result.stderr
    )
    monkeypatch.setattr(util, "FULL_INSTALL_MODULES", ("torch", "no_such_module"))
    result = invoke(["check", str(path)])
    assert result.exit_code == 2
    syntax_only = "syntax only: env spaces not checked without the full install; run uv sync in the repository root, not in light/"
    assert result.stdout == f"ok: misfit ({syntax_only})\n"
    assert result.stderr == "error: bad_syntax: agent.algorithm.gamma: must be in (0, 1], got 2\n"


MUJOCO_FILE = str(SPEC_DIR / "benchmark" / "ppo" / "ppo_mujoco.json")
NEVER_TRAINS = "env.max_frame: 20000 ends before the first update at frame 32768 (time_horizon 2048 x num_envs 16): the run never trains; raise max_frame or lower time_horizon"


@pytest.mark.parametrize(
    ("spec_name", "sets"),
    [
        ("ppo_mujoco", ["-s", "env=Hopper-v5", "-s", "max_frame=2e4"]),
        ("ppo_hopper", ["-s", "max_frame=2e4"]),  # a search: none of its trials would train
    ],
)
def test_check_warns_of_a_run_that_ends_before_its_first_update(
    spec_name: str, sets: list[str], in_tmp: Path
) -> None:
    """One PPO batch of the MuJoCo specs is 2048 x 16 = 32768 frames: 2e4 never trains."""
    result = invoke(["check", MUJOCO_FILE, spec_name, *sets])
    assert (result.exit_code, result.stdout) == (0, f"ok: {spec_name}\n")
    [line] = result.stderr.splitlines()
    assert line.endswith(f"WARNING | {NEVER_TRAINS}")
    enough = invoke(["check", MUJOCO_FILE, spec_name, *sets[:-1], "max_frame=32768"])
    assert (enough.exit_code, enough.stderr) == (0, "")


def test_check_warns_of_a_search_value_whose_trials_never_train(in_tmp: Path) -> None:
    spec = make_spec("ppo", max_frame=1000, num_envs=4)
    spec["meta"]["max_trial"] = 4
    spec["search"] = {"agent.algorithm.time_horizon__choice": [32, 512]}
    code, out, err = check(in_tmp, {"searched": spec})
    assert (code, out, len(err)) == (0, ["ok: searched"], 1)
    assert err[0].endswith(
        "search.agent.algorithm.time_horizon__choice: a trial at 512 never trains: env.max_frame: 1000 ends before the first update at frame 2048 (time_horizon 512 x num_envs 4): the run never trains; raise max_frame or lower time_horizon"
    )


def test_a_run_that_never_trains_is_warned_at_its_start(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same line when `run` starts (the run itself stubbed), here from --max-frame."""
    monkeypatch.setattr(main, "_train", lambda *a: None)
    spec_file = write_spec_file(in_tmp / "s.json", {"short": make_spec("ppo", num_envs=2)})
    result = invoke(["run", str(spec_file), "short", "dev", "--max-frame", "50"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.rstrip().endswith(
        "env.max_frame: 50 ends before the first update at frame 64 (time_horizon 32 x num_envs 2): the run never trains; raise max_frame or lower time_horizon"
    )


def test_check_names_the_version_to_use_of_an_out_of_date_id(in_tmp: Path) -> None:
    code, out, err = check(in_tmp, {"v4": make_spec("random", "Hopper-v4")})
    assert (code, out, len(err)) == (0, ["ok: v4"], 1)
    assert err[0].endswith("WARNING | env.name: Hopper-v4 is out of date: use Hopper-v5")
    code, out, err = check(in_tmp, {"v5": make_spec("random", "Hopper-v5")})
    assert (code, out, err) == (0, ["ok: v5"], [])


@pytest.mark.subprocess
def test_an_out_of_date_id_is_one_line_of_ours_through_the_console_script(tmp_path: Path) -> None:
    """Gymnasium's own warning (colored, with its source line) is not printed by check, nor by
    the run's sessions; the run starts with our line."""
    spec_file = write_spec_file(tmp_path / "v4.json", {"v4": make_spec("random", "Hopper-v4")})
    ours = "WARNING | env.name: Hopper-v4 is out of date: use Hopper-v5"
    checked = console(tmp_path, "check", str(spec_file))
    assert (checked.returncode, checked.stdout) == (0, "ok: v4\n")
    [line] = checked.stderr.splitlines()
    assert line.endswith(ours)
    ran = console(tmp_path, "run", str(spec_file), "v4", "dev", "--max-frame", "50")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stderr.splitlines()[0].endswith(ours) and ran.stderr.count(ours) == 1
    assert "DeprecationWarning" not in ran.stderr and "\x1b[" not in ran.stderr


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            "Breakout",
            "env.name: Breakout: an Atari game's id is namespaced and versioned: use ALE/Breakout-v5",
        ),
        ("Pong-v5", "env.name: Pong-v5: an Atari game's v5 id is namespaced: use ALE/Pong-v5"),
    ],
)
def test_an_atari_game_without_its_namespace_gets_the_id_to_use(
    env: str, line: str, in_tmp: Path
) -> None:
    code, out, err = check(in_tmp, {"atari": make_spec("random", env)})
    assert (code, out, err) == (2, [], [f"error: atari: {line}"])
