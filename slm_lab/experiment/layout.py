"""The run folder's layout: every path a run writes or reads, in one place.

```
data/<name>_<YYYY_MM_DD_HHMMSS>/          a run (or a search: its trials are run folders inside)
  <name>_spec.json                        the spec as run, with run_info
  <name>_t<i>_spec.json                   a trial's spec
  <name>_t<i>_trial_metrics[_eval].json   copies of the trial's metrics and graph
  info/  <prefix>_session_df.csv, <prefix>_eval_df.csv, <prefix>_episodes.csv,
         <prefix>_session_metrics[_eval].json, <name>_t<i>_trial_metrics[_eval].json
  graph/ <prefix>_session_graph[_eval].png, <name>_t<i>_trial_graph[_eval].png
  log/   run.log (search.log), <prefix>.log, tb/<prefix>/ (TensorBoard)
  model/ <prefix>_ckpt-{latest,best}_{model,state}.pt
```
where <prefix> is a session's `<name>_t<trial>_s<session>`. A search writes its best trial i as
the spec `<name>_t<i>_validate` (`<name>_best_spec.json`, no seed): a train run of it, the best
trial on new seeds, is `data/<name>_t<i>_validate_<YYYY_MM_DD_HHMMSS>/`.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from slm_lab.lib import io

SUBDIRS = ("info", "graph", "log", "model")
EVAL_SUFFIX = "_eval"  # the evaluation's metrics and graphs: the training ones' names + this
SPEC_SUFFIX = "_spec.json"
SEARCH_STATE_DIR = "tune"  # what makes a folder a search folder: Tune's folder (never read back)
EXPERIMENT_DF = "experiment_df.csv"  # a search's table of trials, written when it finishes
# the rows of the trials that had ended when a search was stopped (Ctrl-C); it resumes
PARTIAL_EXPERIMENT_DF = "experiment_df_so_far.csv"
VALIDATION_SUFFIX = "_validate"  # a search's best trial, run again on new seeds
KEEP_MODELS = 3  # a search's trials that keep their model files, the best by total_reward_ma
# a trial's or session's spec, or a search's best trial as a spec file
_PART_SPEC = re.compile(r"(_t\d+(_s\d+)?|_best)_spec\.json$")


def prefix(name: str, trial: int, session: int | None = None) -> str:
    """The name a run's files start with: <spec name>_t<trial>[_s<session>]."""
    return f"{name}_t{trial}" + ("" if session is None else f"_s{session}")


def validation_name(name: str, trial: int) -> str:
    """The spec name of a search's best trial run again on new seeds, so its run folder says
    what it is: <name>_t<trial>_validate."""
    return f"{prefix(name, trial)}{VALIDATION_SUFFIX}"


def new_root(name: str) -> Path:
    """A new run folder's path: data/<name>_<YYYY_MM_DD_HHMMSS>, `_` added to the name of a
    run started in the same second as another."""
    root = io.DATA_DIR / f"{name}_{io.timestamp()}"
    while root.exists():
        root = root.with_name(root.name + "_")
    return root


def enjoy_root(run_root: Path) -> Path:
    """Where a replay of the run in `run_root` writes: a folder of its own beside the run, `_`
    added to the name of a replay started in the same second as another."""
    root = io.DATA_DIR / f"{run_root.name}_enjoy_{io.timestamp()}"
    while root.exists():
        root = root.with_name(root.name + "_")
    return root


def run_spec_path(root: Path) -> Path | None:
    """The run-level spec record (not a per-trial or per-session one, nor a best spec)."""
    specs = sorted(p for p in root.glob(f"*{SPEC_SUFFIX}") if not _PART_SPEC.search(p.name))
    return specs[0] if specs else None


def is_run_dir(path: Path) -> bool:
    """A run folder holds its spec record `<name>_spec.json` and an `info/` folder."""
    return path.is_dir() and (path / "info").is_dir() and run_spec_path(path) is not None


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
        (p for p in io.DATA_DIR.glob(f"{spec_name}_*") if pattern.fullmatch(p.name) and kind(p)),
        key=lambda p: p.name,  # timestamped names sort in time order
    )
    return runs[-1] if runs else None


