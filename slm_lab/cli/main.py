"""The `slm-lab` command line.

Module level imports only Typer, so `slm-lab --help` starts in a blink; each command imports
what it uses (spec validation, then torch only once the input is known to be good).
"""

import atexit
import difflib
import os
import signal
import sys
import threading
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:  # the CLI imports each module in the command that uses it
    from slm_lab.experiment.record import RunInfo
    from slm_lab.spec.schema import Spec

app = typer.Typer(
    help="SLM Lab: modular deep reinforcement learning. One spec file describes a whole experiment. `slm-lab SPEC_FILE SPEC_NAME MODE` (no command) is `slm-lab run SPEC_FILE SPEC_NAME MODE`.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with rich took longer than the rest of --help
    context_settings={"help_option_names": ["-h", "--help"]},
)

DEMO_SPEC_FILE = "demo.json"
MODE_WORDS = ("dev", "train", "search", "enjoy")
MODES = (
    "dev",
    "train",
    "search",
    "enjoy@<run folder>",
    "train@<run folder>",
    "train@latest",
    "search@<search folder>",
    "search@latest",
)
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
ENJOY_EPISODES = 10
# what a shortcut option sets: (-s path)
SHORTCUTS = {
    "max_frame": "env.max_frame",
    "sessions": "meta.max_session",
    "seed": "meta.random_seed",
}
DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY")
GLOBAL_OPTIONS = ("-h", "--help", "--version")  # the app's own options, before any command
MB = 2**20
PLOTS_DIR = "plots"  # where `plot` writes, in --data-dir (git-ignored, as the runs are)


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"slm-lab {version('slm-lab')}")
        raise typer.Exit()


@app.callback()
def main(
    version_: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="print the version"
        ),
    ] = False,
) -> None:
    """SLM Lab: modular deep reinforcement learning. One spec file describes a whole experiment. `slm-lab SPEC_FILE SPEC_NAME MODE` (no command) is `slm-lab run SPEC_FILE SPEC_NAME MODE`."""


def _parse_mode(mode: str) -> tuple[str, str]:
    """(base, target) of `dev`, `train`, `enjoy@FOLDER`, `train@FOLDER`, `...@latest`."""
    from slm_lab.spec.spec_util import SpecError, did_you_mean

    base, _, target = mode.partition("@")
    if (base, bool(target)) in (
        ("dev", False),
        ("train", False),
        ("search", False),
        ("enjoy", True),
        ("train", True),
        ("search", True),
    ):
        return base, target
    if base == "enjoy":
        raise SpecError(
            "mode 'enjoy' needs the run to replay: enjoy@<run folder> or enjoy@latest (e.g. uv run slm-lab run enjoy@data/<run folder>)"
        )
    raise SpecError(
        f"mode {mode!r}: unknown; one of {', '.join(MODES)}{did_you_mean(base, MODE_WORDS)}"
    )


def _is_mode(word: str | None) -> bool:
    return word is not None and word.partition("@")[0] in MODE_WORDS


def _pick_spec(
    spec_file: str | None, spec_name: str | None, mode: str
) -> tuple[str | None, str | None, str]:
    """(spec file, spec name, mode) from the positional arguments: a file's only spec when no
    name is given, a mode given in the name's place (`run FILE train`) or in the file's: `run
    train@data/<run>` (the run folder has the spec), `run train` (the demo)."""
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    if _is_mode(spec_file) and spec_name is None and mode == "dev":
        if "@" in spec_file:
            return None, None, spec_file
        spec_file, mode = DEMO_SPEC_FILE, spec_file
    if spec_file is None:
        spec_file = DEMO_SPEC_FILE
    if spec_name is not None and not (_is_mode(spec_name) and mode == "dev"):
        return spec_file, spec_name, mode
    names = list(spec_util.read_spec_file(spec_file, template=True))
    if spec_name is not None and spec_name not in names:  # `run FILE train`: a mode, not a name
        mode, spec_name = spec_name, None
    if spec_name is not None:
        return spec_file, spec_name, mode
    if len(names) != 1:
        raise SpecError(
            f"{spec_file} holds {len(names)} specs ({', '.join(names) or 'none'}); name the one to run: uv run slm-lab run {spec_file} SPEC_NAME"
        )
    return spec_file, names[0], mode


