"""The `slm-lab` command line.

Module level imports only Typer, so `slm-lab --help` starts in a blink; each command imports
what it uses (spec validation, then torch only once the input is known to be good).
"""

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
)

DEMO_SPEC_FILE = "demo.json"
DEMO_SPEC_NAME = "ppo_cartpole_demo"
MODES = ("dev", "train", "search", "enjoy@<run folder>", "train@<run folder>", "train@latest")
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
ENJOY_EPISODES = 10


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("slm-lab", "torch", "gymnasium", "numpy"):
        out[pkg] = version(pkg)
    return out


def _new_run_dir(spec: dict[str, Any], variables: dict[str, str], mode: str) -> Path:
    from slm_lab.lib import io

    if spec["meta"].get("random_seed") is None:
        # recorded below, so the run is reproducible
        spec["meta"]["random_seed"] = secrets.randbelow(2**31)
    run_dir = io.DATA_DIR / f"{spec['name']}_{io.timestamp()}"
    while run_dir.exists():  # two runs started in the same second
        run_dir = run_dir.with_name(run_dir.name + "_")
    for sub in ("info", "graph", "log", "model"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    record = {
        **spec,
        "run_info": {
            "git_sha": io.git_sha(),
            "versions": _versions(),
            "vars": variables,
            "mode": mode,
            "command": sys.argv,
        },
    }
    io.write_json(record, run_dir / f"{spec['name']}_spec.json")
    io.write_json(spec, run_dir / f"{spec['name']}_t0_spec.json")
    return run_dir


def _load_run(
    target: str, spec_file: str, spec_name: str, variables: dict[str, str]
) -> tuple[dict[str, Any], Path]:
    """The spec recorded in a run folder (`latest`: the newest run of this spec)."""
    from slm_lab.lib import io
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    if target == "latest":
        name = spec_util.get_spec(spec_file, spec_name, variables)["name"]
        run_dir = io.latest_run_dir(name)
        if run_dir is None:
            raise SpecError(f"train@latest: no run of {name} in {io.DATA_DIR}/")
    else:
        run_dir = Path(target)
        if not io.is_run_dir(run_dir):
            raise SpecError(
                f"{target}: not a run folder (expected a folder made by slm-lab run, with <spec_name>_spec.json and info/)"
            )
    record = io.read_json(io.run_spec_path(run_dir))
    record.pop("run_info", None)
    spec_util.validate(record, record.get("name", ""))
    return record, run_dir


@app.command()
def run(
    spec_file: Annotated[
        str,
        typer.Argument(
            help="spec file (JSON/YAML), relative to the working directory or slm_lab/spec/"
        ),
    ] = DEMO_SPEC_FILE,
    spec_name: Annotated[
        str, typer.Argument(help="name of the spec inside the file")
    ] = DEMO_SPEC_NAME,
    mode: Annotated[
        str,
        typer.Argument(
            help="dev | train | search | enjoy@<run folder> | train@<run folder> | train@latest"
        ),
    ] = "dev",
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", "-s", help="substitute ${KEY} in the spec file: -s KEY=VALUE (repeatable)"
        ),
    ] = None,
    render: Annotated[bool, typer.Option(help="render the env while running")] = False,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR")] = "INFO",
    episodes: Annotated[
        int, typer.Option(help="episodes to replay in enjoy mode")
    ] = ENJOY_EPISODES,
) -> None:
    """Train (dev: 1 session; train: max_session seeds in parallel), replay (enjoy@) or resume (train@) a spec."""
    from slm_lab.lib import logger as log_setup
    from slm_lab.lib.logger import logger
    from slm_lab.spec import spec_util
    from slm_lab.spec.spec_util import SpecError

    if log_level.upper() not in LOG_LEVELS:
        _fail(f"--log-level {log_level}: one of DEBUG, INFO, WARNING, ERROR")
    log_setup.setup(log_level)
    try:
        variables = spec_util.parse_sets(set_ or [])
        base, _, target = mode.partition("@")
        if mode == "search":
            _fail("search mode is not available yet (it lands with the Ray Tune search work)", 1)
        if (base, bool(target)) not in (
            ("dev", False),
            ("train", False),
            ("enjoy", True),
            ("train", True),
        ):
            raise SpecError(
                f"mode {mode!r}: unknown; one of {', '.join(MODES)}{spec_util.did_you_mean(base, ('dev', 'train', 'search', 'enjoy'))}"
            )
        if target:
            spec, run_dir = _load_run(target, spec_file, spec_name, variables)
        else:
            spec = spec_util.get_spec(spec_file, spec_name, variables)
    except SpecError as e:
        _fail(str(e))

    from slm_lab.experiment import control  # torch: after the input is known to be good
    from slm_lab.spec import schema

    if base == "enjoy":
        result = control.enjoy(schema.load(spec), run_dir, episodes, render)
        typer.echo(
            f"enjoy: {result['episodes']} episodes | mean_return:{result['mean_return']:.2f} | std_return:{result['std_return']:.2f} | checkpoint:{result['checkpoint']}"
        )
        return
    resume = bool(target)
    if not resume:
        run_dir = _new_run_dir(spec, variables, mode)
    log_setup.add_file(str(run_dir / "log" / "run.log"), log_level)
    logger.info(f"{'resuming' if resume else 'running'} {spec['name']} ({mode}) in {run_dir}")
    trial = control.Trial(
        schema.load(spec),  # typed, now that the run's seed is in it
        run_dir,
        dev=(base == "dev"),
        resume=resume,
        render=render,
        log_level=log_level,
    )
    metrics = trial.run()
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


@app.command()
def check(
    spec_file: Annotated[str, typer.Argument(help="spec file to validate")],
    spec_name: Annotated[
        str | None, typer.Argument(help="one spec (default: every spec in the file)")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="-s KEY=VALUE for ${KEY} (repeatable)")
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
