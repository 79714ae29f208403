"""The `slm-lab` command line.

Module level imports only Typer, so `slm-lab --help` starts in a blink; each command imports
what it uses (spec validation, then torch only once the input is known to be good).
"""

import os
import signal
import sys
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:  # the CLI imports each module in the command that uses it
    from slm_lab.experiment.record import RunInfo
    from slm_lab.spec.schema import Spec

app = typer.Typer(
    help="SLM Lab: modular deep reinforcement learning. One spec file describes a whole experiment.",
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
    """SLM Lab: modular deep reinforcement learning. One spec file describes a whole experiment."""


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


def _find_run(base: str, target: str, spec_file: str | None, spec_name: str | None) -> Path:
    """The run folder (search folder for search@) that `target` names; `latest`: the newest
    run of the spec."""
    from slm_lab.experiment import layout
    from slm_lab.lib import io
    from slm_lab.spec import schema, spec_util
    from slm_lab.spec.spec_util import SpecError

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
) -> None:
    """Train (dev: 1 session; train: max_session seeds in parallel), replay (enjoy@) or resume (train@) a spec."""
    from slm_lab.experiment import record
    from slm_lab.lib import io
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import schema, spec_util
    from slm_lab.spec.spec_util import SpecError

    if log_level.upper() not in LOG_LEVELS:
        _fail(f"--log-level {log_level}: one of DEBUG, INFO, WARNING, ERROR")
    if episodes < 1:
        _fail(f"--episodes {episodes}: must be >= 1")
    if render and sys.platform.startswith("linux") and not any(map(os.environ.get, DISPLAY_VARS)):
        _fail(
            "--render needs a display (DISPLAY is not set); run without --render, or under xvfb-run"
        )
    io.DATA_DIR = data_dir if data_dir is not None else io.DEFAULT_DATA_DIR
    log_setup.setup(log_level)
    try:
        spec_file, spec_name, mode = _pick_spec(spec_file, spec_name, mode)
        base, target = _parse_mode(mode)
        if target:
            if set_ or sessions is not None or seed is not None:
                raise SpecError(
                    f"{mode} continues the spec recorded in the run folder: -s, --sessions and --seed do not apply (--max-frame extends a train@ run)"
                )
            if base != "train" and max_frame is not None:
                raise SpecError(f"{mode} continues the run as recorded: --max-frame does not apply")
            root = _find_run(base, target, spec_file, spec_name)
            with schema.quiet():  # its warnings were given when the run started
                spec, info = record.read(root)
            _check_continue(base, mode, root, spec, info, spec_file, spec_name)
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
            info = record.RunInfo(mode, spec_file, spec_name, loaded.placeholders, loaded.overrides)
            if base == "search":
                spec_util.check_search_run(spec)
            root = None
        if base in ("dev", "train"):  # a training run (new or resumed): its sessions start at once
            spec_util.check_memory_fit(spec, 1 if info.mode == "dev" else spec.meta.max_session)
    except SpecError as e:
        _fail(str(e))

    if base == "search":
        _search(spec, info, root, log_level)
    elif base == "enjoy":
        _enjoy(spec, info, root, episodes, render, session)
    else:
        _train(spec, info, root, mode, max_frame, render, log_level)


def _check_continue(
    base: str,
    mode: str,
    root: Path,
    spec: "Spec",
    info: "RunInfo",
    spec_file: str | None,
    spec_name: str | None,
) -> None:
    """What continuing (train@, search@) or replaying (enjoy@) the run in `root` needs."""
    from slm_lab.experiment.layout import RunLayout
    from slm_lab.lib.logger import logger
    from slm_lab.spec.spec_util import SpecError

    if base == "train" and info.is_search_trial:
        raise SpecError(
            f"{root} is a trial of the search in {info.search_dir}: resume the search with search@<search folder>, or train the trial's values from a spec file"
        )
    experiment_df = RunLayout(root, spec.name).experiment_df
    if base == "search" and experiment_df.exists():
        raise SpecError(f"{root} is finished: its trials are in {experiment_df}")
    if spec_name is not None and spec_name != info.spec_name:
        logger.info(f"{mode} uses the spec recorded in {root} ({spec.name}), not {spec_name}")