@app.command()
def run(
    spec_file: Annotated[
        str | None,
        typer.Argument(
            help="spec file (JSON/YAML), relative to the working directory or slm_lab/spec/ (default: the demo); or a mode @ a run folder"
        ),
    ] = None,
    spec_name: Annotated[
        str | None,
        typer.Argument(help="name of the spec inside the file (default: the file's only spec)"),
    ] = None,
    mode: Annotated[
        str,
        typer.Argument(
            help="dev | train | search | enjoy@<run folder> | train@<run folder> | train@latest | enjoy@latest | search@<search folder> | search@latest"
        ),
    ] = "dev",
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            "-s",
            help="KEY=VALUE: fills ${KEY} in the spec file, or sets the spec path KEY (e.g. -s agent.net.optim_spec.lr=3e-4); repeatable",
        ),
    ] = None,
    max_frame: Annotated[
        float | None, typer.Option(help="env.max_frame; with train@<run folder>, extends the run")
    ] = None,
    sessions: Annotated[
        int | None, typer.Option(help="meta.max_session (seeds in parallel)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="meta.random_seed")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="where run folders go (default ./data)")
    ] = None,
    render: Annotated[bool, typer.Option(help="render the env while running")] = False,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR")] = "INFO",
    episodes: Annotated[
        int, typer.Option(help="episodes to replay in enjoy mode")
    ] = ENJOY_EPISODES,
    session: Annotated[int, typer.Option(help="the session enjoy replays")] = 0,
    upload_hf: Annotated[
        bool,
        typer.Option(
            "--upload-hf",
            help="when the run (or search) ends, push its folder to the Hugging Face dataset repo HF_REPO (as slm-lab push)",
        ),
    ] = False,
    record_video: Annotated[
        bool,
        typer.Option(
            "--record",
            help="enjoy: write a video of the replayed episodes to the enjoy folder (MP4; GIF without ffmpeg), headless",
        ),
    ] = False,
    keep: Annotated[
        int | None,
        typer.Option(
            help="search: the best N trials keep their model files (default 3; -1: every trial)"
        ),
    ] = None,
    drop_state: Annotated[
        bool,
        typer.Option(
            "--drop-state",
            help="train, dev: once every session finishes, delete the resume state (model/*_ckpt-latest_state.pt: optimizers, replay memory, env state), keeping the model files; a stopped or failed run keeps it to resume",
        ),
    ] = False,
) -> None:
    """Train (dev: 1 session; train: max_session seeds in parallel), replay (enjoy@) or resume (train@) a spec."""
    from slm_lab.lib.util import FULL_INSTALL_FIX, full_install

    if not full_install():
        _fail(f"slm-lab run needs the full install (torch, Gymnasium...): {FULL_INSTALL_FIX}", 1)

    from slm_lab.experiment import record, resume
    from slm_lab.lib import io
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    if log_level.upper() not in LOG_LEVELS:
        _fail(f"--log-level {log_level}: one of DEBUG, INFO, WARNING, ERROR")
    if episodes < 1:
        _fail(f"--episodes {episodes}: must be >= 1")
    if keep is not None and keep < -1:
        _fail(f"--keep {keep}: a number of trials (0 or more), or -1 for every trial")
    if render and sys.platform.startswith("linux") and not any(map(os.environ.get, DISPLAY_VARS)):
        _fail(
            "--render needs a display (DISPLAY is not set); run without --render, or under xvfb-run"
        )
    io.DATA_DIR = data_dir if data_dir is not None else io.DEFAULT_DATA_DIR
    log_setup.setup(log_level)
    try:
        with spec_util.spaces_built_once():  # the checks below ask for them twice
            spec_file, spec_name, mode = _pick_spec(spec_file, spec_name, mode)
            base, target = _parse_mode(mode)
            if target:
                respecified = bool(set_) or sessions is not None or seed is not None
                continued = resume.open_run(mode, spec_file, spec_name, respecified, max_frame)
                root, spec, info = continued.root, continued.spec, continued.info
            else:
                shortcuts = {
                    SHORTCUTS[option]: int(value)
                    for option, value in (
                        ("max_frame", max_frame),
                        ("sessions", sessions),
                        ("seed", seed),
                    )
                    if value is not None
                }
                loaded = spec_util.load_spec(
                    spec_file, spec_name, spec_util.parse_sets(set_ or []), shortcuts
                )
                spec = loaded.spec
                info = record.RunInfo(
                    mode, spec_file, spec_name, loaded.placeholders, loaded.overrides
                )
                if base == "search":
                    spec_util.check_search_run(spec)
                root = None
            if record_video and base != "enjoy":
                raise SpecError(
                    f"--record writes a video of a replay: enjoy@<run folder> --record, not {base}"
                )
            if record_video and render:
                raise SpecError(
                    "--record and --render: one or the other (a video is made headless)"
                )
            if keep is not None and base != "search":
                raise SpecError(
                    f"--keep applies to search mode (the trials that keep their model files), not {base}"
                )
            if drop_state and base not in ("dev", "train"):
                raise SpecError(
                    f"--drop-state applies to dev and train runs (the resume state of their sessions), not {base}"
                )
            # a training run (new or resumed): its sessions start at once
            if base in ("dev", "train"):
                spec_util.check_memory_fit(spec, 1 if info.mode == "dev" else spec.meta.max_session)
                spec_util.check_gpu(spec)
            spec_util.fetch_env_assets(spec)
    except SpecError as e:
        _fail(str(e))
    if upload_hf:
        _check_upload(base)

    try:
        if base == "search":
            _search(spec, info, root, log_level, upload_hf, keep)
        elif base == "enjoy":
            _enjoy(spec, info, root, episodes, render, session, record_video)
        else:
            _train(spec, info, root, mode, max_frame, render, log_level, upload_hf, drop_state)
    except OSError as e:  # the CLI's own writes (a run's record, the trial's files); sessions
        if not io.is_disk_full(e):  # say theirs in their failure line
            raise
        _fail(
            f"the disk is full: no space left to write {e.filename}; free some space, then run again",
            1,
        )


