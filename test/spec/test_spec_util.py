"""Spec loading: ${var} substitution, JSON/YAML, v4/v5 compatibility, and one-line errors."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import BAD_INPUTS, SPEC_NAME, bad_input, family_marks, make_spec, write_spec_file

from slm_lab import SPEC_DIR
from slm_lab.agent.algorithm.config import ALGORITHM_CONFIGS, OffPolicyConfig, SoftActorCriticConfig
from slm_lab.env.registry import backend_module
from slm_lab.lib.config import key as config_key
from slm_lab.spec import schema, spec_util
from slm_lab.spec.spec_util import SpecError


def test_substitution_numeric_and_string_values(tmp_path: Path) -> None:
    spec = make_spec("ppo")
    spec["env"]["name"] = "${env}"
    spec["env"]["max_frame"] = "${max_frame}"
    spec["agent"]["net"]["actor_optim_spec"]["lr"] = "${lr}"
    spec["agent"]["name"] = "ppo_on_${env}"
    path = write_spec_file(tmp_path / "vars.json", {"ppo_vars": spec})
    variables = spec_util.parse_sets(["env=Acrobot-v1", "max_frame=1e7", "lr=3e-4"])
    out = spec_util.get_spec(str(path), "ppo_vars", variables)
    assert out["env"]["max_frame"] == 10000000 and isinstance(out["env"]["max_frame"], int)
    assert out["agent"]["net"]["actor_optim_spec"]["lr"] == 0.0003
    assert out["env"]["name"] == "Acrobot-v1"
    assert out["agent"]["name"] == "ppo_on_Acrobot-v1"
    assert out["name"] == "ppo_vars_acrobot"


def test_run_name_without_env_var_is_the_spec_name(tmp_path: Path) -> None:
    path = write_spec_file(tmp_path / "s.json", {SPEC_NAME: make_spec("ppo")})
    assert spec_util.get_spec(str(path), SPEC_NAME)["name"] == SPEC_NAME


def test_a_placeholder_of_another_spec_in_the_file_is_not_this_spec_s(tmp_path: Path) -> None:
    """-s max_frame=... on a spec with its own budget, beside a template that has ${max_frame},
    is an error naming the key to set, not a silent no-op."""
    template, full = make_spec("ppo"), make_spec("ppo")
    template["env"]["max_frame"] = "${max_frame}"
    path = write_spec_file(tmp_path / "two.json", {"ppo_template": template, "ppo_full": full})
    sets = {"max_frame": "1e6"}
    assert spec_util.get_spec(str(path), "ppo_template", sets)["env"]["max_frame"] == 1_000_000
    with pytest.raises(
        SpecError, match=r"-s max_frame=1e6: the spec has no \$\{max_frame\}.*env\.max_frame"
    ):
        spec_util.get_spec(str(path), "ppo_full", sets)
    with pytest.raises(SpecError, match=r"did you mean env\.max_frame"):
        spec_util.check_spec(str(path), "ppo_full", sets)


@pytest.mark.parametrize(
    ("env", "suffix"),
    [
        ("Acrobot-v1", "acrobot"),
        ("ALE/Pong-v5", "pong"),
        ("LunarLander-v3", "lunarlander"),
        ("CartPole-v1", "cartpole"),
    ],
)
def test_env_suffix(env: str, suffix: str) -> None:
    assert spec_util.env_suffix(env) == suffix


def test_parse_sets_splits_at_first_equals() -> None:
    assert spec_util.parse_sets(["a=b=c", "env=ALE/Pong-v5"]) == {"a": "b=c", "env": "ALE/Pong-v5"}
    with pytest.raises(SpecError, match="the key before '=' is empty"):
        spec_util.parse_sets(["=3"])


def test_substitute_keeps_decimal_values_float() -> None:
    assert (
        spec_util.substitute('{"g": "${g}", "n": "${n}"}', {"g": "2.0", "n": "1e3"})
        == '{"g": 2.0, "n": 1000}'
    )


YAML_SPECS = """
_base: &base
  agent:
    name: PPO
    algorithm: &algo
      name: PPO
      gamma: 0.99
      lam: 0.95
      time_horizon: 32
      minibatch_size: 32
      training_epoch: 2
    memory: {name: OnPolicyBatchReplay}
    net: {type: MLPNet, hid_layers: [16], optim_spec: {name: Adam, lr: 0.001}}
  env: {name: CartPole-v1, num_envs: 2, max_frame: 1000}
  meta: {max_session: 1, log_frequency: 100}
ppo_yaml:
  <<: *base
