"""The shipped MuJoCo benchmark specs (PPO, SAC, CrossQ) run through the real CLI.

Each spec as shipped (16 envs, its nets, normalization and schedules), for 256 frames with small
batches so that every one trains a few times; the `${env}` templates each on an env that no
per-env spec covers, so that the runs step all eleven MuJoCo v5 envs between them.
"""

import json
import math
from pathlib import Path

import pytest
from conftest import invoke, read_session_df, run_dirs

from slm_lab import SPEC_DIR

MAX_FRAME = 256  # 16 vector steps of 16 envs
MUJOCO_FILES = ["ppo/ppo_mujoco.json", "sac/sac_mujoco.json", "crossq/crossq_mujoco.json"]
TEMPLATE_ENVS = {  # the env each ${env} template runs on here
    "ppo_mujoco": "HumanoidStandup-v5",
    "ppo_mujoco_longhorizon": "Reacher-v5",
    "ppo_mujoco_tianshou": "Walker2d-v5",
    "sac_mujoco": "Hopper-v5",
    "crossq_mujoco": "Walker2d-v5",
}
PPO_SMALL = {  # a batch of 8 steps x 16 envs = 128 frames: trains at frames 128 and 256
    "agent.algorithm.time_horizon": 8,
    "agent.algorithm.minibatch_size": 64,
    "agent.algorithm.training_epoch": 1,
}
OFF_POLICY_SMALL = {  # trains from frame 128 on, one batch per vector step
    "agent.algorithm.training_start_step": 128,
    "agent.algorithm.training_iter": 1,
    "agent.memory.batch_size": 32,
    "agent.memory.max_size": 1024,
}


def mujoco_specs() -> list[tuple[str, str]]:
    """(spec file under benchmark/, spec name) of every shipped MuJoCo spec."""
    return [
        (file, name)
        for file in MUJOCO_FILES
        for name in json.loads((Path(SPEC_DIR) / "benchmark" / file).read_text())
    ]


@pytest.mark.cli
@pytest.mark.mujoco
@pytest.mark.parametrize(("file", "name"), mujoco_specs())
def test_mujoco_spec_trains_through_the_cli(file: str, name: str, tmp_path: Path) -> None:
    spec_file = Path(SPEC_DIR) / "benchmark" / file
    text = json.dumps(json.loads(spec_file.read_text())[name])  # this spec's own ${vars}
    variables = {"env": TEMPLATE_ENVS.get(name), "max_frame": MAX_FRAME}
    sets = [f"{k}={v}" for k, v in variables.items() if f"${{{k}}}" in text]
    sets += [
        f"{k}={v}" for k, v in (PPO_SMALL if name.startswith("ppo") else OFF_POLICY_SMALL).items()
    ]
    args = ["run", str(spec_file), name, "train", "--max-frame", str(MAX_FRAME), "--sessions", "1"]
    args += ["--data-dir", str(tmp_path)] + [a for s in sets for a in ("-s", s)]
    result = invoke(args)
    assert result.exit_code == 0, result.stderr[-3000:]
    [run_dir] = run_dirs(tmp_path)
    df = read_session_df(run_dir)
    last = df.iloc[-1]
    assert last["frame"] == MAX_FRAME and last["opt_step"] > 0
    assert math.isfinite(last["loss"])
    [vector_line] = [line for line in result.stderr.splitlines() if "vector env: " in line]
    assert "(auto: " in vector_line  # the default mode, resolved for this machine