def _train(
    spec: "Spec",
    info: "RunInfo",
    root: Path | None,
    mode: str,
    max_frame: float | None,
    render: bool,
    log_level: str,
    upload_hf: bool,
    drop_state: bool,
) -> None:
    """A new run (`root` None) or the run in `root` continued (extended to `max_frame`); with
    `upload_hf`, its folder pushed to the Hub once it completes; with `drop_state`, its resume
    state deleted once every session finished."""
    from slm_lab.experiment import record
    from slm_lab.experiment.resume import resume_train, state_files
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec.spec_util import SpecError

    resume = root is not None
    dev = info.mode == "dev"
    sessions = range(1 if dev else spec.meta.max_session)
    if resume:
        try:
            spec, layout = resume_train(root, spec, info, sessions, max_frame)
        except SpecError as e:
            _fail(str(e))
    else:
        spec = record.with_seed(spec)
        layout = record.new_run(spec, info)
    log_setup.add_file(str(layout.run_log), log_level)
    logger.info(f"{'resuming' if resume else 'running'} {spec.name} ({mode}) in {layout.root}")

    from slm_lab.experiment import control, stop  # torch loads in the sessions, not here
    from slm_lab.experiment.analysis import counted, format_metrics

    trial = control.Trial(
        spec, layout.root, dev=dev, resume=resume, render=render, log_level=log_level
    )
    metrics = trial.run()
    if trial.stopped:
        if spec.meta.hogwild:  # each worker runs its share: the trial's frame is their sum
            frame = sum(trial.stopped.values())
            where = f"frame {frame} of {spec.env.max_frame} (all {len(trial.stopped)} workers)"
        else:
            where = f"frame {min(trial.stopped.values())} of {spec.env.max_frame}"
        typer.echo(
            f"stopped at {where}, every session saved; resume with: uv run slm-lab run train@{layout.root}",
            err=True,
        )
        # the sessions stopped on a signal of their own (their fork server ended): as SIGTERM
        raise typer.Exit(stop.EXIT_CODES.get(trial.stop_signal, stop.EXIT_CODES[signal.SIGTERM]))
    if metrics is None:
        first_error = next(iter(trial.errors.values()), "unknown error")
        _fail(
            f"no session of {spec.name} completed: {first_error} (traceback in {layout.log_dir})",
            1,
        )
    typer.echo(f"trial_metrics: {format_metrics(metrics)}")
    if trial.eval_metrics is not None:
        typer.echo(f"trial_metrics_eval: {format_metrics(trial.eval_metrics)}")
    if drop_state and not trial.errors:  # a failed session's state resumes it
        dropped = [p for p in state_files(layout, sessions) if p.exists()]
        size = sum(p.stat().st_size for p in dropped)
        for path in dropped:
            path.unlink()
        typer.echo(
            f"resume state deleted (--drop-state): {counted(len(dropped), 'file')}, {size / MB:.1f} MB"
        )
    typer.echo(f"run folder: {layout.root}")
    if upload_hf:
        _upload(layout.root)


