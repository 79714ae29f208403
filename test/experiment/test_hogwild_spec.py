"""A Hogwild spec: what it is refused for, in one line, and what it is accepted with."""

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke, load, make_spec

from slm_lab import ROOT_DIR
from slm_lab.lib.config import SpecError


def hogwild_spec(algo: str = "a2c_gae", mode: Any = "shared") -> dict[str, Any]:
    spec = make_spec(algo, max_session=2)
    spec["meta"]["distributed"] = mode
    return spec


@pytest.mark.parametrize("mode", ["shared", "synced"])
@pytest.mark.parametrize("optim", ["GlobalAdam", "GlobalRMSprop", "Adam"])
def test_hogwild_specs_with_v5_optimizer_names_load(mode: str, optim: str) -> None:
    spec = hogwild_spec(mode=mode)
    spec["agent"]["net"]["actor_optim_spec"] = {"name": optim, "lr": 1e-3}
    typed = load(spec)
    assert typed.meta.hogwild
    assert typed.agent.net.actor.optim_spec.torch_name == optim.removeprefix("Global")


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda s: s["meta"].update(distributed="async"),
            "meta.distributed: must be false, shared or synced, got 'async'",
        ),
        (
            lambda s: s["agent"]["net"].update(gpu=True),
            "agent.net.gpu: true with meta.distributed shared: Hogwild's global nets are in shared memory, on the CPU; set gpu to false (or auto)",
        ),
        (
            lambda s: s["agent"]["net"].update(
                lr_scheduler_spec={"name": "StepLR", "step_size": 10}
            ),
            "agent.net.lr_scheduler_spec.name: StepLR with meta.distributed shared would step once per worker's update; use LinearToZero or LinearToMin, which follow the trial's global frames",
        ),
    ],
)
def test_hogwild_refusals_are_one_line(change: Any, line: str) -> None:
    spec = hogwild_spec()
    change(spec)
    with pytest.raises(SpecError) as e:
        load(spec)
    assert str(e.value) == line


def test_an_algorithm_without_a_hogwild_form_is_refused() -> None:
    spec = make_spec("ppo", max_session=2)
    spec["agent"]["algorithm"] = {"name": "DQN", "gamma": 0.99}
    spec["agent"]["memory"] = {"name": "Replay", "max_size": 1000, "batch_size": 32}
    spec["meta"]["distributed"] = "synced"
    with pytest.raises(SpecError, match=r"^meta.distributed: DQN has no Hogwild form"):
        load(spec)


def test_hogwild_of_one_worker_is_warned(log_messages: list[str]) -> None:
    spec = hogwild_spec()
    spec["meta"]["max_session"] = 1
    load(spec)
    assert any("Hogwild of one worker" in m for m in log_messages)


def test_lr_schedules_of_frames_are_accepted() -> None:
    spec = hogwild_spec()
    spec["agent"]["net"]["lr_scheduler_spec"] = {"name": "LinearToZero"}
    assert load(spec).meta.hogwild


# -- SLM Lab v5's Hogwild spec files, as a user checks them ------------------------------------
V5_SPECS = ROOT_DIR / "test" / "fixtures" / "v5_specs"
LEGACY_PINBALL = (
    "env.name: VideoPinball-v0: a legacy Atari id; SLM Lab runs ALE v5: use ALE/VideoPinball-v5"
)
# (file, spec) of the specs whose env SLM Lab does not run: the line `check` answers them with
V5_REFUSED = {
    ("a3c_videopinball", "a3c_gae_videopinball"): LEGACY_PINBALL,
    ("a3c_videopinball", "a3c_nstep_videopinball"): LEGACY_PINBALL,
    (
        "async_sac_halfcheetah_pybullet",
        "async_sac_halfcheetah",
    ): "env.name: 'HalfCheetahBulletEnv-v0' is not a Gymnasium env id; did you mean HalfCheetah-v5?",
}


def test_the_v5_hogwild_files_are_all_here() -> None:
    files = sorted(p.name for p in V5_SPECS.glob("*.json"))
    assert len(files) == 16
    assert {f.split("_")[0] for f in files} == {"a3c", "async", "dppo"}


@pytest.mark.parametrize("path", sorted(V5_SPECS.glob("*.json")), ids=lambda p: p.stem)
def test_v5_hogwild_spec_files_pass_check(path: Path) -> None:
    """Every spec of the file is `ok` (a template: ok as far as it goes), but for the three
    whose env SLM Lab does not run, which get one line naming the env to use."""
    specs = json.loads(path.read_text())
    assert all(s["meta"]["distributed"] in ("shared", "synced") for s in specs.values())
    refused = {name: line for (stem, name), line in V5_REFUSED.items() if stem == path.stem}
    result = invoke(["check", str(path)])
    ok = [line.removeprefix("ok: ").split(" ")[0] for line in result.stdout.splitlines()]
    assert sorted(ok) == sorted(set(specs) - set(refused))
    errors = sorted(line for line in result.stderr.splitlines() if line.startswith("error: "))
    assert len(errors) == len(refused)
    for (name, line), error in zip(sorted(refused.items()), errors, strict=True):
        assert error.startswith(f"error: {name}: {line}")
    assert result.exit_code == (2 if refused else 0)