@dataclass(frozen=True)
class RunLayout:
    """The paths of the run folder `root` of the spec `name`."""

    root: Path
    name: str

    def make(self, subdirs: tuple[str, ...] | None = None) -> None:
        """Make the run folder and its subfolders (default: all of SUBDIRS)."""
        for sub in subdirs or SUBDIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @property
    def info(self) -> Path:
        return self.root / "info"

    @property
    def graph_dir(self) -> Path:
        return self.root / "graph"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    # -- specs -------------------------------------------------------------------------------
    @property
    def spec_record(self) -> Path:
        return self.root / f"{self.name}{SPEC_SUFFIX}"

    def trial_spec(self, trial: int) -> Path:
        return self.root / f"{prefix(self.name, trial)}{SPEC_SUFFIX}"

    @property
    def best_spec(self) -> Path:
        """A search's best trial as a runnable spec file."""
        return self.root / f"{self.name}_best{SPEC_SUFFIX}"

    def trial_dir(self, trial: int) -> "RunLayout":
        """A search trial's run folder, inside the search folder."""
        return RunLayout(self.root / prefix(self.name, trial), self.name)

    # -- per session -------------------------------------------------------------------------
    def rows_csv(self, trial: int, session: int, evaluation: bool = False) -> Path:
        """A session's metrics rows (training's, or its evaluations')."""
        kind = "eval_df" if evaluation else "session_df"
        return self.info / f"{prefix(self.name, trial, session)}_{kind}.csv"

    def episodes_csv(self, trial: int, session: int) -> Path:
        return self.info / f"{prefix(self.name, trial, session)}_episodes.csv"

    def session_metrics(self, trial: int, session: int, suffix: str = "") -> Path:
        return self.info / f"{prefix(self.name, trial, session)}_session_metrics{suffix}.json"

    def session_graph(self, trial: int, session: int, suffix: str = "") -> Path:
        return self.graph_dir / f"{prefix(self.name, trial, session)}_session_graph{suffix}.png"

    def ckpt(self, trial: int, session: int, tag: str) -> tuple[Path, Path]:
        """(model, full training state) of a session's `tag` checkpoint (latest or best)."""
        pre = prefix(self.name, trial, session)
        return (
            self.model_dir / f"{pre}_ckpt-{tag}_model.pt",
            self.model_dir / f"{pre}_ckpt-{tag}_state.pt",
        )

    def hogwild_dir(self, trial: int) -> Path:
        """A Hogwild trial's global nets and optimizer state, shared by its workers."""
        return self.model_dir / f"{prefix(self.name, trial)}_global"

    def session_log(self, trial: int, session: int) -> Path:
        return self.log_dir / f"{prefix(self.name, trial, session)}.log"

    def tb_dir(self, trial: int, session: int) -> Path:
        return self.log_dir / "tb" / prefix(self.name, trial, session)

    # -- per trial ---------------------------------------------------------------------------
    def trial_metrics(self, trial: int, suffix: str = "") -> Path:
        return self.info / f"{prefix(self.name, trial)}_trial_metrics{suffix}.json"

    def trial_graph(self, trial: int, suffix: str = "") -> Path:
        return self.graph_dir / f"{prefix(self.name, trial)}_trial_graph{suffix}.png"

    # -- a search ----------------------------------------------------------------------------
    @property
    def experiment_graph(self) -> Path:
        return self.root / f"{self.name}_experiment_graph.png"

    @property
    def search_state(self) -> Path:
        """Tune's own folder (its experiment state and pickles): it marks a search folder, and
        is never read back; `search@<folder>` resumes from the trials' plain files and clears
        it for a new Tuner."""
        return self.root / SEARCH_STATE_DIR

    @property
    def experiment_df(self) -> Path:
        return self.root / EXPERIMENT_DF

    @property
    def partial_experiment_df(self) -> Path:
        return self.root / PARTIAL_EXPERIMENT_DF

    @property
    def ray_log(self) -> Path:
        return self.log_dir / "ray.log"

    @property
    def run_log(self) -> Path:
        return self.log_dir / "run.log"

    @property
    def search_log(self) -> Path:
        return self.log_dir / "search.log"