def _enjoy(
    spec: "Spec",
    info: "RunInfo",
    root: Path,
    episodes: int,
    render: bool,
    session: int,
    record: bool,
) -> None:
    from slm_lab.experiment import control
    from slm_lab.lib.util import counted
    from slm_lab.spec.spec_util import SpecError

    try:
        result = control.enjoy(spec, root, episodes, render, session, info.trial, record)
    except SpecError as e:
        _fail(str(e))
    typer.echo(
        f"enjoy: {counted(result['episodes'], 'episode')} | mean_return:{result['mean_return']:.2f} | std_return:{result['std_return']:.2f} | checkpoint:{result['checkpoint']}"
    )
    if record:  # the video's path names the folder
        typer.echo(f"video: {result['video']} ({result['video_frames']} frames)")
    else:
        typer.echo(f"enjoy folder: {result['folder']}")


def _search(
    spec: "Spec",
    info: "RunInfo",
    search_dir: Path | None,
    log_level: str,
    upload_hf: bool,
    keep: int | None,
) -> None:
    """Run a new search (`search_dir` None) or resume the one in `search_dir`; prints the best
    trials and the command that validates the best one; with `upload_hf`, pushes the search
    folder (its trials' run folders inside) once it completes. `keep`: the trials that keep
    their model files (None: the default)."""
    from slm_lab.experiment import (
        ray_cluster,  # Ray: after the input is known to be good
        record,
        stop,
    )
    from slm_lab.experiment.layout import KEEP_MODELS, RunLayout
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec.spec_util import SpecError

    started = ray_cluster.start_ray(preload="slm_lab.experiment.search")
    try:
        from slm_lab.experiment import search  # imported while Ray started
    except BaseException:
        if started:
            ray_cluster.stop_ray()
        raise
    try:
        ray_cluster.check_cluster(spec)
        resume = search_dir is not None
        if resume:
            layout = RunLayout(search_dir, spec.name)
        else:
            spec = record.with_seed(spec)
            layout = record.new_run(spec, info)
        log_setup.add_file(str(layout.search_log), log_level)
        logger.info(f"{'resuming' if resume else 'running'} search {spec.name} in {layout.root}")
        summary = search.run(
            spec, layout.root, log_level, resume, KEEP_MODELS if keep is None else keep
        )
    except SpecError as e:
        _fail(str(e))
    except search.WorkersCannotStart as e:
        _fail(f"no trial of {spec.name} could start: {e}", 1)
    except search.SearchStopped as e:
        head = f"search stopped: {len(e.trials)} of {spec.meta.max_trial} trials ended"
        _print_trials(e.trials, spec.name, head)
        typer.echo(f"trials so far: {layout.partial_experiment_df}")
        typer.echo(
            f"search stopped; resume with: uv run slm-lab run search@{layout.root}",
            err=True,
        )
        raise typer.Exit(stop.EXIT_CODES.get(e.signum, stop.EXIT_CODES[signal.SIGINT])) from None
    finally:
        if started:
            ray_cluster.stop_ray()
    _print_summary(summary, spec.name, layout.root)
    if upload_hf:
        _upload(layout.root)


def _print_summary(summary: Any, name: str, search_dir: Path) -> None:
    """The trials, then the command that runs the best one again on new seeds (its score among
    the trials is partly its seeds' luck)."""
    from slm_lab.experiment.layout import RunLayout, validation_name
    from slm_lab.lib.util import counted

    layout = RunLayout(search_dir, name)
    _print_trials(summary.trials, name, f"search: {counted(len(summary.trials), 'trial')}")
    typer.echo(f"experiment table: {layout.experiment_df}")
    if summary.best_spec is None:
        _fail(f"no trial of {name} completed (see {layout.experiment_df})", 1)
    trial = summary.best["trial"]
    best_spec = layout.best_spec.resolve()
    if best_spec.is_relative_to(Path.cwd()):  # a path under the working directory, as typed
        best_spec = best_spec.relative_to(Path.cwd())
    typer.echo(
        f"best: {name}_t{trial}; validate it on new seeds with: uv run slm-lab run {best_spec} {validation_name(name, trial)} train"
    )


