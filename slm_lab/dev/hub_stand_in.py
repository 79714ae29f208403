"""A stand-in for the Hugging Face Hub on the loopback interface, to try `slm-lab push`, `list`,
`pull` and `run --upload-hf` without an account or a network: the part of the Hub's HTTP API
that they reach through huggingface_hub (HfApi.dataset_info, upload_folder, list_repo_tree,
snapshot_download), on dataset repos held in memory (gone when it stops). The tests use it too.

    uv run python -m slm_lab.dev.hub_stand_in            # prints the variables to export
    export HF_ENDPOINT=http://127.0.0.1:<port> HF_REPO=me/slm-lab-runs HF_TOKEN=hf_...
    uv run slm-lab push data/<run folder>               # in another shell

Endpoints (`{repo}` is `owner/name`, `{rev}` a branch or a commit id):
- GET  /api/datasets/{repo}[/revision/{rev}]   repo info: id, sha (the commit), siblings
- GET  /api/datasets/{repo}/tree/{rev}[/{path}] the entries under path (?recursive=true: all files)
- POST /api/datasets/{repo}/preupload/{rev}     upload mode of each file: always "regular", so
                                                 files travel base64 in the commit (no LFS/Xet
                                                 server needed); the blob id of one already there
- POST /api/datasets/{repo}/commit/{rev}        ndjson commit: header, file (base64), deletedFile
- HEAD|GET /datasets/{repo}/resolve/{rev}/{path} a file, with X-Repo-Commit, ETag, Content-Length

As the Hub: a missing repo is 404 with X-Error-Code RepoNotFound (401 for a private one without
a token), a missing path 404 EntryNotFound, a token it does not know 401 "Invalid credentials in
Authorization header", a write without a token 401. `echo_auth` makes every error answer carry
the Authorization header it got in its message, as a careless proxy might, so a test can check
that the client scrubs the token from what it prints.
"""

import base64
import hashlib
import json
import secrets
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any
from urllib.parse import parse_qs, unquote, urlsplit

import typer

BRANCH = "main"
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
POLL_S = 0.02  # how soon the server thread sees a shutdown
GITATTRIBUTES = b"*.pt filter=lfs diff=lfs merge=lfs -text\n"


