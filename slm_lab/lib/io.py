"""Files: atomic writes (temp file + rename), JSON, torch checkpoints, where run folders go.

Writes go to a temp file in the same folder, then `os.replace` it over the target: a killed
process leaves either the old file or the new one, never a torn one. No fsync per write: at one
checkpoint every few hundred frames it cost ~8 ms each, and ext4 already orders data before a
replacing rename.
"""

import json
import os
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path("data")
DATA_DIR = DEFAULT_DATA_DIR  # where run folders go (the CLI's --data-dir)


def atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:  # a write's error: name its file
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


def save_torch(obj: Any, path: Path) -> None:
    import torch  # imported when used: the CLI reads and writes run folders without it

    atomic_write(path, lambda f: torch.save(obj, f))


def load_torch(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def write_text(text: str, path: Path) -> None:
    atomic_write(path, lambda f: f.write(text.encode()))


def write_json(obj: Any, path: Path) -> None:
    write_text(json.dumps(obj, indent=2, default=str) + "\n", path)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def timestamp() -> str:
    return datetime.now().strftime("%Y_%m_%d_%H%M%S")


def git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