def _print_trials(trials: list[dict[str, Any]], name: str, head: str) -> None:
    """`head` with the count of each outcome, then the best trials by total_reward_ma."""
    from slm_lab.experiment.search import METRIC, TOP_TRIALS, value_text

    counts: dict[str, int] = {}
    for t in trials:
        word = t["status"].split(":")[0].removesuffix(" at frame").split(" ")[0]
        counts[word] = counts.get(word, 0) + 1
    typer.echo(" | ".join([head, *(f"{k} {v}" for k, v in sorted(counts.items()))]))
    ranked = sorted(
        (t for t in trials if t[METRIC] == t[METRIC]),  # NaN: errored, no metric
        key=lambda t: t[METRIC],
        reverse=True,
    )
    if ranked:
        typer.echo(f"top trials by {METRIC}:")
    for t in ranked[:TOP_TRIALS]:
        values = " | ".join(
            f"{k}={value_text(v)}"
            for k, v in t.items()
            if k not in ("trial", "status") and "." in k
        )
        typer.echo(f"  {name}_t{t['trial']} | {METRIC}:{t[METRIC]:.4g} | {t['status']} | {values}")


@app.command()
def retro(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="a run folder (data/<run folder>, or one pulled from the Hub), or a search folder"
        ),
    ],
) -> None:
    """Recompute a run's metrics and graphs from the CSVs it wrote: each session's and the
    trial's (a search folder: each trial's, and the experiment table's metrics and graph)."""
    from slm_lab.experiment import retro as retro_analysis
    from slm_lab.experiment.analysis import format_metrics
    from slm_lab.experiment.layout import EVAL_SUFFIX, is_search_dir, prefix
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec.spec_util import SpecError

    log_setup.setup("WARNING")
    try:
        results, notes = retro_analysis.run(run_dir)
    except SpecError as e:
        _fail(str(e))
    for note in notes:
        typer.echo(f"retro: {note}", err=True)
    if not results:
        _fail(f"{run_dir}: no session has the rows the metrics need", 1)
    search = is_search_dir(run_dir)
    for r in results:
        head = f"{prefix(r.layout.name, r.trial)} " if search else ""
        typer.echo(f"{head}trial_metrics: {format_metrics(r.metrics)}")
        if r.eval_metrics is not None:
            typer.echo(f"{head}trial_metrics{EVAL_SUFFIX}: {format_metrics(r.eval_metrics)}")
    typer.echo(f"metrics and graphs rewritten in {run_dir}")


@app.command()
def check(
    spec_file: Annotated[str, typer.Argument(help="spec file to validate")],
    spec_name: Annotated[
        str | None, typer.Argument(help="one spec (default: every spec in the file)")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", "-s", help="KEY=VALUE: fills ${KEY} or sets a spec path (repeatable)"
        ),
    ] = None,
) -> None:
    """Validate specs without running anything. A template spec (with ${vars} left) is checked
    as far as it can be, and the -s it still needs are named."""
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.util import FULL_INSTALL_FIX, full_install
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    log_setup.setup("WARNING")
    try:
        variables = spec_util.parse_sets(set_ or [])
        names = (
            [spec_name]
            if spec_name
            else list(spec_util.read_spec_file(spec_file, variables, template=True))
        )
        # a whole file: -s KEY fills the specs with ${KEY}; the file's others leave it out
        placeholders = spec_util.file_placeholders(spec_file) if not spec_name else {}
    except SpecError as e:
        _fail(str(e))
    file_vars = set().union(*placeholders.values())
    syntax_only = not full_install()  # validation skips the env's spaces (no Gymnasium)
    failed = 0
    for name in names:
        unused = sorted(file_vars & variables.keys() - placeholders.get(name, set()))
        sets = {k: v for k, v in variables.items() if k not in unused}
        try:
            missing = spec_util.check_spec(spec_file, name, sets)
        except SpecError as e:
            failed += 1
            typer.echo(f"error: {name}: {e}", err=True)
            continue
        notes = [f"no ${{{k}}}: -s {k} not used" for k in unused]
        if missing:
            notes.append("template: run it with " + " ".join(f"-s {var}=VALUE" for var in missing))
        if syntax_only:
            notes.append(
                f"syntax only: env spaces not checked without the full install; {FULL_INSTALL_FIX}"
            )
        typer.echo(f"ok: {name}" + (f" ({'; '.join(notes)})" if notes else ""))
    if failed:
        raise typer.Exit(2)


