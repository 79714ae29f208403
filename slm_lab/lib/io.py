"""Files: atomic writes (temp file + rename), JSON, torch checkpoints, where run folders go.

Writes go to a temp file in the same folder, then `os.replace` it over the target: a killed
process leaves either the old file or the new one, never a torn one. No fsync per write: at one
checkpoint every few hundred frames it cost ~8 ms each, and ext4 already orders data before a
replacing rename. The temp file is made 0600; it takes the mode any new file gets (0666 less the
umask) before it replaces the target.
"""

import errno
import functools
import json
import math
import os
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path("data")
DATA_DIR = DEFAULT_DATA_DIR  # where run folders go (the CLI's --data-dir)
NEW_FILE_MODE = 0o666  # what open() asks for a new file, before the umask
PROC_STATUS = Path("/proc/self/status")  # Linux: holds the umask as `Umask:\t0022`


@functools.cache
def umask() -> int:
    """The process's umask, read once. Linux states it in /proc; elsewhere it is read by
    setting and restoring it, which a file created by another thread in between would get."""
    try:
        for line in PROC_STATUS.read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # no space left; the disk quota reached


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS


def atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, NEW_FILE_MODE & ~umask())
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
    """`obj` as JSON; a NaN or infinity (a metric with too few checkpoints or sessions) as
    null: JSON has no NaN, and most parsers refuse the bare `NaN` Python would write."""
    text = json.dumps(finite_json(obj), indent=2, default=str, allow_nan=False)
    write_text(text + "\n", path)


def finite_json(obj: Any) -> Any:
    """`obj` with every float that is not finite replaced by None, in its dicts, lists and
    tuples."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def read_json(path: Path) -> Any:
    """A JSON file; an older one's bare NaN reads as NaN."""
    return json.loads(Path(path).read_text())


def read_metrics(path: Path) -> dict[str, Any]:
    """A metrics file (`write_json`'s), a null (a metric with no value) read as NaN."""
    return {k: math.nan if v is None else v for k, v in read_json(path).items()}


def timestamp() -> str:
    return datetime.now().strftime("%Y_%m_%d_%H%M%S")


def git_state(where: Path = Path(__file__).parent) -> tuple[str | None, bool | None]:
    """(the commit, whether tracked files differ from it) of the checkout `where` is in (by
    default the one this package runs from), in one `git status`; (None, None) outside a git
    checkout (an installed package)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=where,
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    if out.returncode != 0:
        return None, None
    lines = out.stdout.splitlines()
    sha = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    if sha is None or sha == "(initial)":  # no commit yet
        return None, None
    return sha, any(not line.startswith("#") for line in lines)
