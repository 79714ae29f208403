"""A run folder's record: `<name>_spec.json` holds the spec as run and `run_info`, how the run
was started; `<name>_t<i>_spec.json` beside it is the trial's spec. Resume, enjoy and the
search read runs back from here (torch-free)."""

import platform
import secrets
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from slm_lab.experiment.layout import RunLayout, new_root, run_spec_path
from slm_lab.lib import io
from slm_lab.spec import schema, spec_util
from slm_lab.spec.schema import Spec

SEED_RANGE = 2**31  # a run's drawn seed is below this
VERSIONED = ("slm-lab", "torch", "gymnasium", "numpy")


@dataclass(frozen=True)
class RunInfo:
    """How a run was started."""

    mode: str  # dev, train or search
    spec_file: str | None = None
    spec_name: str | None = None
    vars: dict[str, str] = field(default_factory=dict)  # the ${placeholders} -s filled
    overrides: dict[str, Any] = field(default_factory=dict)  # the spec paths -s set
    trial: int = 0  # a search trial's index
    search_dir: str | None = None  # a search trial: its search folder
    values: dict[str, Any] | None = None  # a search trial: its searched values
    git_sha: str | None = None
    git_dirty: bool | None = None  # tracked files differed from git_sha's (uncommitted changes)
    versions: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, data: dict[str, Any]) -> "RunInfo":
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def is_search_trial(self) -> bool:
        return self.search_dir is not None


def versions() -> dict[str, str]:
    return {"python": platform.python_version(), **{pkg: version(pkg) for pkg in VERSIONED}}


def with_seed(spec: Spec) -> Spec:
    """The spec with its seed: the one it sets, or a drawn one (recorded, so the run can be
    reproduced)."""
    if spec.meta.random_seed is not None:
        return spec
    return spec.with_values({"meta.random_seed": secrets.randbelow(SEED_RANGE)})


def new_run(spec: Spec, info: RunInfo) -> RunLayout:
    """A new run folder (a search folder in search mode: its trials have the run folders) with
    its record."""
    layout = RunLayout(new_root(spec.name), spec.name)
    try:
        layout.make(("log",) if info.mode == "search" else None)
        sha, dirty = io.git_state()
        info = replace(info, git_sha=sha, git_dirty=dirty, versions=versions(), command=sys.argv)
        write(layout, spec, info, trial=None if info.mode == "search" else 0)
    except OSError:  # e.g. a full disk: no half-made run folder left behind
        shutil.rmtree(layout.root, ignore_errors=True)
        raise
    return layout


def write(layout: RunLayout, spec: Spec, info: RunInfo, trial: int | None) -> None:
    """The run's spec record, and the spec of `trial` (None: none, a search folder)."""
    io.write_json({**spec.to_dict(), "run_info": asdict(info)}, layout.spec_record)
    if trial is not None:
        io.write_json(spec.to_dict(), layout.trial_spec(trial))


def read(root: Path) -> tuple[Spec, RunInfo]:
    """The spec and run info recorded in a run or search folder."""
    data = io.read_json(run_spec_path(root))
    info = RunInfo.of(data.pop("run_info", {}))
    spec = spec_util.validate(data, data.get("name", ""))
    return spec, info


def read_trial_spec(layout: RunLayout, trial: int) -> Spec:
    """The spec a trial ran (a search trial's, with its values)."""
    with schema.quiet():
        return schema.load(io.read_json(layout.trial_spec(trial)), layout.name)


def finished_frames(layout: RunLayout, spec: Spec, sessions: int) -> int | None:
    """The frames a finished run has (its furthest session's); None while a session of trial 0
    has no metrics at the run's max_frame."""
    paths = [layout.session_metrics(0, s) for s in range(sessions)]
    if not all(path.exists() for path in paths):
        return None
    frames = [int(io.read_json(path)["frame"]) for path in paths]
    return max(frames) if min(frames) >= spec.env.max_frame else None