ppo_yaml_acrobot:
  <<: *base
  env: {name: Acrobot-v1, num_envs: 4, max_frame: 2e3}
"""


def test_yaml_anchors_and_merges(tmp_path: Path) -> None:
    path = write_spec_file(tmp_path / "specs.yaml", YAML_SPECS)
    assert list(spec_util.read_spec_file(str(path))) == [
        "ppo_yaml",
        "ppo_yaml_acrobot",
    ]  # _base skipped
    spec = spec_util.get_spec(str(path), "ppo_yaml")
    assert spec["agent"]["algorithm"]["time_horizon"] == 32
    assert spec["env"]["name"] == "CartPole-v1"
    other = spec_util.get_spec(str(path), "ppo_yaml_acrobot")
    assert other["env"] == {"name": "Acrobot-v1", "num_envs": 4, "max_frame": 2000.0}
    assert other["agent"] == spec["agent"]
    with pytest.raises(SpecError, match="spec '_base' not in"):
        spec_util.get_spec(str(path), "_base")


def test_v4_list_wrapped_agent_and_env(tmp_path: Path) -> None:
    spec = make_spec("ppo")
    spec["agent"], spec["env"] = [spec["agent"]], [spec["env"]]
    path = write_spec_file(tmp_path / "v4.json", {SPEC_NAME: spec})
    out = spec_util.get_spec(str(path), SPEC_NAME)
    assert out["agent"]["algorithm"]["name"] == "PPO"
    assert out["env"]["name"] == "CartPole-v1"


def test_deprecated_v5_key_warns_and_is_ignored(tmp_path: Path, log_messages: list[str]) -> None:
    spec = make_spec("ppo")
    spec["agent"]["algorithm"]["clip_val_loss"] = True
    spec["meta"]["num_gpus"] = 1
    path = write_spec_file(tmp_path / "v5.json", {SPEC_NAME: spec})
    out = spec_util.get_spec(str(path), SPEC_NAME)
    assert out["agent"]["algorithm"]["clip_vloss"] is False
    warnings = [m for m in log_messages if "clip_val_loss" in m]
    assert len(warnings) == 1
    assert "agent.algorithm.clip_val_loss: ignored" in warnings[0] and "clip_vloss" in warnings[0]
    assert any(m.startswith("meta.num_gpus: ignored") for m in log_messages)


BENCHMARK_FILES = sorted((Path(SPEC_DIR) / "benchmark").rglob("*.json"))
DEMO_FILE = Path(SPEC_DIR) / "demo.json"


def shipped(path: Path) -> Any:
    """A benchmark spec file as a test case, marked with the families of its envs."""
    env_ids = [spec["env"]["name"] for spec in json.loads(path.read_text()).values()]
    return pytest.param(path, id=path.stem, marks=family_marks(*env_ids))


def test_demo_spec_validates() -> None:
    assert spec_util.get_spec("demo.json", "ppo_cartpole_demo")["name"] == "ppo_cartpole_demo"


# a template's ${env}, by what the spec file is for, and the name suffix it gives
TEMPLATE_ENVS = {"atari": ("ALE/Pong-v5", "pong"), "mujoco": ("Hopper-v5", "hopper")}


def template_env(path: Path) -> tuple[str, str]:
    family = next((k for k in TEMPLATE_ENVS if k in path.name), None)
    return TEMPLATE_ENVS[family] if family else ("CartPole-v1", "cartpole")


@pytest.mark.parametrize("path", [shipped(path) for path in BENCHMARK_FILES])
def test_shipped_specs_validate(path: Path) -> None:
    env, suffix = template_env(path)
    template_vars = {"env": env, "max_frame": "1e5"}  # the shipped templates' ${vars}
    for name, raw in json.loads(path.read_text()).items():
        text = json.dumps(raw)  # a file's templates and full specs have their own ${vars}
        variables = {k: v for k, v in template_vars.items() if f"${{{k}}}" in text}
        spec = spec_util.get_spec(str(path), name, variables)
        assert spec["name"] == (f"{name}_{suffix}" if "env" in variables else name)
        assert isinstance(spec["env"]["max_frame"], int | float) and spec["env"]["max_frame"] > 0


@pytest.mark.parametrize("path", [shipped(path) for path in BENCHMARK_FILES + [DEMO_FILE]])
def test_shipped_schedules_follow_max_frame(path: Path) -> None:
    """No shipped schedule is written in absolute frames that a longer or shorter run would
    leave behind: at half and three times each spec's max_frame, none warns."""
    for name, raw in json.loads(path.read_text()).items():
        text = json.dumps(raw)
        env = raw["env"]["name"] if "${env}" not in text else template_env(path)[0]
        max_frame = raw["env"]["max_frame"] if "${max_frame}" not in text else 1e5
        for frames in (max_frame / 2, max_frame * 3):
            values = {"env": env, "max_frame": str(frames)}
            sets = {k: v for k, v in values.items() if f"${{{k}}}" in text}
            with schema.quiet():
                spec = spec_util.load_spec(str(path), name, sets, {"env.max_frame": int(frames)})
            assert spec_util.schedule_warnings(spec.spec) == [], (name, frames)


