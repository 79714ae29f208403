"""Test helpers around the stand-in Hub (slm_lab/dev/hub_stand_in.py): `stand_in` serves it and
points huggingface_hub at it in this process; `fake_run` writes a small run folder to share.
"""

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from huggingface_hub import constants

from slm_lab.dev.hub_stand_in import (  # noqa: F401 (the tests import them from here)
    GITATTRIBUTES,
    HubServer,
    HubState,
    Repo,
    serve,
)

if TYPE_CHECKING:  # test/cli/light_install.py serves it where pytest is not installed
    import pytest

STATE = "_ckpt-latest_state.pt"  # the end of a full training state's name: never uploaded


@contextmanager
def stand_in(state: HubState, home: Path, monkeypatch: "pytest.MonkeyPatch") -> Iterator[HubServer]:
    """The stand-in Hub served, and huggingface_hub pointed at it with its home in `home`: the
    environment for a subprocess (HF_ENDPOINT, HF_HOME, telemetry off, not offline), and for
    calls in this process the settings huggingface_hub read from it when it was imported."""
    with serve(state) as server:
        endpoint = server.endpoint
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        for key in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN_PATH", "HF_OIDC_RESOURCE"):
            monkeypatch.delenv(key, raising=False)
        frozen = {
            "ENDPOINT": endpoint,
            "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
            "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"),
            "HF_TOKEN_PATH": str(home / "token"),
            "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
            "HF_HUB_OFFLINE": False,
            "HF_HUB_DISABLE_TELEMETRY": True,
        }
        for key, value in frozen.items():
            monkeypatch.setattr(constants, key, value)
        yield server


# -- a run folder to share ------------------------------------------------------------------
def fake_run(data_dir: Path, name: str, stamp: str = "2025_06_01_120000") -> dict[str, bytes]:
    """A run folder's files (what slm-lab run writes, in small), written under data_dir/<name>_<stamp>/;
    returns them by path in the folder. The binary ones are random bytes."""
    rng = random.Random(name)
    pre = f"{name}_t0_s0"
    files = {
        f"{name}_spec.json": json.dumps({"env": {"name": "CartPole-v1"}, "run_info": {}}).encode(),
        f"{name}_t0_spec.json": b"{}\n",
        f"{name}_t0_trial_graph.png": rng.randbytes(300),
        f"info/{pre}_session_df.csv": b"frame,total_reward_ma\n100,9.5\n200,21.0\n",
        f"info/{pre}_episodes.csv": b"",
        f"graph/{pre}_session_graph.png": rng.randbytes(400),
        "log/run.log": b"2025-06-01 12:00:00 INFO running\n",
        f"log/tb/{pre}/events.out.tfevents.1748779200.host.1.0": rng.randbytes(200),
        f"model/{pre}_ckpt-latest_model.pt": rng.randbytes(700),
        f"model/{pre}_ckpt-best_model.pt": rng.randbytes(700),
        f"model/{pre}{STATE}": rng.randbytes(3000),
    }
    root = data_dir / f"{name}_{stamp}"
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    return files


def folder_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def shared(files: dict[str, bytes]) -> dict[str, bytes]:
    """What a push uploads of a run folder: all of it but the full training state."""
    return {path: content for path, content in files.items() if not path.endswith(STATE)}