def _train(
    spec: "Spec",
    info: "RunInfo",
    root: Path | None,
    mode: str,
    max_frame: float | None,
    render: bool,
    log_level: str,
) -> None:
    """A new run (`root` None) or the run in `root` continued (extended to `max_frame`)."""
    from slm_lab.experiment import record
    from slm_lab.experiment.layout import RunLayout
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec import spec_util

    resume = root is not None
    dev = info.mode == "dev"
    if resume:
        layout = RunLayout(root, spec.name)
        frames = record.finished_frames(layout, spec, 1 if dev else spec.meta.max_session)
        if frames is not None and max_frame is None:
            _fail(
                f"{root} is finished: it already has {frames} frames; pass a --max-frame above {frames} to train it further"
            )
        if frames is not None and int(max_frame) <= frames:
            _fail(
                f"--max-frame {int(max_frame)}: {root} already has {frames} frames; pass a --max-frame above {frames} to train it further"
            )
        if max_frame is not None and int(max_frame) < spec.env.max_frame:
            _fail(
                f"--max-frame {int(max_frame)}: {root} runs to max_frame {spec.env.max_frame}; a run can be extended, not shortened"
            )
        if max_frame is not None and int(max_frame) > spec.env.max_frame:
            spec = spec.with_values({"env.max_frame": int(max_frame)})
            record.write(layout, spec, info, trial=0)
            logger.info(f"extending {root} to max_frame {int(max_frame)}")
        spec_util.warn_schedules(spec)  # against the max_frame it runs to now
    else:
        spec = record.with_seed(spec)
        layout = record.new_run(spec, info)
    log_setup.add_file(str(layout.run_log), log_level)
    logger.info(f"{'resuming' if resume else 'running'} {spec.name} ({mode}) in {layout.root}")

    from slm_lab.experiment import control, stop  # torch loads in the sessions, not here
    from slm_lab.experiment.analysis import format_metrics

    trial = control.Trial(
        spec, layout.root, dev=dev, resume=resume, render=render, log_level=log_level
    )
    metrics = trial.run()
    if trial.stopped:
        frame = min(trial.stopped.values())
        typer.echo(
            f"stopped at frame {frame} of {spec.env.max_frame}, every session saved; resume with: uv run slm-lab run train@{layout.root}",
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
    typer.echo(f"run folder: {layout.root}")


def _enjoy(
    spec: "Spec", info: "RunInfo", root: Path, episodes: int, render: bool, session: int
) -> None:
    from slm_lab.experiment import control
    from slm_lab.spec.spec_util import SpecError

    try:
        result = control.enjoy(spec, root, episodes, render, session, info.trial)
    except SpecError as e:
        _fail(str(e))
    typer.echo(
        f"enjoy: {result['episodes']} episodes | mean_return:{result['mean_return']:.2f} | std_return:{result['std_return']:.2f} | checkpoint:{result['checkpoint']}"
    )


def _search(spec: "Spec", info: "RunInfo", search_dir: Path | None, log_level: str) -> None:
    """Run a new search (`search_dir` None) or resume the one in `search_dir`; prints the best
    trials and the command that validates the best one."""
    from slm_lab.experiment import (
        ray_cluster,  # Ray: after the input is known to be good
        record,
        stop,
    )
    from slm_lab.experiment.layout import RunLayout
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
        summary = search.run(spec, layout.root, log_level, resume)
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


def _print_summary(summary: Any, name: str, search_dir: Path) -> None:
    """The trials, then the command that runs the best one again on new seeds (its score among
    the trials is partly its seeds' luck)."""
    from slm_lab.experiment.layout import RunLayout, validation_name

    layout = RunLayout(search_dir, name)
    _print_trials(summary.trials, name, f"search: {len(summary.trials)} trials")
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
    except SpecError as e:
        _fail(str(e))
    failed = 0
    for name in names:
        try:
            missing = spec_util.check_spec(spec_file, name, variables)
        except SpecError as e:
            failed += 1
            typer.echo(f"error: {name}: {e}", err=True)
            continue
        needs = " ".join(f"-s {var}=VALUE" for var in missing)
        typer.echo(f"ok: {name}" + (f" (template: run it with {needs})" if missing else ""))
    if failed:
        raise typer.Exit(2)


if __name__ == "__main__":
    app()
