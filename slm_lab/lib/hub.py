"""Run folders on a Hugging Face dataset repo (`HF_REPO`), through huggingface_hub: push one,
list them, pull the ones a pattern matches. Torch-free, so a minimal install can share results.

The repo holds each run folder as `data/<run folder>/`, as `data/` holds it locally, less the
full training state (`*_ckpt-latest_state.pt`: only a resume needs it, and it can be GBs) and
anything pickled (`*.pkl`, a search's Ray Tune state): a run folder is data, never code, and
unpickling runs code. A pull leaves the same files out, whoever pushed them, and writes only
inside the run folders it pulls. The token is huggingface_hub's own: `HF_TOKEN`, else the saved `hf auth login`. It is never printed:
every error leaves here as a `HubError` of one line with the token scrubbed out.
"""

import fnmatch
import glob
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2  # huggingface_hub's HTTP client (declared): its connection errors reach us as they are
from huggingface_hub import HfApi, RepoFile, RepoFolder, get_token, snapshot_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)

from slm_lab.experiment.layout import SEARCH_STATE_DIR

REPO_ENV = "HF_REPO"
REPO_TYPE = "dataset"
REPO_DIR = "data"  # where run folders sit in the repo, as locally
# left out of uploads and downloads: the full training state, for resume only (weights and
# metrics stay), and pickles and Ray Tune's experiment state (cloudpickled objects in JSON):
# loading either runs code, and SLM Lab reads neither back
LEFT_OUT = ["*_ckpt-latest_state.pt", "*.pkl", f"{SEARCH_STATE_DIR}/*state*"]
GLOB_CHARS = "*?["
# the shape of a Hugging Face token (hf_ and 34 letters and digits), scrubbed even when it is
# not the one in use
TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]{30,}")
SCRUBBED = "hf_***"


class HubError(Exception):
    """A Hub call failed; the message is one line, without the token."""


class HubSetupError(HubError):
    """The Hub cannot be called as set up (HF_REPO, the token)."""


def repo_id() -> str:
    repo = os.environ.get(REPO_ENV, "").strip()
    if not repo:
        raise HubSetupError(
            f"{REPO_ENV} is not set: name the dataset repo that holds the runs, e.g. export {REPO_ENV}=<user>/slm-lab-runs"
        )
    if repo.count("/") != 1:
        raise HubSetupError(f"{REPO_ENV}={repo!r}: expected <user or org>/<dataset name>")
    return repo


def write_token() -> str:
    """The token a push needs (huggingface_hub's lookup: HF_TOKEN, else the saved login)."""
    token = get_token()
    if token is None:
        raise HubSetupError(
            "no Hugging Face token: set HF_TOKEN to a token with write access, or run hf auth login"
        )
    return token


def check_push() -> None:
    """What a push needs, checked before a run that pushes at its end: HF_REPO and a token,
    then the repo itself (found, the token accepted), so a typo fails now, not after training."""
    repo, token = repo_id(), write_token()
    api = HfApi(token=token)
    with _one_line(api, repo, token):
        api.dataset_info(repo)


def push(root: Path) -> str:
    """Upload the run folder `root` to `data/<its name>/` in the repo; returns the commit URL."""
    repo, token = repo_id(), write_token()
    api = HfApi(token=token)
    with _one_line(api, repo, token):
        api.dataset_info(repo)  # no retries: a missing repo or no network fails at once
        commit = api.upload_folder(
            repo_id=repo,
            repo_type=REPO_TYPE,
            folder_path=root,
            path_in_repo=f"{REPO_DIR}/{root.name}",
            ignore_patterns=list(LEFT_OUT),
            commit_message=f"Upload {root.name}",
        )
    return commit.commit_url