def absolute_frames(node: Any, path: str = "") -> list[str]:
    """The paths in a spec file's JSON that give a schedule in absolute frames."""
    found = []
    if isinstance(node, dict):
        if node.get("name") in ("linear_decay", "rate_decay", "periodic_decay"):
            found += [f"{path}.end_step"] if node.get("end_step") else []
        if node.get("name") in ("LinearToZero", "LinearToMin") and "frame" in node:
            found.append(f"{path}.frame")
        found += [f"{path}.beta_end_step"] if "beta_end_step" in node else []
        for k, v in node.items():
            if "end_step__" in k or "lr_scheduler_spec.frame__" in k:
                found.append(f"{path}.{k}")
            found += absolute_frames(v, f"{path}.{k}".lstrip("."))
    elif isinstance(node, list):
        for v in node:
            found += absolute_frames(v, path)
    return found


@pytest.mark.parametrize("path", [shipped(path) for path in BENCHMARK_FILES + [DEMO_FILE]])
def test_shipped_specs_write_no_schedule_in_absolute_frames(path: Path) -> None:
    assert absolute_frames(json.loads(path.read_text())) == []


def test_yaml_exponent_floats_are_numbers(tmp_path: Path) -> None:
    # PyYAML (YAML 1.1) reads 3e-4 and 1e6 as strings; specs write them that way all the time
    text = YAML_SPECS.replace("lr: 0.001", "lr: 3e-4").replace("max_frame: 1000", "max_frame: 1e6")
    path = write_spec_file(tmp_path / "exp.yml", text)
    spec = spec_util.get_spec(str(path), "ppo_yaml")
    assert spec["agent"]["net"]["optim_spec"]["lr"] == 0.0003
    assert spec["env"]["max_frame"] == 1e6
    assert spec_util.get_spec(str(path), "ppo_yaml_acrobot")["env"]["max_frame"] == 2000.0


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_raises_spec_error(case: str, tmp_path: Path) -> None:
    spec_file, spec_name, sets, fragment = bad_input(case, tmp_path)
    with pytest.raises(SpecError) as err:
        spec_util.get_spec(spec_file, spec_name, spec_util.parse_sets(sets))
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"agent.algorithm.gamma": 1.5}, "agent.algorithm.gamma: must be in (0, 1], got 1.5"),
        (
            {"agent.net.hid_layers": [16, 0]},
            "agent.net.hid_layers: expected a list of positive ints, got [16, 0]",
        ),
        (
            {"agent.net.actor_optim_spec": {"name": "Adamm", "lr": 1e-3}},
            "agent.net.actor_optim_spec.name: 'Adamm' is not in torch.optim; did you mean Adam?",
        ),
        (
            {"agent.memory.name": "OnPolicyReplay"},
            "agent.memory.name: PPO needs one of OnPolicyBatchReplay; got 'OnPolicyReplay'",
        ),
        ({"env.max_frame": 1.5e3}, None),
        (
            {"agent.net.actor_optim_spec": {"name": "Adam", "lr": "0.001"}},
            "agent.net.actor_optim_spec.lr: expected float, got '0.001'",
        ),
        (
            {"agent.net.critic_optim_spec": {"name": "Adam", "lr": -0.1}},
            "agent.net.critic_optim_spec.lr: must be > 0, got -0.1",
        ),
        ({"meta.max_sesion": 2}, "meta.max_sesion: unknown key; did you mean max_session?"),
        ({"meta.rigorous_eval": -1}, "meta.rigorous_eval: must be >= 0, got -1"),
        ({"meta.eval_frequency": 0}, "meta.eval_frequency: must be > 0, got 0"),
        ({"meta.eval_greedy": "yes"}, "meta.eval_greedy: expected bool, got 'yes'"),
        ({"meta.rigorous_eval": 0, "meta.eval_frequency": 500}, None),
    ],
)
def test_more_validation(changes: dict, fragment: str | None, tmp_path: Path) -> None:
    spec = make_spec("ppo")
    for path, value in changes.items():
        *parents, leaf = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        node[leaf] = value
    path = write_spec_file(tmp_path / "s.json", {SPEC_NAME: spec})
    if fragment is None:
        spec_util.get_spec(str(path), SPEC_NAME)
        return
    with pytest.raises(SpecError) as err:
        spec_util.get_spec(str(path), SPEC_NAME)
    assert fragment in str(err.value)


