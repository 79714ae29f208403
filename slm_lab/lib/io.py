"""Files: atomic writes (temp file + rename), run folders, spec records.

Writes go to a temp file in the same folder, then `os.replace` it over the target: a killed
process leaves either the old file or the new one, never a torn one. No fsync per write: at one
checkpoint every few hundred frames it cost ~8 ms each, and ext4 already orders data before a
replacing rename.
"""

import json
import os
import re
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path("data")
DATA_DIR = DEFAULT_DATA_DIR  # where run folders go (the CLI's --data-dir)
RUN_SPEC_SUFFIX = "_spec.json"


def atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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


def is_run_dir(path: Path) -> bool:
    """A run folder holds its spec record `<name>_spec.json` and an `info/` folder."""
    return path.is_dir() and (path / "info").is_dir() and run_spec_path(path) is not None


# a trial's or session's spec, or a search's best trial as a spec file
_PART_SPEC = re.compile(r"(_t\d+(_s\d+)?|_best)_spec\.json$")


def run_spec_path(run_dir: Path) -> Path | None:
    """The run-level spec record (not a per-trial or per-session one, nor a best spec)."""
    specs = sorted(p for p in run_dir.glob(f"*{RUN_SPEC_SUFFIX}") if not _PART_SPEC.search(p.name))
    return specs[0] if specs else None


SEARCH_STATE_DIR = "tune"  # what makes a folder a search folder: Tune's experiment state
EXPERIMENT_DF = "experiment_df.csv"  # a search's table of trials, written when it finishes
# the rows of the trials that had ended when a search was stopped (Ctrl-C); it resumes
PARTIAL_EXPERIMENT_DF = "experiment_df_so_far.csv"


def is_search_dir(path: Path) -> bool:
    """A search folder holds its spec record and the search's state; no info/ of its own (its
    trials' folders inside have theirs), so it is never taken for a run folder."""
    return path.is_dir() and (path / SEARCH_STATE_DIR).is_dir() and run_spec_path(path) is not None


def latest_run_dir(spec_name: str, search: bool = False) -> Path | None:
    """The newest run folder (`search`: search folder) of exactly this spec (not of a spec
    whose name extends it, nor an enjoy folder)."""
    pattern = re.compile(re.escape(spec_name) + r"_\d{4}_\d{2}_\d{2}_\d{6}_*$")
    kind = is_search_dir if search else is_run_dir
    runs = sorted(
        (p for p in DATA_DIR.glob(f"{spec_name}_*") if pattern.fullmatch(p.name) and kind(p)),
        key=lambda p: p.name,  # timestamped names sort in time order
    )
    return runs[-1] if runs else None
