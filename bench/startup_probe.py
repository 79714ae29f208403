"""Child of `bench/whole_process.py startup`: when does an `slm-lab run` start stepping its env?

Stamps CLOCK_MONOTONIC (one clock for all processes, so the parent can add the interpreter's own
start) first thing, again after `import torch`, then runs the `slm-lab` app in this process with
`GymVecEnv.step` replaced: its first call writes the three stamps as JSON to STAMPS_PATH and ends
the process there, so nothing after the first step is timed.

usage: python bench/startup_probe.py STAMPS_PATH SPEC_FILE SPEC_NAME [MODE]
"""

# ruff: noqa: E402  (the imports are what is timed, so they follow the stamps)
import time

STARTED = time.clock_gettime(time.CLOCK_MONOTONIC)

import torch  # noqa: F401  (the import is the measurement)

TORCH_IMPORTED = time.clock_gettime(time.CLOCK_MONOTONIC)

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from slm_lab.cli.main import app as slm_lab_app
from slm_lab.env.gym_backend import GymVecEnv

NO_STEP_EXIT = 3


def main(
    stamps_path: Path,
    spec_file: str,
    spec_name: str,
    mode: Annotated[str, typer.Argument(help="dev or train")] = "dev",
) -> None:
    def first_step(env: GymVecEnv, actions: Any) -> Any:
        stamps = {
            "started": STARTED,
            "torch_imported": TORCH_IMPORTED,
            "first_step": time.clock_gettime(time.CLOCK_MONOTONIC),
        }
        stamps_path.write_text(json.dumps(stamps))
        os._exit(0)  # the run is not needed past here; skip its teardown too

    GymVecEnv.step = first_step  # the class attribute: every instance the run builds steps here
    args = ["run", spec_file, spec_name, mode, "--log-level", "WARNING"]
    slm_lab_app(args=args, standalone_mode=False)
    typer.echo(f"slm-lab {' '.join(args)} ended without stepping an env", err=True)
    raise typer.Exit(NO_STEP_EXIT)


if __name__ == "__main__":
    typer.run(main)
