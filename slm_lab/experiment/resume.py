"""Continuing a run: the folder `train@`, `search@` or `enjoy@` names, what that folder must
hold to be resumed or replayed, and how `train@ --max-frame` extends a finished run. Each
refusal is a SpecError with the line the CLI prints (torch-free)."""

from dataclasses import dataclass
from pathlib import Path

from slm_lab.experiment import layout, record
from slm_lab.experiment.layout import RunLayout
from slm_lab.experiment.record import RunInfo
from slm_lab.lib import io
from slm_lab.lib.logger import logger
from slm_lab.spec import schema, spec_util
from slm_lab.spec.schema import Spec
from slm_lab.spec.spec_util import SpecError


@dataclass(frozen=True)
class RunToContinue:
    """A run folder to continue (train@, search@) or replay (enjoy@), with the spec and run
    info recorded in it."""

    root: Path
    spec: Spec
    info: RunInfo


def open_run(
    mode: str,
    spec_file: str | None,
    spec_name: str | None,
    respecified: bool,
    max_frame: float | None,
) -> RunToContinue:
    """The run `mode` (`<base>@<folder or latest>`) names, checked for it: `respecified` (-s,
    --sessions or --seed given) is refused, the recorded spec runs; `max_frame` only extends a
    train@ run."""
    base, _, target = mode.partition("@")
    if respecified:
        raise SpecError(
            f"{mode} continues the spec recorded in the run folder: -s, --sessions and --seed do not apply (--max-frame extends a train@ run)"
        )
    if base != "train" and max_frame is not None:
        raise SpecError(f"{mode} continues the run as recorded: --max-frame does not apply")
    root = find_run(base, target, spec_file, spec_name)
    with schema.quiet():  # its warnings were given when the run started
        spec, info = record.read(root)
    _check_continue(base, mode, root, spec, info, spec_name)
    return RunToContinue(root, spec, info)


def find_run(base: str, target: str, spec_file: str | None, spec_name: str | None) -> Path:
    """The run folder (search folder for search@) that `target` names; `latest`: the newest
    run of the spec."""
    search = base == "search"
    if target == "latest":
        if spec_name is None:
            raise SpecError(
                f"{base}@latest: name the spec whose newest run to take (uv run slm-lab run SPEC_FILE SPEC_NAME {base}@latest), or give the folder ({base}@data/<run folder>)"
            )
        with schema.quiet():  # the run's own spec warns when it is read
            name = spec_util.load_spec(spec_file, spec_name).spec.name
        root = layout.latest_run_dir(name, search)
        if root is None:
            raise SpecError(
                f"{base}@latest: no {'search' if search else 'run'} of {name} in {io.DATA_DIR}/"
            )
        return root
    root = Path(target)
    if search and not layout.is_search_dir(root):
        raise SpecError(
            f"{target}: not a search folder (expected a folder made by slm-lab run ... search, with <spec_name>_spec.json and {layout.SEARCH_STATE_DIR}/)"
        )
    if not search and not layout.is_run_dir(root):
        raise SpecError(
            f"{target}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
        )
    return root


def _check_continue(
    base: str, mode: str, root: Path, spec: Spec, info: RunInfo, spec_name: str | None
) -> None:
    """What continuing (train@, search@) or replaying (enjoy@) the run in `root` needs."""
    if base == "train" and info.is_search_trial:
        raise SpecError(
            f"{root} is a trial of the search in {info.search_dir}: resume the search with search@<search folder>, or train the trial's values from a spec file"
        )
    experiment_df = RunLayout(root, spec.name).experiment_df
    if base == "search" and experiment_df.exists():
        raise SpecError(f"{root} is finished: its trials are in {experiment_df}")
    if spec_name is not None and spec_name != info.spec_name:
        logger.info(f"{mode} uses the spec recorded in {root} ({spec.name}), not {spec_name}")


def state_files(run: RunLayout, sessions: range, trial: int = 0) -> list[Path]:
    """The resume state file of each session (written at its checkpoints, read by train@)."""
    return [run.ckpt(trial, s, "latest")[1] for s in sessions]


def resume_train(
    root: Path, spec: Spec, info: RunInfo, sessions: range, max_frame: float | None
) -> tuple[Spec, RunLayout]:
    """The spec and layout of the run in `root` to train further: a finished run needs its
    resume state and a `max_frame` above the frames it has; a `max_frame` above the spec's
    extends the run (its record rewritten), one below it is refused."""
    run = RunLayout(root, spec.name)
    frames = record.finished_frames(run, spec, len(sessions))
    if frames is not None and not all(p.exists() for p in state_files(run, sessions)):
        raise SpecError(
            f"{root} finished without its resume state (--drop-state deleted model/*_ckpt-latest_state.pt), so it cannot be trained further; start a new run"
        )
    if frames is not None and max_frame is None:
        raise SpecError(
            f"{root} is finished: it already has {frames} frames; pass a --max-frame above {frames} to train it further"
        )
    if frames is not None and int(max_frame) <= frames:
        raise SpecError(
            f"--max-frame {int(max_frame)}: {root} already has {frames} frames; pass a --max-frame above {frames} to train it further"
        )
    if max_frame is not None and int(max_frame) < spec.env.max_frame:
        raise SpecError(
            f"--max-frame {int(max_frame)}: {root} runs to max_frame {spec.env.max_frame}; a run can be extended, not shortened"
        )
    if max_frame is not None and int(max_frame) > spec.env.max_frame:
        spec = spec.with_values({"env.max_frame": int(max_frame)})
        record.write(run, spec, info, trial=0)
        logger.info(f"extending {root} to max_frame {int(max_frame)}")
    spec_util.warn_schedules(spec)  # against the max_frame it runs to now
    return spec, run
