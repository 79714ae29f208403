"""`slm-lab run-remote`: a spec run on a cloud machine through dstack.

The task configs in .dstack/ (cpu or gpu x train or search) run `uv run slm-lab run ...
--upload-hf` in a checkout of this repository on the machine dstack provisions. This module picks
the config, checks here what the remote run needs (a valid spec that the checkout holds, the
Hugging Face repo its folder uploads to, the dstack client) and hands the run's arguments to
`dstack apply` as the environment variables the configs name. A dry run (`dry_run_text`) shows
all of it and submits nothing, without dstack or the Hugging Face variables.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass

from slm_lab import ROOT_DIR
from slm_lab.lib.config import did_you_mean
from slm_lab.spec import spec_util

CONFIG_DIR = ".dstack"
MODES = ("train", "search")
# dstack's rule for a run name (dstack._internal.core.services.validate_dstack_resource_name)
RUN_NAME = re.compile(r"[a-z][a-z0-9-]{1,40}")
HF_VARS = ("HF_REPO", "HF_TOKEN")
GIT_IGNORED = 0  # `git check-ignore -q`: 0 ignored, 1 not ignored, 128 an error (no git repo)
GIT_NOT_IGNORED = 1


class RemoteError(Exception):
    """A remote run that cannot be submitted; the message says why in one line."""


@dataclass(frozen=True)
class Submission:
    """A checked remote run: the `dstack apply` command, run in the repository root, and the
    variables it passes to the task (those the configs' `env` names, less the HF ones)."""

    command: list[str]
    env: dict[str, str]

    @property
    def remote_command(self) -> str:
        """What the task runs: the configs' last command with the variables filled."""
        run = shlex.join([self.env["SPEC_FILE"], self.env["SPEC_NAME"], self.env["MODE"]])
        return " ".join(filter(None, ["uv run slm-lab run", run, self.env["SETS"], "--upload-hf"]))


def config_file(gpu: bool, mode: str) -> str:
    """The task config of the machine kind and mode, relative to the repository root."""
    return f"{CONFIG_DIR}/{'gpu' if gpu else 'cpu'}-{mode}.yml"


def remote_spec_file(spec_file: str) -> str:
    """The spec file's path in the repository, where the remote run finds it: dstack sends the
    machine the git checkout (its tracked files and the untracked ones git does not ignore)."""
    path = spec_util.find_spec_file(spec_file).resolve()
    if not path.is_relative_to(ROOT_DIR):
        raise RemoteError(
            f"{spec_file}: outside the repository ({ROOT_DIR}), which is what the remote machine gets; put the spec file in it"
        )
    relative = str(path.relative_to(ROOT_DIR))
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", relative], cwd=ROOT_DIR, capture_output=True
    ).returncode
    if ignored == GIT_IGNORED:
        raise RemoteError(
            f"{spec_file}: git ignores it, so the remote machine does not get it (dstack sends the repository's git checkout); move it out of the ignored folder"
        )
    if ignored != GIT_NOT_IGNORED:
        raise RemoteError(
            f"{ROOT_DIR}: not a git repository; dstack sends the remote machine a git checkout, so run-remote runs from a git clone of SLM Lab"
        )
    return relative


def prepare(
    spec_file: str,
    spec_name: str,
    mode: str,
    sets: list[str],
    run_name: str,
    gpu: bool,
    detach: bool,
    dry_run: bool = False,
) -> Submission:
    """Check everything the remote run needs that can be checked here; raises SpecError (the
    spec, as `slm-lab check` says it) or RemoteError. A dry run does not need HF_REPO, HF_TOKEN
    nor the dstack client (dry_run_text says which are missing)."""
    if mode not in MODES:
        raise RemoteError(
            f"mode {mode!r}: run-remote runs train or search{did_you_mean(mode, MODES)} (dev, enjoy@ and train@ run here, with slm-lab run)"
        )
    if not RUN_NAME.fullmatch(run_name):
        raise RemoteError(
            f"-n {run_name}: a dstack run name is 2 to 41 lowercase letters, digits and dashes, starting with a letter (e.g. ppo-hopper)"
        )
    config = config_file(gpu, mode)
    if not (ROOT_DIR / config).is_file():
        raise RemoteError(
            f"{config}: not found in {ROOT_DIR}; run-remote runs from a git clone of SLM Lab, which has the dstack task configs"
        )
    loaded = spec_util.load_spec(spec_file, spec_name, spec_util.parse_sets(sets))
    if mode == "search":  # the trial resources are checked on the machine that runs it
        spec_util.check_search_spec(loaded.spec)
    remote_file = remote_spec_file(spec_file)
    missing = [var for var in HF_VARS if not os.environ.get(var)]
    if missing and not dry_run:
        raise RemoteError(
            f"{' and '.join(missing)} not set: the remote run uploads its folder to the Hugging Face dataset repo HF_REPO with the token HF_TOKEN (export HF_REPO=<user>/<dataset> HF_TOKEN=hf_...)"
        )
    if shutil.which("dstack") is None and not dry_run:
        raise RemoteError(
            "dstack: not found; install it with: uv sync --group dstack (then point it at your dstack server: https://dstack.ai/docs/quickstart)"
        )
    command = ["dstack", "apply", "-f", config, "-y", "--name", run_name]
    env = {
        "SPEC_FILE": remote_file,
        "SPEC_NAME": spec_name,
        "MODE": mode,
        "SETS": shlex.join(arg for item in sets for arg in ("-s", item)),
    }
    return Submission(command + (["--detach"] if detach else []), env)


def dry_run_text(submission: Submission) -> str:
    """What a submission would do, for --dry-run: the `dstack apply` command and where it runs,
    the variables the task gets (the token shown only as set or not), the command the machine
    runs, and the task config submitted, as it is."""
    config = submission.command[submission.command.index("-f") + 1]
    hf = {var: os.environ.get(var) for var in HF_VARS}
    shown = {
        **submission.env,
        "HF_REPO": hf["HF_REPO"] or "(not set: export it before submitting)",
        "HF_TOKEN": "(set, not shown)"
        if hf["HF_TOKEN"]
        else "(not set: export it before submitting)",
    }
    dstack = (
        "" if shutil.which("dstack") else " (dstack is not installed here: uv sync --group dstack)"
    )
    return "\n".join(
        [
            "dry run: nothing is submitted",
            f"would run, in {ROOT_DIR}: {shlex.join(submission.command)}{dstack}",
            "with the environment:",
            *(f"  {k}={v}" for k, v in shown.items()),
            f"the machine then runs: {submission.remote_command}",
            f"the task config ({config}):",
            (ROOT_DIR / config).read_text().rstrip("\n"),
        ]
    )


def apply(submission: Submission) -> int:
    """Run `dstack apply` in the repository root (the configs' `repos: ..` and dstack's
    .dstack/profiles.yml are found from there); returns its exit code. From here on, Ctrl-C is
    dstack's (with -y it detaches and the run goes on): this process ignores it, to the end."""
    proc = subprocess.Popen(submission.command, cwd=ROOT_DIR, env={**os.environ, **submission.env})
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return proc.wait()