# -- sharing run folders through a Hugging Face dataset repo (slm_lab.lib.hub, torch-free) ------
def _check_upload(base: str) -> None:
    """--upload-hf: refused before the run when the push at its end could not happen."""
    from slm_lab.lib import hub

    if base == "enjoy":
        _fail(
            "--upload-hf pushes a run folder when a dev, train or search run ends; enjoy@ makes none"
        )
    try:
        hub.check_push()
    except hub.HubSetupError as e:
        _fail(f"--upload-hf: {e}")
    except hub.HubError as e:
        _fail(f"--upload-hf: {e}", 1)


def _upload(root: Path) -> None:
    from slm_lab.lib import hub

    try:
        url = hub.push(root)
    except hub.HubError as e:
        _fail(
            f"{e} (the run is complete in {root}; push it later with: uv run slm-lab push {root})",
            1,
        )
    typer.echo(f"pushed {root} to {hub.repo_id()}: {url}")


def _hub_fail(error: Exception) -> NoReturn:
    from slm_lab.lib import hub

    _fail(str(error), 2 if isinstance(error, hub.HubSetupError) else 1)


PATTERN_HELP = "a run folder name or part of one (substring), or a glob over the whole name (with * ? [; the whole name itself matches too), e.g. ppo_cartpole or 'ppo_*_2025_06_*'; a leading data/ is ignored"


@app.command()
def push(
    run_dir: Annotated[
        Path,
        typer.Argument(help="the run (or search) folder, e.g. data/ppo_cartpole_2025_06_01_120000"),
    ],
) -> None:
    """Upload a run folder to data/<its name>/ in the Hugging Face dataset repo HF_REPO (token:
    HF_TOKEN, else hf auth login), less the full training state (*_ckpt-latest_state.pt) and
    anything pickled (*.pkl, a search's Ray Tune state)."""
    from slm_lab.experiment.layout import is_run_dir, is_search_dir
    from slm_lab.lib import hub

    if not (is_run_dir(run_dir) or is_search_dir(run_dir)):
        _fail(
            f"{run_dir}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
        )
    try:
        url = hub.push(run_dir)
        repo = hub.repo_id()
    except hub.HubError as e:
        _hub_fail(e)
    typer.echo(f"pushed {run_dir} to {repo}: {url}")


@app.command("list")
def list_(
    pattern: Annotated[str, typer.Argument(help=f"{PATTERN_HELP} (default: all)")] = "",
) -> None:
    """List the run folders in the Hugging Face dataset repo HF_REPO (its data/<folder>), one per line."""
    from slm_lab.lib import hub

    try:
        repo, names = hub.list_runs(pattern)
    except hub.HubError as e:
        _hub_fail(e)
    for name in names:
        typer.echo(name)
    if not names:
        typer.echo(
            f"no run folder in {repo}" + (f" matches {pattern!r}" if pattern else ""), err=True
        )


@app.command()
def pull(
    pattern: Annotated[str, typer.Argument(help=PATTERN_HELP)],
    list_only: Annotated[
        bool, typer.Option("--list", help="show the matching folders, download nothing")
    ] = False,
    data_dir: Annotated[Path, typer.Option(help="where the run folders go")] = Path("data"),
) -> None:
    """Download the run folders of the Hugging Face dataset repo HF_REPO that match a pattern
    into data/, less any pickle or training state; a folder already there is skipped, not
    overwritten."""
    from slm_lab.lib import hub

    try:
        repo, names = hub.list_runs(pattern)
        if not names:
            _fail(f"no run folder in {repo} matches {pattern!r} (see: uv run slm-lab list)", 1)
        present = [n for n in names if (data_dir / n).exists()]
        if list_only:
            for name in names:
                typer.echo(name + (f" (already in {data_dir / name})" if name in present else ""))
            return
        for name in present:
            typer.echo(f"skip {name}: already in {data_dir / name}")
        missing = [n for n in names if n not in present]
        if missing:
            hub.pull(missing, data_dir)
    except hub.HubError as e:
        _hub_fail(e)
    for name in missing:
        typer.echo(f"pulled {name} -> {data_dir / name}")