def matches(name: str, pattern: str) -> bool:
    """A glob (with * ? [) matches the whole folder name, as does the name itself; other text,
    any part of it."""
    pattern = pattern.removeprefix(f"{REPO_DIR}/").rstrip("/")
    if any(c in pattern for c in GLOB_CHARS):
        return name == pattern or fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def left_out(path: str) -> bool:
    """A path in a run folder that push and pull leave out (LEFT_OUT)."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in LEFT_OUT)


def list_runs(pattern: str = "") -> tuple[str, list[str]]:
    """(the repo, the names of its run folders that `pattern` matches, sorted)."""
    repo, token = repo_id(), get_token()
    api = HfApi(token=token)
    with _one_line(api, repo, token):
        sha = api.dataset_info(repo).sha  # no retries: a missing repo or no network fails at once
        try:
            entries = list(
                api.list_repo_tree(repo, path_in_repo=REPO_DIR, repo_type=REPO_TYPE, revision=sha)
            )
        except RemoteEntryNotFoundError:  # no data/ yet: nothing pushed
            entries = []
    names = (Path(e.path).name for e in entries if isinstance(e, RepoFolder))
    return repo, sorted(n for n in names if n not in (".", "..") and matches(n, pattern))


def pull(names: list[str], data_dir: Path) -> None:
    """Download the run folders `names` into `data_dir`. Each lands whole or not at all: the
    files go to a staging folder inside `data_dir` first, then each folder is moved in place."""
    repo, token = repo_id(), get_token()
    api = HfApi(token=token)
    with _one_line(api, repo, token):
        sha = api.dataset_info(repo).sha  # no retries: a missing repo or no network fails at once
        files = [path for name in names for path in run_files(api, repo, sha, name)]
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=data_dir, prefix=".pull-") as staging:
            if files:
                snapshot_download(
                    repo,
                    repo_type=REPO_TYPE,
                    revision=sha,
                    local_dir=staging,
                    # these files exactly: a name's [ or * is no glob here
                    allow_patterns=[glob.escape(path) for path in files],
                    token=token,
                )
            for name in names:
                folder = Path(staging, REPO_DIR, name)
                folder.mkdir(parents=True, exist_ok=True)  # a folder of left-out files only
                folder.rename(data_dir / name)  # one filesystem


def run_files(api: HfApi, repo: str, sha: str, name: str) -> list[str]:
    """The repo paths of the files of the run folder `name` that a pull downloads (LEFT_OUT
    left out). HubError, before anything is written, for a path that would land outside the
    folder (a `..` or an empty part)."""
    folder = f"{REPO_DIR}/{name}"
    entries = api.list_repo_tree(
        repo, path_in_repo=folder, recursive=True, repo_type=REPO_TYPE, revision=sha
    )
    paths = [e.path for e in entries if isinstance(e, RepoFile)]
    for path in paths:
        parts = path.removeprefix(f"{folder}/").split("/")
        if not path.startswith(f"{folder}/") or {"", ".", ".."} & set(parts) or "\\" in path:
            raise HubError(
                f"{repo} holds {path!r}, which a pull would write outside {folder}/; nothing pulled (remove that file from the repo)"
            )
    return [path for path in paths if not left_out(path.removeprefix(f"{folder}/"))]


def scrub(text: str, token: str | None) -> str:
    if token:
        text = text.replace(token, SCRUBBED)
    return TOKEN_SHAPE.sub(SCRUBBED, text)


def _flat(text: str) -> str:
    """Text on one line: huggingface_hub's messages span several."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


@contextmanager
def _one_line(api: HfApi, repo: str, token: str | None) -> Iterator[None]:
    """huggingface_hub's and its HTTP client's errors as one HubError line without the token."""
    try:
        yield
    except HFValidationError as e:
        raise HubSetupError(scrub(f"{REPO_ENV}={repo!r}: {_flat(str(e))}", token)) from e
    except (
        HfHubHTTPError,
        httpx2.TransportError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
    ) as e:
        raise HubError(scrub(_explain(e, api.endpoint, repo, token), token)) from e


def _explain(error: Exception, endpoint: str, repo: str, token: str | None) -> str:
    if isinstance(error, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set: unset it to reach the Hub"
    if isinstance(error, RepositoryNotFoundError):
        private = (
            "your token cannot read it"
            if token
            else "no token is set: set HF_TOKEN or run hf auth login"
        )
        return f"dataset repo {repo} not found at {endpoint} (or it is private and {private}); create it at {endpoint}/new-dataset, or set {REPO_ENV} to one that exists"
    if isinstance(error, HfHubHTTPError):
        status = error.response.status_code
        said = _flat(error.server_message or str(error))
        if status == 401:
            return f"the Hub refused the token (401: {said}); set HF_TOKEN to a valid token, or run hf auth login"
        if status == 403:
            return f"the token may not write to {repo} (403: {said}); use a token with write access"
        return f"the Hub at {endpoint} answered {status}: {said}"
    # no connection: httpx2's error, or snapshot_download's LocalEntryNotFoundError around it
    cause = error.__cause__ if isinstance(error, LocalEntryNotFoundError) else None
    return f"cannot reach the Hub at {endpoint}: {_flat(str(cause or error))}"