def test_random_spec_needs_only_algorithm_name(tmp_path: Path) -> None:
    path = write_spec_file(tmp_path / "r.json", {"rand": make_spec("random")})
    spec = spec_util.get_spec(str(path), "rand")
    assert spec["agent"] == {"name": "random", "algorithm": {"name": "Random"}}


def test_v5_argmax_pdtype_is_accepted_for_discrete_only() -> None:
    spec = make_spec("ppo")
    spec["agent"]["algorithm"]["action_pdtype"] = "Argmax"
    spec_util.validate(spec)
    spec = make_spec("ppo", "Pendulum-v1")
    spec["agent"]["algorithm"]["action_pdtype"] = "Argmax"
    with pytest.raises(SpecError, match="action_pdtype: Argmax does not fit the Box action space"):
        spec_util.validate(spec)


def test_env_spaces_are_built_once_per_env_section_in_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's checks ask for the env's spaces twice (the nets' fit, the replay's size): inside
    `spaces_built_once` (the CLI's run) the backend builds them once per env section; outside
    it (a long-lived process, whose registries may change) at every call."""
    module, built = backend_module("CartPole-v1"), []
    real = module.spaces
    monkeypatch.setattr(module, "spaces", lambda env: built.append(env) or real(env))
    spec = schema.load(make_spec("ppo"), "test")
    other = spec.with_values({"env.num_envs": 4})
    with spec_util.spaces_built_once():
        spec_util.check_typed(spec, schedules=False)
        spec_util.memory_layout(spec)
        assert built == [spec.env]
        assert spec_util.env_spaces(other.env) is not spec_util.env_spaces(spec.env)
        assert built == [spec.env, other.env]
    spec_util.env_spaces(spec.env)
    assert built == [spec.env, other.env, spec.env]


# -- a run that ends before its first update ------------------------------------------------------
def typed(algo: str, max_frame: int, num_envs: int, **algorithm: Any) -> schema.Spec:
    spec = make_spec(algo, max_frame=max_frame, num_envs=num_envs)
    spec["agent"]["algorithm"].update(algorithm)
    with schema.quiet():
        return schema.load(spec, SPEC_NAME)


def sac(max_frame: int, num_envs: int, training_start_step: int, batch_size: int) -> schema.Spec:
    spec = make_spec("random", "Pendulum-v1", max_frame=max_frame, num_envs=num_envs)
    net = {"type": "MLPNet", "hid_layers": [16], "hid_layers_activation": "relu"}
    spec["agent"] = {
        "name": "sac",
        "algorithm": {"name": "SoftActorCritic", "training_start_step": training_start_step},
        "memory": {"name": "Replay", "batch_size": batch_size, "max_size": 1000},
        "net": {**net, "optim_spec": {"name": "Adam", "lr": 3e-4}},
    }
    with schema.quiet():
        return schema.load(spec, SPEC_NAME)


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        # one PPO batch: time_horizon x num_envs frames = 2048 x 16 = 32768
        (
            lambda: typed("ppo", 20000, 16, time_horizon=2048),
            "env.max_frame: 20000 ends before the first update at frame 32768 (time_horizon 2048 x num_envs 16): the run never trains; raise max_frame or lower time_horizon",
        ),
        # 2047 vector steps of 16 frames reach frame 32752 only
        (lambda: typed("ppo", 32752, 16, time_horizon=2048), "at frame 32768"),
        # 32 x 2 unrolls x 4 envs = 256 frames
        (
            lambda: typed("ppo", 200, 4, time_horizon=32, num_unrolls=2),
            "at frame 256 (time_horizon 32 x num_unrolls 2 x num_envs 4)",
        ),
        # A2C: training_frequency 16 vector steps x 2 envs = 32 frames
        (
            lambda: typed("a2c_gae", 30, 2),
            "env.max_frame: 30 ends before the first update at frame 32 (training_frequency 16 x num_envs 2): the run never trains; raise max_frame or lower training_frequency",
        ),
        (
            lambda: sac(500, 1, 1000, 32),
            "env.max_frame: 500 ends before the first update at frame 1000 (training_start_step 1000): the run never trains; raise max_frame or lower training_start_step",
        ),
        # a batch of 256 fills at the 86th step of 3 envs: frame 258
        (
            lambda: sac(200, 3, 100, 256),
            "at frame 258 (agent.memory.batch_size 256 in steps of num_envs 3): the run never trains; raise max_frame or lower agent.memory.batch_size",
        ),
    ],
)
def test_a_run_that_ends_before_its_first_update_is_named(spec: Any, line: str) -> None:
    warning = spec_util.update_warning(spec())
    assert warning is not None and line in warning, warning


@pytest.mark.parametrize(
    "spec",
    [
        lambda: typed("ppo", 32768, 16, time_horizon=2048),  # exactly one batch
        lambda: typed("ppo", 32753, 16, time_horizon=2048),  # its last vector step ends at 32768
        lambda: typed("a2c_gae", 32, 2),
        lambda: sac(1000, 1, 1000, 32),
        lambda: sac(258, 3, 100, 256),
        lambda: typed("reinforce", 10, 2),  # whole episodes (OnPolicyReplay): not known ahead
        lambda: typed("random", 1, 2),  # never trains at all
    ],
)
def test_a_run_that_reaches_its_first_update_or_cannot_tell_is_not_warned(spec: Any) -> None:
    assert spec_util.update_warning(spec()) is None
    assert spec_util.update_warnings(spec()) == []


def test_a_search_whose_trials_at_a_searched_value_never_train_is_named() -> None:
    spec = make_spec("ppo", max_frame=1000, num_envs=4)  # time_horizon 32 x 4 = 128 frames
    spec["meta"]["max_trial"] = 4
    spec["search"] = {"agent.algorithm.time_horizon__choice": [32, 512]}
    with schema.quiet():
        typed_spec = schema.load(spec, SPEC_NAME)
    assert spec_util.update_warnings(typed_spec) == [
        "search.agent.algorithm.time_horizon__choice: a trial at 512 never trains: env.max_frame: 1000 ends before the first update at frame 2048 (time_horizon 512 x num_envs 4): the run never trains; raise max_frame or lower time_horizon"
    ]
    spec["search"] = {"agent.algorithm.time_horizon__choice": [32, 128]}
    with schema.quiet():
        assert spec_util.update_warnings(schema.load(spec, SPEC_NAME)) == []


# -- SAC's nets: a capability its config declares, not its class ---------------------------------
@dataclass(frozen=True)
class SacSubclassConfig(SoftActorCriticConfig):
    """A config that subclasses SAC's for its keys but whose nets are not SAC's."""

    squashed_actor_q_critics = False


@dataclass(frozen=True)
class SacNetsConfig(OffPolicyConfig):
    """A config with SAC's nets that is not SAC's class (a TD3's: no temperature keys)."""

    squashed_actor_q_critics = True
    policy_delay: int = config_key(2, "critic steps per actor step", gt=0)


def with_critic_net(algo: str) -> dict[str, Any]:
    spec = make_spec("random", "Pendulum-v1")
    net = {"type": "MLPNet", "hid_layers": [16], "hid_layers_activation": "relu"}
    spec["agent"] = {
        "name": algo,
        "algorithm": {"name": algo, "training_start_step": 32},
        "memory": {"name": "Replay", "batch_size": 32, "max_size": 1000},
        "net": {**net, "optim_spec": {"name": "Adam", "lr": 3e-4}},
        "critic_net": {**net, "optim_spec": {"name": "Adam", "lr": 1e-3}},
    }
    return spec


def test_the_spec_checks_treat_as_sac_the_configs_with_sac_s_nets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """agent.critic_net is read by the configs that declare SAC's nets: a subclass of SAC's
    config that does not is refused one, a config of another class that does reads it."""
    monkeypatch.setitem(ALGORITHM_CONFIGS, "SacSubclass", SacSubclassConfig)
    monkeypatch.setitem(ALGORITHM_CONFIGS, "SacNets", SacNetsConfig)
    with pytest.raises(SpecError) as e:
        spec_util.validate(with_critic_net("SacSubclass"))
    assert str(e.value) == (
        "agent.critic_net: read only by SoftActorCritic and CrossQ and SacNets, not by SacSubclass"
    )
    spec = spec_util.validate(with_critic_net("SacNets"))
    assert spec.agent.critic_net is not None and spec.agent.algorithm.policy_delay == 2
    assert "fixed_alpha" not in SacNetsConfig.keys()