def legend_labels(legends: list[str] | None, folders: int) -> list[str] | None:
    """The labels of `-l`, stripped of surrounding spaces: one `-l` for several folders is split
    on commas; a repeated `-l`, or the one `-l` of one folder, is a label each, commas kept."""
    if legends is None:
        return None
    if len(legends) == 1 and folders > 1:
        return [label.strip() for label in legends[0].split(",")]
    return [label.strip() for label in legends]


@app.command("plot")
def plot_runs(
    folders: Annotated[
        list[str],
        typer.Option(
            "--folders",
            "-f",
            help="run folders to compare, comma-separated (or -f repeated): paths, or folder names in --data-dir; a search folder draws each trial; SLM Lab v5 run folders too; with --pool, one -f per cell",
        ),
    ],
    title: Annotated[
        str | None,
        typer.Option(
            "--title", "-t", help="the graph's title, which names its file (default: the env)"
        ),
    ] = None,
    legends: Annotated[
        list[str] | None,
        typer.Option(
            "--legends",
            "-l",
            help="legend labels, one per folder: comma-separated, or -l once per folder (each one label, commas kept); one folder's one -l is one label (default: the spec names)",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="where the PNG goes (default: <data-dir>/plots)"),
    ] = None,
    data_dir: Annotated[Path, typer.Option(help="where to look for a folder given by name")] = Path(
        "data"
    ),
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            "-m",
            help="total_reward_ma, or total_reward (the mean return of the last 100 episodes, which the moving average trails)",
        ),
    ] = "total_reward_ma",
    pool: Annotated[
        bool,
        typer.Option(
            "--pool",
            help="each -f is a cell: the runs of one spec, drawn as one curve, the mean and 95% bootstrap CI over all sessions of all its runs",
        ),
    ] = False,
) -> None:
    """Compare runs in one graph: each trial's total_reward_ma (or -m total_reward) over frames,
    mean ± std over its sessions, one colour per algorithm; with --pool, each cell's runs as one
    curve."""
    from slm_lab.experiment import plot
    from slm_lab.experiment.analysis import counted

    groups = [[f.strip() for f in group.split(",") if f.strip()] for group in folders]
    groups = [group for group in groups if group]
    names = [name for group in groups for name in group]
    drawn, unit = (len(groups), "cell") if pool else (len(names), "folder")
    labels = legend_labels(legends, drawn)
    try:
        if not names:
            raise plot.PlotError("--folders: no folder given (e.g. -f data/run_a,data/run_b)")
        if metric not in plot.METRICS:
            raise plot.PlotError(f"--metric {metric}: give one of {', '.join(plot.METRICS)}")
        if labels is not None and len(labels) != drawn:
            raise plot.PlotError(
                f"--legends: {counted(len(labels), 'label')} for {counted(drawn, unit)}; give one per {unit}"
            )
        if pool:
            curves = [
                plot.read_pooled_curve(
                    [plot.find_folder(name, data_dir) for name in group],
                    labels[i] if labels else None,
                    metric,
                )
                for i, group in enumerate(groups)
            ]
        else:
            paths = [plot.find_folder(name, data_dir) for name in names]
            curves = [
                curve
                for i, path in enumerate(paths)
                for curve in plot.read_curves(path, labels[i] if labels else None, metric)
            ]
        title = title or plot.default_title(curves, metric)
        path = (output or data_dir / PLOTS_DIR) / plot.file_name(title)
    except plot.PlotError as e:
        _fail(str(e))
    plot.draw(curves, title, path, metric)
    for curve in curves:
        typer.echo(plot.curve_line(curve, metric))
    typer.echo(f"plot: {path}")


@app.command("plot-list")
def plot_list(
    data_dir: Annotated[Path, typer.Argument(help="where the run folders are")] = Path("data"),
) -> None:
    """List the run folders there are to plot; * marks those with trial metrics (a trial that
    ended), ! those whose spec record cannot be read."""
    from slm_lab.experiment import plot
    from slm_lab.experiment.analysis import counted

    try:
        entries = plot.list_runs(data_dir)
    except plot.PlotError as e:
        _fail(str(e))
    if not entries:
        typer.echo(f"no run folders in {data_dir}")
        return
    for e in entries:
        if e.problem is not None:
            typer.echo(f"! {e.name} | {e.problem}")
            continue
        kind = f"search: {counted(e.trial_metrics, 'trial')} ended" if e.search else "run"
        mark = "*" if e.trial_metrics else " "
        typer.echo(f"{mark} {e.name} | {e.algorithm} | {e.env} | {kind}")
    typer.echo("* = has trial metrics (a trial ended); every run folder with rows can be plotted")
    if any(e.problem is not None for e in entries):
        typer.echo("! = its spec record cannot be read, so it cannot be plotted")


