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
where <prefix> is a session's `<name>_t<trial>_s<session>`.
"""

from dataclasses import dataclass
from pathlib import Path

SUBDIRS = ("info", "graph", "log", "model")
EVAL_SUFFIX = "_eval"  # the evaluation's metrics and graphs: the training ones' names + this
SPEC_SUFFIX = "_spec.json"


def prefix(name: str, trial: int, session: int | None = None) -> str:
    """The name a run's files start with: <spec name>_t<trial>[_s<session>]."""
    return f"{name}_t{trial}" + ("" if session is None else f"_s{session}")


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
            self.root / "model" / f"{pre}_ckpt-{tag}_model.pt",
            self.root / "model" / f"{pre}_ckpt-{tag}_state.pt",
        )

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
    def run_log(self) -> Path:
        return self.log_dir / "run.log"

    @property
    def search_log(self) -> Path:
        return self.log_dir / "search.log"
