"""An in-memory stand-in for the Hugging Face Hub HTTP API, for tests without internet.

It speaks the routes huggingface_hub 2.4 and transformers 5 really call to push and pull model
repositories: create a repo, pre-upload, NDJSON commits with base64
file contents, model / revision info, tree listings, and ``resolve`` downloads with the headers the
client caches by. Every commit keeps its own snapshot, so any past commit id can be pulled.
Errors carry the ``X-Error-Code`` the client turns into `RepositoryNotFoundError`,
`RevisionNotFoundError` and `RemoteEntryNotFoundError`.

Usage::

    with HubServer() as hub:          # 127.0.0.1, a free port, a background thread
        env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "test-token", ...}
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

USER = "test-user"
ORGANIZATIONS = ("org",)
# The Hub makes a first commit holding a default .gitattributes when a repo is created.
INITIAL_FILES = {".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file: what the Hub reports as a regular file's ``oid`` and ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    oid: str
    title: str
    files: dict[str, bytes]  # the whole snapshot at this commit, path -> content
    date: str


@dataclass
class Repo:
    repo_id: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit oid

    def resolve(self, revision: str) -> Commit | None:
        """A branch name or a full commit id -> the commit (None if unknown)."""
        oid = self.branches.get(revision, revision)
        return self.commits.get(oid)


class HubState:
    """All repositories, guarded by one lock (the server is multi-threaded)."""

    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path) log, for debugging failed tests
        self._counter = 0

    def commit(self, repo: Repo, branch: str, title: str, files: dict[str, bytes]) -> Commit:
        self._counter += 1
        seed = f"{repo.repo_id}\0{branch}\0{self._counter}\0{title}".encode()
        oid = hashlib.sha1(seed).hexdigest()
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        commit = Commit(oid=oid, title=title, files=dict(files), date=now)
        repo.commits[oid] = commit
        repo.branches[branch] = oid
        return commit

    def create_repo(self, repo_id: str, private: bool) -> Repo:
        repo = Repo(repo_id=repo_id, private=private)
        self.repos[repo_id] = repo
        self.commit(repo, "main", "initial commit", INITIAL_FILES)
        return repo


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


_REPO = r"(?P<repo>[\w.\-]+/[\w.\-]+|[\w.\-]+)"
_ROUTES = [
    ("POST", re.compile(r"^/api/repos/create$"), "create_repo"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate_yaml"),
    ("GET", re.compile(r"^/api/whoami-v2$"), "whoami"),
    ("POST", re.compile(rf"^/api/models/{_REPO}/preupload/(?P<rev>[^/]+)$"), "preupload"),
    ("POST", re.compile(rf"^/api/models/{_REPO}/commit/(?P<rev>[^/]+)$"), "commit_route"),
    ("GET", re.compile(rf"^/api/models/{_REPO}/revision/(?P<rev>[^/]+)$"), "model_info"),
    ("GET", re.compile(rf"^/api/models/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$"), "tree"),
    ("GET", re.compile(rf"^/api/models/{_REPO}$"), "model_info"),
    ("HEAD", re.compile(rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    ("GET", re.compile(rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
]


class _Handler(BaseHTTPRequestHandler):
    server_version = "TestHub/1.0"
    protocol_version = "HTTP/1.1"
    state: HubState  # set on the subclass made by HubServer
    endpoint: str

    def log_message(self, format, *args):  # keep pytest output clean
        pass

    # dispatch ----------------------------------------------------------------------------

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method: str):
        url = urlsplit(self.path)
        path = url.path
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        body = self._read_body()
        with self.state.lock:
            self.state.requests.append((method, self.path))
        for route_method, pattern, name in _ROUTES:
            match = pattern.match(path)
            if route_method == method and match:
                params = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                try:
                    with self.state.lock:
                        getattr(self, f"_{name}")(method=method, query=query, body=body, **params)
                except HubError as error:
                    self._send_json({"error": error.message}, error.status, error_code=error.code)
                return
        self._send_json({"error": f"no route for {method} {path}"}, 404)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # responses ----------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, payload, status: int = 200, error_code: str | None = None):
        headers = {}
        if error_code:
            headers["X-Error-Code"] = error_code
            headers["X-Error-Message"] = payload.get("error", "")
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _require_token(self):
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            raise HubError(401, "Invalid credentials in Authorization header")

    def _repo(self, repo_id: str) -> Repo:
        repo = self.state.repos.get(repo_id)
        if repo is None:
            raise HubError(404, f"Repository not found: {repo_id}", "RepoNotFound")
        return repo

    def _commit(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    # routes -------------------------------------------------------------------------------

    def _whoami(self, **_):
        self._require_token()
        orgs = [{"name": name, "type": "org"} for name in ORGANIZATIONS]
        self._send_json({"type": "user", "name": USER, "orgs": orgs, "auth": {"type": "access_token"}})

    def _create_repo(self, body: bytes, **_):
        self._require_token()
        payload = json.loads(body or b"{}")
        if payload.get("type", "model") != "model":
            raise HubError(400, "this test Hub serves model repositories only")
        namespace = payload.get("organization") or USER
        repo_id = f"{namespace}/{payload['name']}"
        url = f"{self.endpoint}/{repo_id}"
        if repo_id in self.state.repos:
            self._send_json({"error": "You already created this model repo", "url": url}, 409)
            return
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        self.state.create_repo(repo_id, private)
        self._send_json({"url": url, "name": repo_id, "id": repo_id})

    def _validate_yaml(self, body: bytes, **_):
        """The body holds a whole README.md; its YAML front matter is the card metadata."""
        import yaml  # a dependency of huggingface_hub

        content = json.loads(body or b"{}").get("content", "")
        match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", content, re.DOTALL)
        if match is None:
            self._send_json({"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]})
            return
        problems = []
        try:
            metadata = yaml.safe_load(match.group(1))
        except yaml.YAMLError as error:
            metadata, problems = None, [f"invalid YAML: {error}"]
        if not problems and not isinstance(metadata, dict):
            problems.append("metadata must be a YAML mapping")
        elif not problems and "model-index" in metadata:
            if not isinstance(metadata["model-index"], list):
                problems.append('"model-index" must be a list')
            else:
                for entry in metadata["model-index"]:
                    for result in entry.get("results", []):
                        if not {"task", "dataset", "metrics"} <= set(result):
                            problems.append('"model-index" results need "task", "dataset" and "metrics"')
        if problems:
            self._send(400, json.dumps({"errors": [{"message": p} for p in problems]}).encode(), "application/json")
            return
        self._send_json({"errors": [], "warnings": []})

    def _preupload(self, repo: str, rev: str, body: bytes, **_):
        self._require_token()
        self._commit(self._repo(repo), rev)
        files = json.loads(body or b"{}").get("files", [])
        # "regular" for every file: contents travel base64 in the commit, no LFS / Xet upload step.
        answer = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None} for f in files]
        self._send_json({"files": answer, "commitOid": self._repo(repo).branches.get(rev)})

    def _commit_route(self, repo: str, rev: str, body: bytes, query: dict, **_):
        self._require_token()
        hub_repo = self._repo(repo)
        if rev not in hub_repo.branches:
            raise HubError(404, f"Invalid rev id: {rev} (commits go to a branch)", "RevisionNotFound")
        parent = hub_repo.resolve(rev)
        files = dict(parent.files)
        title = "commit"
        for line in body.decode("utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                title = value.get("summary") or title
                expected_parent = value.get("parentCommit")
                if expected_parent and expected_parent != parent.oid:
                    raise HubError(412, f"parent commit {expected_parent} is not the head of {rev}")
            elif key == "file":
                if value.get("encoding", "base64") != "base64":
                    raise HubError(400, f"unsupported encoding {value.get('encoding')!r}")
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if files.pop(value["path"], None) is None:
                    raise HubError(404, f"cannot delete missing file {value['path']}", "EntryNotFound")
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                files = {p: c for p, c in files.items() if not p.startswith(prefix)}
            elif key == "lfsFile":
                raise HubError(400, "this test Hub has no LFS storage; preupload answers 'regular' for every file")
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        commit = self.state.commit(hub_repo, rev, title, files)
        self._send_json(
            {"commitUrl": f"{self.endpoint}/{repo}/commit/{commit.oid}", "commitOid": commit.oid, "pullRequestUrl": None}
        )

    def _model_info(self, repo: str, rev: str = "main", **_):
        hub_repo = self._repo(repo)
        commit = self._commit(hub_repo, rev)
        self._send_json(
            {
                "_id": hashlib.sha1(repo.encode()).hexdigest()[:24],
                "id": repo,
                "modelId": repo,
                "author": repo.split("/")[0],
                "sha": commit.oid,
                "lastModified": commit.date,
                "createdAt": next(iter(hub_repo.commits.values())).date,
                "private": hub_repo.private,
                "disabled": False,
                "gated": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "library_name": "transformers",
                "siblings": [{"rfilename": path} for path in sorted(commit.files)],
            }
        )

    def _tree(self, repo: str, rev: str, query: dict, path: str = "", **_):
        commit = self._commit(self._repo(repo), rev)
        path = path.strip("/")
        recursive = query.get("recursive", "false").lower() in ("1", "true")
        prefix = f"{path}/" if path else ""
        under = {p: c for p, c in commit.files.items() if p.startswith(prefix)}
        if path and not under:
            raise HubError(404, f"{path} does not exist at {rev}", "EntryNotFound")
        entries, folders = [], set()
        for file_path, content in sorted(under.items()):
            rest = file_path[len(prefix) :]
            if "/" in rest and not recursive:
                folders.add(prefix + rest.split("/", 1)[0])
                continue
            if "/" in rest:  # recursive listings also name the folders on the way
                parts = rest.split("/")[:-1]
                folders.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
            entries.append({"type": "file", "path": file_path, "size": len(content), "oid": git_blob_sha1(content)})
        folder_entries = [
            {"type": "directory", "path": p, "size": 0, "oid": hashlib.sha1(p.encode()).hexdigest()} for p in sorted(folders)
        ]
        self._send_json(folder_entries + entries)

    def _resolve(self, repo: str, rev: str, path: str, **_):
        hub_repo = self._repo(repo)
        commit = self._commit(hub_repo, rev)
        if path not in commit.files:
            raise HubError(404, f"{path} does not exist at {rev}", "EntryNotFound")
        content = commit.files[path]
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{git_blob_sha1(content)}"', "Accept-Ranges": "bytes"}
        self._send(200, content, "application/octet-stream", headers)


class HubServer:
    """Run the test Hub on 127.0.0.1 (a free port) in a daemon thread; use as a context manager."""

    def __init__(self):
        self.state = HubState()
        handler = type("Handler", (_Handler,), {"state": self.state, "endpoint": ""})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        handler.endpoint = self.url
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="test-hub", daemon=True)

    def start(self) -> "HubServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # helpers for tests ---------------------------------------------------------------------

    def upload(self, repo_id: str, folder, title: str = "upload folder") -> str:
        """Commit every file of a local folder to `repo_id` (created if needed) directly; returns the commit id."""
        from pathlib import Path

        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}
        with self.state.lock:
            repo = self.state.repos.get(repo_id) or self.state.create_repo(repo_id, private=False)
            return self.state.commit(repo, "main", title, {**repo.resolve("main").files, **files}).oid

    def request_count(self) -> int:
        with self.state.lock:
            return len(self.state.requests)

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The snapshot of a repo at a branch or commit (a copy)."""
        with self.state.lock:
            return dict(self.state.repos[repo_id].resolve(revision).files)

    def head(self, repo_id: str, branch: str = "main") -> str:
        with self.state.lock:
            return self.state.repos[repo_id].branches[branch]

    def commits(self, repo_id: str) -> list[str]:
        """Commit ids of a repo, oldest first."""
        with self.state.lock:
            return list(self.state.repos[repo_id].commits)