@app.command("run-remote")
def run_remote(
    spec_file: Annotated[
        str,
        typer.Argument(
            help="spec file (JSON/YAML) in this repository, relative to the working directory or slm_lab/spec/"
        ),
    ],
    spec_name: Annotated[str, typer.Argument(help="name of the spec inside the file")],
    mode: Annotated[str, typer.Argument(help="train | search")],
    name: Annotated[
        str,
        typer.Option(
            "--name",
            "-n",
            help="the dstack run name (lowercase letters, digits, dashes); an active run of this name is replaced",
        ),
    ],
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", "-s", help="KEY=VALUE: fills ${KEY} or sets a spec path (repeatable)"
        ),
    ] = None,
    gpu: Annotated[
        bool, typer.Option(help="a GPU machine (.dstack/gpu-*.yml); default a CPU one")
    ] = False,
    detach: Annotated[
        bool, typer.Option(help="submit and return (follow it with: dstack attach --logs RUN_NAME)")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="print the dstack call, the task's environment and command, and the task config; submit nothing (needs neither dstack nor HF_REPO/HF_TOKEN)"
        ),
    ] = False,
) -> None:
    """Run a spec on a cloud machine through dstack (dstack apply of a .dstack/ task config);
    the run uploads its folder to the Hugging Face dataset repo HF_REPO. Ctrl-C detaches."""
    from slm_lab.cli import remote
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec.spec_util import SpecError

    log_setup.setup("WARNING")
    try:
        submission = remote.prepare(
            spec_file, spec_name, mode, set_ or [], name, gpu, detach, dry_run
        )
    except (SpecError, remote.RemoteError) as e:
        _fail(str(e))
    if dry_run:
        typer.echo(remote.dry_run_text(submission))
        return
    typer.echo(f"{' '.join(submission.command)}  # the run: {submission.remote_command}")
    code = remote.apply(submission)
    if code:
        raise typer.Exit(code)


def command_args(args: list[str]) -> list[str]:
    """`args` with `run` put first where SLM Lab v5's form leaves it out: `slm-lab SPEC_FILE
    SPEC_NAME train`, `slm-lab --render SPEC_FILE SPEC_NAME dev`. A first argument that is a
    command, a global option (--help, --version) or a near miss of a command (Typer names the
    command it meant) is left as it is."""
    if not args:
        return args
    first = args[0]
    commands = [
        c.name or typer.main.get_command_name(c.callback.__name__) for c in app.registered_commands
    ]
    if first in commands or first in GLOBAL_OPTIONS:
        return args
    looks_like_run = first.startswith("-") or _is_mode(first) or any(c in first for c in "./@")
    if not looks_like_run and difflib.get_close_matches(first, commands, n=1):
        return args
    return ["run", *args]


def cli() -> None:
    """The `slm-lab` console script: the app, with v5's `slm-lab SPEC_FILE SPEC_NAME MODE`.
    A command that ends (with its exit code) ends the process without the interpreter's teardown
    (see `exit_now`); an error that escapes ends it the ordinary way, with its traceback."""
    try:
        app(args=command_args(sys.argv[1:]), prog_name="slm-lab")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            exit_now(e.code or 0)
        raise
    exit_now(0)


def exit_now(code: int) -> NoReturn:
    """End the process as an ordinary exit does, less its last step: non-daemon threads are
    joined and the exit handlers run (loguru's sinks closed, Ray's shutdown, multiprocessing's
    finalizers, temporary folders removed), the standard streams are flushed, and `os._exit`
    skips the interpreter freeing every module's objects one by one, which after a one-session
    run in this process (torch, matplotlib) took 0.9 s of a 13 s PPO CartPole run and writes
    nothing. Every file a run writes is closed before its command returns."""
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at any exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: the process was started with that fd closed
                stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: nothing left to write
            pass
    os._exit(code)


if __name__ == "__main__":
    cli()
