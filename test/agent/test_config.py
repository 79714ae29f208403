"""The torch-free declarations validation reads agree with the components they describe."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_spec, write_spec_file

from slm_lab import ROOT_DIR
from slm_lab.agent.algorithm.config import ALGORITHM_CONFIGS
from slm_lab.agent.algorithm.registry import ALGORITHMS
from slm_lab.agent.memory.config import MEMORY_NAMES
from slm_lab.agent.memory.registry import MEMORIES
from slm_lab.agent.net import net_util
from slm_lab.agent.net.config import (
    NET_TYPES,
    TORCH_NAMES_PATH,
    current_torch_names,
    torch_names,
    torch_names_text,
)
from slm_lab.agent.net.registry import NETS


def test_every_algorithm_has_its_config() -> None:
    assert list(ALGORITHMS) == list(ALGORITHM_CONFIGS)


def test_memory_and_net_names_match_their_registries() -> None:
    assert set(MEMORY_NAMES) == set(MEMORIES)
    assert set(NET_TYPES) == set(NETS)


def test_torch_names_table_matches_the_installed_torch() -> None:
    """Regenerate with `python -m slm_lab.agent.net.config` after a torch upgrade."""
    assert TORCH_NAMES_PATH.read_text() == torch_names_text(current_torch_names())
    assert torch_names()["activations"] == net_util.activation_names()
    assert {"Adam", "RMSprop"} <= set(torch_names()["optimizers"])
    assert "orthogonal_" in torch_names()["init_fns"]
    # each class's keyword arguments, less what the builder passes (the params, the optimizer)
    assert torch_names()["optimizers"]["Adam"]["optional"][:5] == [
        "lr",
        "betas",
        "eps",
        "weight_decay",
        "amsgrad",
    ]
    assert torch_names()["lr_schedulers"]["StepLR"] == {
        "required": ["step_size"],
        "optional": ["gamma", "last_epoch"],
    }
    assert torch_names()["losses"]["HuberLoss"] == {
        "required": [],
        "optional": ["reduction", "delta"],
    }


@pytest.mark.subprocess
def test_cli_and_validation_import_no_torch() -> None:
    code = (
        "import sys\n"
        "import slm_lab.cli.main\n"
        "from slm_lab.spec import spec_util\n"
        "spec_util.get_spec('benchmark/ppo/ppo_cartpole.json', 'ppo_cartpole')\n"
        "spec_util.get_spec('benchmark/dqn/dqn_cartpole.json', 'dqn_cartpole')\n"
        "heavy = [m for m in ('torch', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.cli
@pytest.mark.subprocess
def test_a_training_run_imports_no_dynamo_nor_pandas(tmp_path: Path) -> None:
    """torch.optim would import torch._dynamo (seconds, 170 MB) at the first optimizer; the
    metrics need no pandas. A PPO and a SAC dev run in one fresh process."""
    ppo, sac = make_spec("ppo", max_frame=200), make_spec("random", "Pendulum-v1", max_frame=200)
    sac["agent"] = {
        "name": "sac",
        "algorithm": {"name": "SoftActorCritic", "training_start_step": 50},
        "memory": {"name": "Replay", "batch_size": 16, "max_size": 1000},
        "net": {"type": "MLPNet", "hid_layers": [16], "clip_grad_val": 1.0},
    }
    path = write_spec_file(tmp_path / "s.json", {"ppo": ppo, "sac": sac})
    code = (
        "import sys\n"
        "from slm_lab.cli.main import app\n"
        "for name in ('ppo', 'sac'):\n"
        f"    app(['run', {str(path)!r}, name, 'dev', '--log-level', 'ERROR'], standalone_mode=False)\n"
        "print([m for m in ('torch._dynamo', 'pandas') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(list((tmp_path / "data").iterdir())) == 2


def test_spec_reference_is_generated_from_the_configs() -> None:
    """docs/SPEC.md is `python -m slm_lab.spec.reference`'s output: regenerate it after a change."""
    from slm_lab.spec import reference

    assert (ROOT_DIR / "docs" / "SPEC.md").read_text() == reference.render()


def test_spec_reference_says_what_percentile_scales() -> None:
    """`normalize_advantages: percentile` takes percentiles of advantages every minibatch (as SLM
    Lab v5), not of returns per batch (as DreamerV3): its row in docs/SPEC.md says which."""
    [row] = [
        line
        for line in (ROOT_DIR / "docs" / "SPEC.md").read_text().splitlines()
        if line.startswith("| `normalize_advantages` |")
    ]
    assert "percentiles, updated every minibatch, as SLM Lab v5" in row
    assert "not DreamerV3's percentiles of returns, per batch" in row


def test_readme_names_every_component() -> None:
    """The README's "What is in it" lists every algorithm, memory and net type a spec can name."""
    readme = (ROOT_DIR / "README.md").read_text()
    section = readme.split("## What is in it", 1)[1].split("\n## ", 1)[0]
    for name in [*ALGORITHM_CONFIGS, *MEMORY_NAMES, *NET_TYPES]:
        assert f"`{name}`" in section, name