def git_blob_id(content: bytes) -> str:
    """Git's id of a blob, which the Hub gives regular files (and huggingface_hub compares)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Repo:
    private: bool = False
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # id -> files
    head: str = ""

    def __post_init__(self) -> None:
        self.head = hashlib.sha1(b"initial commit").hexdigest()
        self.commits[self.head] = {".gitattributes": GITATTRIBUTES}  # as the Hub makes a repo

    def files(self, rev: str) -> dict[str, bytes] | None:
        return self.commits.get(self.head if rev == BRANCH else rev)


@dataclass
class HubState:
    tokens: set[str]  # the tokens the Hub knows; each may write
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) as received
    echo_auth: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class Handler(BaseHTTPRequestHandler):
    server: "HubServer"
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub; every answer has a Content-Length

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    # -- plumbing ----------------------------------------------------------------------------
    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        state = self.server.state
        with state.lock:
            state.requests.append((method, url.path))
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            status, headers, payload = self._route(
                method, unquote(url.path), parse_qs(url.query), body
            )
        except Refused as e:
            message = e.message
            if state.echo_auth:
                message += f" (request had Authorization: {self.headers.get('Authorization')})"
            headers = {"X-Error-Message": message} | ({"X-Error-Code": e.code} if e.code else {})
            status, payload = e.status, json.dumps({"error": message}).encode()
        self.send_response(status)
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(payload))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization")
        if auth is None:
            return None
        token = auth.removeprefix("Bearer ")
        if token not in self.server.state.tokens:
            raise Refused(HTTPStatus.UNAUTHORIZED, INVALID_CREDENTIALS)
        return token

    def _repo(self, repo_id: str, write: bool = False) -> Repo:
        token = self._token()
        repo = self.server.state.repos.get(repo_id)
        if repo is None or (repo.private and token is None):
            status = HTTPStatus.UNAUTHORIZED if token is None else HTTPStatus.NOT_FOUND
            raise Refused(status, "Repository not found", "RepoNotFound")
        if write and token is None:
            raise Refused(HTTPStatus.UNAUTHORIZED, "You must be authenticated to write")
        return repo

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            repo_id, rest = "/".join(parts[2:4]), parts[4:]
            repo = self._repo(repo_id, write=method == "POST")
            with self.server.state.lock:
                return self._api(method, repo_id, repo, rest, query, body)
        if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            repo = self._repo("/".join(parts[1:3]))
            with self.server.state.lock:
                return self._resolve(method, repo, parts[4], "/".join(parts[5:]))
        raise Refused(HTTPStatus.NOT_FOUND, f"no route {method} {path}")

    # -- the API -----------------------------------------------------------------------------
    def _api(
        self,
        method: str,
        repo_id: str,
        repo: Repo,
        rest: list[str],
        query: dict[str, list[str]],
        body: bytes,
    ) -> tuple[int, dict[str, str], bytes]:
        kind, rev, path = (rest[0], rest[1], "/".join(rest[2:])) if rest else ("", BRANCH, "")
        files = repo.files(rev)
        if files is None:
            raise Refused(HTTPStatus.NOT_FOUND, f"Invalid rev id: {rev}", "RevisionNotFound")
        sha = repo.head if rev == BRANCH else rev
        if method == "GET" and kind in ("", "revision"):
            siblings = [{"rfilename": p} for p in sorted(files)]
            return self._json(
                {"id": repo_id, "sha": sha, "private": repo.private, "siblings": siblings}
            )
        if method == "GET" and kind == "tree":
            return self._json(tree(files, path, query.get("recursive") == ["true"]))
        if method == "POST" and kind == "preupload":
            entries = json.loads(body)["files"]
            modes = [
                {
                    "path": f["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": git_blob_id(files[f["path"]]) if f["path"] in files else None,
                }
                for f in entries
            ]
            return self._json({"files": modes, "commitOid": sha})
        if method == "POST" and kind == "commit" and rev == BRANCH:
            commit_id = self._commit(repo, files, body)
            url = f"{self.server.endpoint}/datasets/{repo_id}/commit/{commit_id}"
            return self._json({"commitUrl": url, "commitOid": commit_id, "pullRequestUrl": None})
        raise Refused(HTTPStatus.NOT_FOUND, f"no route {method} {kind}")

    def _commit(self, repo: Repo, files: dict[str, bytes], body: bytes) -> str:
        new = dict(files)
        for line in body.splitlines():
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "file" and value.get("encoding") == "base64":
                new[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                new.pop(value["path"], None)
            elif key != "header":  # lfsFile: never asked for (preupload says "regular")
                raise Refused(HTTPStatus.BAD_REQUEST, f"unsupported commit operation {key}")
        commit_id = hashlib.sha1(f"{repo.head}{len(repo.commits)}".encode() + body).hexdigest()
        repo.commits[commit_id] = new
        repo.head = commit_id
        return commit_id

    def _resolve(
        self, method: str, repo: Repo, rev: str, path: str
    ) -> tuple[int, dict[str, str], bytes]:
        files = repo.files(rev)
        if files is None:
            raise Refused(HTTPStatus.NOT_FOUND, f"Invalid rev id: {rev}", "RevisionNotFound")
        if path not in files:
            raise Refused(HTTPStatus.NOT_FOUND, "Entry not found", "EntryNotFound")
        content = files[path]
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": f'"{git_blob_id(content)}"',
            "X-Repo-Commit": repo.head if rev == BRANCH else rev,
        }
        return HTTPStatus.OK, headers, content

    @staticmethod
    def _json(data: Any) -> tuple[int, dict[str, str], bytes]:
        return HTTPStatus.OK, {}, json.dumps(data).encode()


def tree(files: dict[str, bytes], path: str, recursive: bool) -> list[dict[str, Any]]:
    """The Hub's tree entries under `path`: its files and folders (all files below it when
    recursive, with the folders on the way)."""
    prefix = f"{path}/" if path else ""
    below = {p: c for p, c in files.items() if p.startswith(prefix)}
    if path and not below:
        raise Refused(HTTPStatus.NOT_FOUND, f"{path} does not exist", "EntryNotFound")
    folders: set[str] = set()
    entries = []
    for p, content in sorted(below.items()):
        parts = p[len(prefix) :].split("/")
        for depth in range(1, len(parts) if recursive else min(2, len(parts))):
            folders.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            entries.append(
                {"type": "file", "path": p, "size": len(content), "oid": git_blob_id(content)}
            )
    dirs = [
        {"type": "directory", "path": d, "oid": git_blob_id(d.encode())} for d in sorted(folders)
    ]
    return dirs + entries


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState, port: int = 0) -> None:
        super().__init__((HOST, port), Handler)
        self.state = state

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


@contextmanager
def serve(state: HubState) -> Iterator[HubServer]:
    """The stand-in Hub on a free loopback port, in a thread, for the time of the block."""
    server = HubServer(state)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


DEFAULT_REPO = "me/slm-lab-runs"
HOST = "127.0.0.1"  # the loopback interface only: nothing outside this machine reaches it
TOKEN_BYTES = 17  # a made-up token of a real one's shape (hf_ and 34 characters)
app = typer.Typer(add_completion=False)


@app.command()
def main(
    repo: Annotated[
        str, typer.Option(help="the dataset repo it holds (public, empty at start)")
    ] = DEFAULT_REPO,
    port: Annotated[int, typer.Option(help="the port (0: a free one)")] = 0,
    token: Annotated[
        str | None, typer.Option(help="the token it accepts for writes (default: a new one)")
    ] = None,
) -> None:
    """Serve a stand-in Hugging Face Hub on the loopback interface until Ctrl-C, and print the
    variables that point slm-lab at it."""
    token = token or f"hf_{secrets.token_hex(TOKEN_BYTES)}"
    state = HubState(tokens={token}, repos={repo: Repo()})
    server = HubServer(state, port)
    typer.echo(
        f"Hub stand-in at {server.endpoint}, dataset repo {repo} (in memory); Ctrl-C stops it"
    )
    typer.echo(f"export HF_ENDPOINT={server.endpoint} HF_REPO={repo} HF_TOKEN={token}")
    # Ctrl-C stops it also where it started with SIGINT ignored (a shell's background job, a
    # CI runner), which Python leaves ignored: as slm-lab's own commands handle it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server.serve_forever(POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    app()
