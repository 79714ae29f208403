"""The `slm-lab` command line.

Module level imports only Typer, so `slm-lab --help` starts in a blink; each command imports
what it uses (spec validation, then torch only once the input is known to be good).
"""

import os
import platform
import secrets
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="SLM Lab: modular deep reinforcement learning. One spec file describes a whole experiment.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with rich took longer than the rest of --help
    context_settings={"help_option_names": ["-h", "--help"]},
)

DEMO_SPEC_FILE = "demo.json"
DEMO_SPEC_NAME = "ppo_cartpole_demo"
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


def _fail(message: str, code: int = 2) -> None:
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


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("slm-lab", "torch", "gymnasium", "numpy"):
        out[pkg] = version(pkg)
    return out


def _new_run_dir(
    spec: dict[str, Any], sets: dict[str, Any], mode: str, spec_file: str, spec_name: str
) -> Path:
    """A new run folder (a search folder in search mode: its trials have the run folders) with
    the spec record."""
    from slm_lab.lib import io

    if spec["meta"].get("random_seed") is None:
        # recorded below, so the run is reproducible
        spec["meta"]["random_seed"] = secrets.randbelow(2**31)
    run_dir = io.DATA_DIR / f"{spec['name']}_{io.timestamp()}"
    while run_dir.exists():  # two runs started in the same second
        run_dir = run_dir.with_name(run_dir.name + "_")
    for sub in ("log",) if mode == "search" else ("info", "graph", "log", "model"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    record = {
        **spec,
        "run_info": {
            "git_sha": io.git_sha(),
            "versions": _versions(),
            **sets,  # vars: the ${placeholders} filled; overrides: the spec paths set
            "mode": mode,
            "spec_file": spec_file,
            "spec_name": spec_name,
            "command": sys.argv,
        },
    }
    io.write_json(record, run_dir / f"{spec['name']}_spec.json")
    if mode != "search":
        io.write_json(spec, run_dir / f"{spec['name']}_t0_spec.json")
    return run_dir


def _load_run(
    mode: str, target: str, spec_file: str, spec_name: str
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(the spec recorded in a run folder, its run_info, the folder); `latest`: the newest run
    of this spec."""
    from slm_lab.lib import io
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    search = mode.startswith("search")
    if target == "latest":
        name = spec_util.get_spec(spec_file, spec_name)["name"]
        run_dir = io.latest_run_dir(name, search)
        if run_dir is None:
            raise SpecError(
                f"{mode}: no {'search' if search else 'run'} of {name} in {io.DATA_DIR}/"
            )
    else:
        run_dir = Path(target)
        if search and not io.is_search_dir(run_dir):
            raise SpecError(
                f"{target}: not a search folder (expected a folder made by slm-lab run ... search, with <spec_name>_spec.json and {io.SEARCH_STATE_DIR}/)"
            )
        if not search and not io.is_run_dir(run_dir):
            raise SpecError(
                f"{target}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
            )
    record = io.read_json(io.run_spec_path(run_dir))
    run_info = record.pop("run_info", {})
    spec_util.validate(record, record.get("name", ""))
    return record, run_info, run_dir


def _run_finished(run_dir: Path, record: dict[str, Any], sessions: int) -> bool:
    from slm_lab.lib import io

    info = run_dir / "info"
    return all(
        (path := info / f"{record['name']}_t0_s{s}_session_metrics.json").exists()
        and io.read_json(path)["frame"] >= record["env"]["max_frame"]
        for s in range(sessions)
    )


def _parse_mode(mode: str, spec_file: str) -> tuple[str, str]:
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
            f"mode 'enjoy' needs the run to replay: enjoy@<run folder> or enjoy@latest (e.g. slm-lab run {spec_file} NAME enjoy@data/<run folder>)"
        )
    raise SpecError(
        f"mode {mode!r}: unknown; one of {', '.join(MODES)}{did_you_mean(base, MODE_WORDS)}"
    )


def _pick_spec(spec_file: str, spec_name: str | None, mode: str) -> tuple[str, str]:
    """(spec name, mode): a file's only spec when no name is given, or a mode given in its place."""
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    if spec_name is not None and not (spec_name.partition("@")[0] in MODE_WORDS and mode == "dev"):
        return spec_name, mode
    names = list(spec_util.read_spec_file(spec_file, template=True))
    if spec_name is not None and spec_name not in names:  # `run FILE train`: a mode, not a name
        mode, spec_name = spec_name, None
    if spec_name is not None:
        return spec_name, mode
    if len(names) != 1:
        raise SpecError(
            f"{spec_file} holds {len(names)} specs ({', '.join(names) or 'none'}); name the one to run: slm-lab run {spec_file} SPEC_NAME"
        )
    return names[0], mode


@app.command()
def run(
    spec_file: Annotated[
        str,
        typer.Argument(
            help="spec file (JSON/YAML), relative to the working directory or slm_lab/spec/"
        ),
    ] = DEMO_SPEC_FILE,
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
    from slm_lab.lib import io
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec import spec_util
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
        sets = spec_util.parse_sets(set_ or [])
        for option, value in (("max_frame", max_frame), ("sessions", sessions), ("seed", seed)):
            if value is not None:
                sets[SHORTCUTS[option]] = str(int(value))
        spec_name, mode = _pick_spec(spec_file, spec_name, mode)
        base, target = _parse_mode(mode, spec_file)
        if target:
            if set_ or sessions is not None or seed is not None:
                raise SpecError(
                    f"{mode} continues the spec recorded in the run folder: -s, --sessions and --seed do not apply (--max-frame extends a train@ run)"
                )
            if base == "search" and max_frame is not None:
                raise SpecError(
                    f"{mode} continues the search as recorded: --max-frame does not apply"
                )
            spec, run_info, run_dir = _load_run(mode, target, spec_file, spec_name)
            if base == "train" and run_info.get("mode") == "search":
                raise SpecError(
                    f"{run_dir} is a trial of the search in {run_info['search_dir']}: resume the search with search@<search folder>, or train the trial's values from a spec file"
                )
            if base == "search" and (run_dir / io.EXPERIMENT_DF).exists():
                raise SpecError(
                    f"{run_dir} is finished: its trials are in {run_dir / io.EXPERIMENT_DF}"
                )
            if (spec_file, spec_name) != (run_info.get("spec_file"), run_info.get("spec_name")):
                logger.info(
                    f"{mode} uses the spec recorded in {run_dir} ({spec['name']}), not {spec_file} {spec_name}"
                )
        else:
            loaded = spec_util.load_spec(spec_file, spec_name, sets)
            spec = loaded.spec
            if base == "search":
                spec_util.check_search_run(loaded.typed)
    except SpecError as e:
        _fail(str(e))

    if base == "search":
        if target:
            _search(spec, run_info, run_dir, spec_file, spec_name, log_level)
        else:
            sets_record = {"vars": loaded.placeholders, "overrides": loaded.overrides}
            _search(spec, sets_record, None, spec_file, spec_name, log_level)
        return

    from slm_lab.experiment import control  # torch: after the input is known to be good
    from slm_lab.spec import schema

    trial_index = int(run_info.get("trial", 0)) if target else 0  # a search trial's folder
    if base == "enjoy":
        result = control.enjoy(schema.load(spec), run_dir, episodes, render, session, trial_index)
        typer.echo(
            f"enjoy: {result['episodes']} episodes | mean_return:{result['mean_return']:.2f} | std_return:{result['std_return']:.2f} | checkpoint:{result['checkpoint']}"
        )
        return
    resume = bool(target)
    dev = base == "dev" or (resume and run_info.get("mode") == "dev")
    if resume:
        sessions_run = 1 if dev else int(spec["meta"].get("max_session") or 1)
        if max_frame is not None and max_frame > spec["env"]["max_frame"]:
            spec["env"]["max_frame"] = int(max_frame)
            _rewrite_record(run_dir, spec, run_info)
            logger.info(f"extending {run_dir} to max_frame {int(max_frame)}")
        elif _run_finished(run_dir, spec, sessions_run):
            _fail(
                f"{run_dir} is finished (max_frame {spec['env']['max_frame']}); pass --max-frame to train it further"
            )
    else:
        run_dir = _new_run_dir(
            spec,
            {"vars": loaded.placeholders, "overrides": loaded.overrides},
            mode,
            spec_file,
            spec_name,
        )
    log_setup.add_file(str(run_dir / "log" / "run.log"), log_level)
    logger.info(f"{'resuming' if resume else 'running'} {spec['name']} ({mode}) in {run_dir}")
    trial = control.Trial(
        schema.load(spec),  # typed, now that the run's seed is in it
        run_dir,
        dev=dev,
        resume=resume,
        render=render,
        log_level=log_level,
    )
    metrics = trial.run()
    if trial.stopped:
        frame = min(trial.stopped.values())
        typer.echo(
            f"stopped at frame {frame} of {spec['env']['max_frame']}, every session saved; resume with: slm-lab run {spec_file} {spec_name} train@{run_dir}",
            err=True,
        )
        raise typer.Exit(control.stop.EXIT_CODES[trial.stop_signal])
    if metrics is None:
        first_error = next(iter(trial.errors.values()), "unknown error")
        _fail(
            f"no session of {spec['name']} completed: {first_error} (traceback in {run_dir / 'log'})",
            1,
        )
    from slm_lab.experiment.analysis import format_metrics

    typer.echo(f"trial_metrics: {format_metrics(metrics)}")
    if trial.eval_metrics is not None:
        typer.echo(f"trial_metrics_eval: {format_metrics(trial.eval_metrics)}")
    typer.echo(f"run folder: {run_dir}")


def _search(
    spec: dict[str, Any],
    record_info: dict[str, Any],
    search_dir: Path | None,
    spec_file: str,
    spec_name: str,
    log_level: str,
) -> None:
    """Run a new search (`search_dir` None: `record_info` has the -s values to record) or
    resume the one in `search_dir`; prints the best trials and the command that validates the
    best one."""
    from slm_lab.experiment import ray_cluster  # Ray: after the input is known to be good
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec import schema
    from slm_lab.spec.spec_util import SpecError

    started = ray_cluster.start_ray(preload="slm_lab.experiment.search")
    try:
        from slm_lab.experiment import search  # imported while Ray started
    except BaseException:
        if started:
            ray_cluster.stop_ray()
        raise
    try:
        loaded = schema.load(spec, spec["name"])
        ray_cluster.check_cluster(loaded)
        resume = search_dir is not None
        if search_dir is None:
            search_dir = _new_run_dir(spec, record_info, "search", spec_file, spec_name)
        log_setup.add_file(str(search_dir / "log" / "search.log"), log_level)
        logger.info(f"{'resuming' if resume else 'running'} search {spec['name']} in {search_dir}")
        summary = search.run(spec, search_dir, log_level, resume)  # the seed is in it now
    except SpecError as e:
        _fail(str(e))
    except search.SearchStopped as e:
        from slm_lab.lib import io

        head = f"search stopped: {len(e.trials)} of {loaded.meta.max_trial} trials ended"
        _print_trials(e.trials, spec["name"], head)
        typer.echo(f"trials so far: {search_dir / io.PARTIAL_EXPERIMENT_DF}")
        typer.echo(
            f"search stopped; resume with: slm-lab run {spec_file} {spec_name} search@{search_dir}",
            err=True,
        )
        raise typer.Exit(130) from None
    finally:
        if started:
            ray_cluster.stop_ray()
    _print_summary(summary, spec["name"], search_dir)


def _print_summary(summary: Any, name: str, search_dir: Path) -> None:
    from slm_lab.lib import io

    _print_trials(summary.trials, name, f"search: {len(summary.trials)} trials")
    typer.echo(f"experiment table: {search_dir / io.EXPERIMENT_DF}")
    if summary.best_spec is None:
        _fail(f"no trial of {name} completed (see {search_dir / io.EXPERIMENT_DF})", 1)
    typer.echo(
        f"best: {name}_t{summary.best['trial']}; validate it with: slm-lab run {summary.best_spec} {name} train"
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


def _rewrite_record(run_dir: Path, spec: dict[str, Any], run_info: dict[str, Any]) -> None:
    """The run folder's spec records with the new max_frame (the run is being extended)."""
    from slm_lab.lib import io

    io.write_json({**spec, "run_info": run_info}, io.run_spec_path(run_dir))
    io.write_json(spec, run_dir / f"{spec['name']}_t0_spec.json")


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
