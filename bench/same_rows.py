"""Same seed, same rows: do two versions of SLM Lab train every benchmark spec identically?

`record` runs one session of each benchmark spec (slm_lab/spec/benchmark/**, CPU, one torch
thread, a fixed seed), its agent and schedules built for the spec's own max_frame, for its first
N checkpoints and writes the rows of its session_df (everything but the wall-clock columns) to a
JSON file. `compare` diffs two such files row by row and exits non-zero on any difference.
To check a refactor, record with the old code (e.g. a `git worktree` of the previous commit) and
with the new, then compare:

    uv run python bench/same_rows.py record bench/out/rows_old.json   # in the old checkout
    uv run python bench/same_rows.py record bench/out/rows_new.json
    uv run python bench/same_rows.py compare bench/out/rows_old.json bench/out/rows_new.json

Specs with ${vars} run with -s env=CartPole-v1 -s max_frame=2e5 (the shipped templates are
PPO's); the Atari and MuJoCo spec files are left out (CartPole cannot fill their templates, and
a session of theirs is minutes long). A recording that exists already is continued: specs it holds are not run again.
"""

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK_DIR = ROOT / "slm_lab" / "spec" / "benchmark"
CHECKPOINTS = 20
SEED = 1234
TEMPLATE_VARS = {"env": "CartPole-v1", "max_frame": "2e5"}
WALL_CLOCK_COLUMNS = ("wall_t", "fps")
SKIPPED_FAMILIES = ("atari", "mujoco")

app = typer.Typer(add_completion=False, rich_markup_mode=None)


def spec_names() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(ROOT)), name)
        for path in sorted(BENCHMARK_DIR.rglob("*.json"))
        if not any(family in path.name for family in SKIPPED_FAMILIES)
        for name in json.loads(path.read_text())
    ]


def session_rows(spec_file: str, spec_name: str, checkpoints: int) -> list[dict[str, Any]]:
    import torch

    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.session import Session
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    torch.set_num_threads(1)
    log_setup.setup("WARNING")
    text = (ROOT / spec_file).read_text()
    variables = {k: v for k, v in TEMPLATE_VARS.items() if f"${{{k}}}" in text}
    spec = spec_util.load_spec(spec_file, spec_name, variables).spec
    spec = spec.with_values({"meta.random_seed": SEED, "meta.num_threads": 1})
    with tempfile.TemporaryDirectory(prefix="slm_lab_rows_") as tmp:
        RunLayout(Path(tmp), spec.name).make()
        session = Session(SessionTask(spec, Path(tmp), trial=0, session=0))
        # the agent and its schedules are built for the spec's own max_frame; the session
        # stops after `checkpoints` rows of it
        session.clock.max_frame = min(spec.env.max_frame, checkpoints * spec.meta.log_frequency)
        session.run()
        return [
            {k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS}
            for row in session.tracker.rows
        ]


@app.command()
def record(
    out: Path,
    checkpoints: Annotated[int, typer.Option(help="checkpoints per spec")] = CHECKPOINTS,
    only: Annotated[str | None, typer.Option(help="only spec names containing this")] = None,
) -> None:
    """Run every benchmark spec's first checkpoints and write their rows to OUT (JSON)."""
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    for spec_file, name in spec_names():
        if (only and only not in name) or f"{spec_file}:{name}" in results:
            continue
        start = time.perf_counter()
        results[f"{spec_file}:{name}"] = session_rows(spec_file, name, checkpoints)
        typer.echo(
            f"{name}: {len(results[f'{spec_file}:{name}'])} rows in {time.perf_counter() - start:.1f} s"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))  # after each spec: a killed run keeps them


def same(a: Any, b: Any) -> bool:
    return (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    ) or a == b


@app.command()
def compare(old: Path, new: Path) -> None:
    """Diff two recordings spec by spec and row by row; exit 1 on any difference."""
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    differ = 0
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            typer.echo(f"{key}: only in {'new' if key in b else 'old'}")
            differ += 1
            continue
        bad = [
            (i, col, ra.get(col), rb.get(col))
            for i, (ra, rb) in enumerate(zip(a[key], b[key], strict=False))
            for col in sorted(set(ra) | set(rb))
            if not same(ra.get(col), rb.get(col))
        ]
        if len(a[key]) != len(b[key]) or bad:
            differ += 1
            first = bad[0] if bad else "row counts differ"
            typer.echo(f"{key}: DIFFERENT ({len(a[key])} vs {len(b[key])} rows; first: {first})")
        else:
            typer.echo(f"{key}: identical ({len(a[key])} rows)")
    typer.echo(f"{len(set(a) | set(b)) - differ} identical, {differ} different")
    raise typer.Exit(1 if differ else 0)


if __name__ == "__main__":
    app()
