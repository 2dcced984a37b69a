"""A fake of the GitHub REST API subset ghbuild uses, speaking GitHub's JSON; container packages are
backed by a real distribution registry, as in the Docker Hub fake.

Usage::

    with github.start(registry_url="http://127.0.0.1:5001", tokens={"t"}) as gh:
        g = Github(base_url=gh.url, auth=Auth.Token("t"))
        g.get_repo("acme/app").create_git_release("v1.0.0", "v1.0.0", "notes")
        requests.get(gh.url + "/orgs/acme/packages/container/app/versions", headers={"Authorization": "Bearer t"})

Served (every request needs ``Authorization: Bearer <token>`` or ``token <token>``; else 401
``{"message": "Bad credentials", "documentation_url": ...}``):

- ``GET /repos/{owner}/{repo}``: a repository object (``id``, ``full_name``, ``default_branch``, ``url``...).
- Releases: ``POST /repos/{o}/{r}/releases`` -> 201 (422 for a missing or already released tag_name),
  ``GET .../releases`` (newest first, ``per_page``/``page`` with a ``Link`` header),
  ``GET .../releases/tags/{tag}`` (published releases only, else 404), ``GET .../releases/latest``,
  ``GET|PATCH|DELETE .../releases/{id}``.
- Container packages (GHCR), for ``/orgs/{org}``, ``/users/{user}`` and ``/user`` (the token's login):
  ``GET .../packages/container/{name}/versions`` (``per_page``/``page``/``state``, ``Link`` header),
  ``GET|DELETE .../versions/{id}``. The package name is percent-encoded when it holds a slash.
  Each manifest digest of the registry repository is a version: tagged manifests, the children of
  tagged indexes (per-arch manifests, untagged unless a tag points at them, as on GHCR) and any
  digest seen before that is still in the registry (an orphaned, untagged version). Deleting a version
  deletes that digest from the registry (and so every tag on it), as GHCR does.
- ``GET /rate_limit``.
- Actions (what `publish release --records-from` reads): ``GET /repos/{o}/{r}/actions/workflows/{file}``,
  ``GET .../actions/workflows/{file}/runs`` (filters ``branch``, ``event``, ``status``, ``head_sha`` as GitHub
  applies them, newest first), ``GET .../actions/runs/{id}/artifacts``, and
  ``GET .../actions/artifacts/{id}/zip``: a 302 to a signed URL on the same server that serves the zip
  without a token (``/_blobs/...``), as GitHub redirects to blob storage. Runs are added with
  ``add_workflow_run``.
- Git (what proves a commit is on a branch): ``GET /repos/{o}/{r}/compare/{base}...{head}`` (``status``
  ``identical``, ``behind`` when head is an ancestor of base, ``ahead``, ``diverged``; 404 for an unknown
  commit) and ``GET /repos/{o}/{r}/git/ref/{heads|tags}/{name}`` (404 when there is none). Branch histories
  come from ``add_commits``, tags from ``add_tag``.

- Actions caches (what ``ghbuild cache`` and the build's budget check read): the caches list (paginated with
  ``total_count`` and a ``Link`` header), the usage, delete by id, ``pulls/{n}`` and ``branches/{branch}``; see
  github_actions_cache.py for the details and their knobs (``add_cache``, ``add_pull``, ``delete_branch``, ...).

Knobs: ``tokens`` (valid tokens), ``login`` (the user they belong to), ``set_rate_limit`` (primary
limit: 403 with ``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset`` until the reset time),
``secondary_rate_limit_next`` (403/429 with ``retry-after``), ``fail_next`` and the request log
``requests`` (see ``FakeServer``), ``set_created`` for a package version's ``created_at``,
``refuse_last_version`` (GitHub refuses to delete the last version of a package: 400).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import secrets
import threading
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from .dockerhub import bearer_token, utc
from .github_actions_cache import ActionsCacheRoutes
from .httpserver import FakeServer, Request, Response
from .oci import INDEX_TYPES, RegistryClient

DOCS = "https://docs.github.com/rest"
API_VERSION = "2022-11-28"
_SEG = r"([^/]+)"


def gh_time(when: datetime) -> str:
    """GitHub's timestamp format: whole seconds and a Z."""
    return utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")


class GitHubFake(ActionsCacheRoutes, FakeServer):
    """GitHub's REST API for repositories, releases and container package versions.

    registry_url: the distribution registry holding the packages' images (None: packages 404).
    tokens: valid tokens (default {"t"}); ``login``: the user they act as.
    repos: None lets every ``owner/repo`` exist (created on first use); else only those listed
        (more with ``add_repo``).
    orgs: None accepts both the ``/orgs/`` and ``/users/`` package paths for any owner; else owners in
        ``orgs`` are organizations (only ``/orgs/``) and the rest users (only ``/users/``).
    prefix / packages: package ``owner/name`` lives in registry repository ``packages["owner/name"]``
        if given, else ``prefix + "owner/name"``.
    """

    def __init__(self, registry_url: str | None = None, *, tokens: set[str] | tuple[str, ...] = ("t",),
                 login: str = "ghbuild-bot", repos: list[str] | None = None, orgs: set[str] | None = None,
                 prefix: str = "", packages: dict[str, str] | None = None, default_branch: str = "main"):
        super().__init__()
        self.registry = RegistryClient(registry_url) if registry_url else None
        self.tokens: set[str] = set(tokens)
        self.login = login
        self.orgs = {o.lower() for o in orgs} if orgs is not None else None
        self.prefix = prefix
        self.packages = dict(packages or {})
        self.default_branch = default_branch
        self.refuse_last_version = True
        self.rate_limit = 5000
        self._remaining = 5000
        self._reset = int(time.time()) + 3600
        self._ids = itertools.count(1_000_001)
        self._auto_repos = repos is None
        self._repos: dict[str, dict[str, Any]] = {}
        self._releases: dict[str, list[dict[str, Any]]] = {}
        self._latest: dict[str, int | None] = {}
        # "owner/name" (lower) -> {"versions": {digest: v}, "deleted": [...]}
        self._pkg: dict[str, dict[str, Any]] = {}
        self._pending_created: dict[tuple[str, str], datetime] = {}
        self._runs: list[dict[str, Any]] = []
        self._branches: dict[tuple[str, str], list[str]] = {}    # (repo, branch) -> commits, oldest first
        self._tags: dict[tuple[str, str], str] = {}              # (repo, tag) -> commit
        self._blobs: dict[str, bytes] = {}
        self._pkg_locks: dict[str, threading.Lock] = {}
        for full_name in repos or ():
            self.add_repo(full_name)

        repo = rf"/repos/{_SEG}/{_SEG}"
        self.route("GET", r"/rate_limit", self._rate_limit)
        self.route("GET", repo, self._get_repo)
        self.route("GET", rf"{repo}/releases", self._list_releases)
        self.route("POST", rf"{repo}/releases", self._create_release)
        self.route("GET", rf"{repo}/releases/latest", self._latest_release)
        self.route("GET", rf"{repo}/releases/tags/(.+)", self._release_by_tag)
        self.route("GET", rf"{repo}/releases/(\d+)", self._get_release)
        self.route("PATCH", rf"{repo}/releases/(\d+)", self._update_release)
        self.route("DELETE", rf"{repo}/releases/(\d+)", self._delete_release)
        for scope in ("orgs", "users"):
            base = rf"/({scope})/{_SEG}/packages/container/{_SEG}/versions"
            self.route("GET", rf"{base}/?", self._list_versions)
            self.route("GET", rf"{base}/(\d+)", self._get_version)
            self.route("DELETE", rf"{base}/(\d+)", self._delete_version)
        self.route("GET", rf"{repo}/actions/workflows/{_SEG}", self._get_workflow)
        self.route("GET", rf"{repo}/actions/workflows/{_SEG}/runs", self._list_workflow_runs)
        self.route("GET", rf"{repo}/actions/runs/(\d+)/artifacts", self._list_run_artifacts)
        self.route("GET", rf"{repo}/actions/artifacts/(\d+)/zip", self._download_artifact)
        self.route("GET", r"/_blobs/([0-9a-f]+)", self._blob)
        self.route("GET", rf"{repo}/compare/([^/]+)\.\.\.([^/]+)", self._compare)
        self.route("GET", rf"{repo}/git/ref/(heads|tags)/(.+)", self._git_ref)
        self._init_actions_cache()
        self.route("GET", rf"/user/packages/container/{_SEG}/versions/?",
                   lambda req, name: self._list_versions(req, "user", self.login, name))
        self.route("GET", rf"/user/packages/container/{_SEG}/versions/(\d+)",
                   lambda req, name, vid: self._get_version(req, "user", self.login, name, vid))
        self.route("DELETE", rf"/user/packages/container/{_SEG}/versions/(\d+)",
                   lambda req, name, vid: self._delete_version(req, "user", self.login, name, vid))

    # -- knobs ---------------------------------------------------------------------------------

    def add_workflow_run(self, full_name: str, workflow: str, *, head_sha: str, branch: str, event: str = "push",
                         conclusion: str = "success", artifacts: dict[str, dict[str, bytes]] | None = None) -> int:
        """A finished run of `workflow` (its file name) with artifacts {name: {file name: content}}."""
        import io
        import zipfile

        self.add_repo(full_name)
        with self._lock:
            run_id = next(self._ids)
            names = {}
            for name, files in (artifacts or {}).items():
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w") as archive:
                    for file_name, content in files.items():
                        archive.writestr(file_name, content)
                names[name] = (next(self._ids), buf.getvalue())
            self._runs.append({"id": run_id, "repo": full_name.lower(), "workflow": workflow, "head_sha": head_sha,
                               "head_branch": branch, "event": event, "status": "completed",
                               "conclusion": conclusion, "artifacts": names})
        return run_id

    def add_commits(self, full_name: str, branch: str, shas: list[str]) -> None:
        """Append commits (oldest first) to a branch's history; the last one is its head."""
        self.add_repo(full_name)
        with self._lock:
            self._branches.setdefault((full_name.lower(), branch), []).extend(shas)

    def add_tag(self, full_name: str, tag: str, sha: str) -> None:
        self.add_repo(full_name)
        with self._lock:
            self._tags[(full_name.lower(), tag)] = sha

    def add_repo(self, full_name: str, *, default_branch: str | None = None, private: bool = False) -> dict[str, Any]:
        owner, _, name = full_name.partition("/")
        key = full_name.lower()
        with self._lock:
            if key not in self._repos:
                rid = next(self._ids)
                api = f"{self.url or 'http://127.0.0.1'}/repos/{owner}/{name}"
                self._repos[key] = {
                    "id": rid,
                    "node_id": f"R_kgDO{rid}",
                    "name": name,
                    "full_name": f"{owner}/{name}",
                    "private": private,
                    "owner": self._user_object(owner, "Organization" if self._is_org(owner) else "User"),
                    "html_url": f"https://github.com/{owner}/{name}",
                    "description": None,
                    "fork": False,
                    "url": api,
                    "releases_url": api + "/releases{/id}",
                    "tags_url": api + "/tags",
                    "created_at": gh_time(datetime.now(UTC)),
                    "updated_at": gh_time(datetime.now(UTC)),
                    "pushed_at": gh_time(datetime.now(UTC)),
                    "default_branch": default_branch or self.default_branch,
                    "visibility": "private" if private else "public",
                    "archived": False,
                    "disabled": False,
                    "permissions": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
                }
                self._releases[key] = []
                self._latest[key] = None
            return self._repos[key]

    def set_rate_limit(self, remaining: int, reset_in: float = 60.0, limit: int | None = None) -> None:
        """Set the primary rate limit: with ``remaining`` 0 every request is a 403 until ``reset_in`` seconds
        have passed, then the budget is back to ``limit``."""
        with self._lock:
            if limit is not None:
                self.rate_limit = limit
            self._remaining = remaining
            self._reset = math.ceil(time.time() + reset_in)

    def secondary_rate_limit_next(self, path_regex: str = ".*", *, count: int = 1, retry_after: int = 1,
                                  status: int = 403, method: str | None = None) -> None:
        """The next ``count`` matching requests hit a secondary rate limit (``retry-after`` seconds)."""
        self.fail_next(path_regex, status, {"retry-after": str(retry_after)}, count=count, method=method, body={
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                       "If you reach out to GitHub Support for help, please include the request ID "
                       f"{self._request_id()}.",
            "documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/"
                                 "rate-limits-for-the-rest-api#about-secondary-rate-limits",
        })

    def set_created(self, owner: str, name: str, digest: str, when: datetime) -> None:
        """Set a package version's ``created_at`` / ``updated_at`` (before or after it is first listed)."""
        key = f"{owner}/{name}".lower()
        with self._lock:
            version = self._pkg.get(key, {}).get("versions", {}).get(digest)
            if version is None:
                self._pending_created[(key, digest)] = utc(when)
            else:
                version["created"] = version["updated"] = utc(when)

    def registry_name(self, owner: str, name: str) -> str:
        key = f"{owner}/{name}"
        return self.packages.get(key, self.prefix + key)

    # -- wire details --------------------------------------------------------------------------

    @staticmethod
    def _request_id() -> str:
        return f"{secrets.token_hex(2).upper()}:{secrets.token_hex(3).upper()}:{secrets.token_hex(4).upper()}"

    def error_body(self, status: int, message: str) -> Any:
        return {"message": message, "documentation_url": DOCS, "status": str(status)}

    @staticmethod
    def _error(status: int, message: str, doc: str = DOCS, **extra: Any) -> Response:
        return Response(status, {"message": message, **extra, "documentation_url": doc, "status": str(status)})

    def default_headers(self, request: Request, response: Response) -> dict[str, str]:
        with self._lock:
            remaining, reset = self._remaining, self._reset
        return {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": API_VERSION,
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Used": str(max(0, self.rate_limit - remaining)),
            "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": self._request_id(),
        }

    def _dispatch(self, request: Request) -> Response:
        if request.path.startswith("/_blobs/"):   # blob storage: the signed URL is the credential
            return super()._dispatch(request)
        token = bearer_token(request, ("bearer", "token"))
        if not token or token not in self.tokens:
            return self._error(401, "Bad credentials")
        if request.path != "/rate_limit":
            with self._lock:
                now = time.time()
                if now >= self._reset:
                    self._remaining, self._reset = self.rate_limit, int(now) + 3600
                if self._remaining <= 0:
                    return Response(403, {
                        "message": "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for "
                                   f"help, please include the request ID {self._request_id()}.",
                        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                                             "#about-the-primary-rate-limit",
                        "status": "403"}, {"X-RateLimit-Remaining": "0"})
                self._remaining -= 1
        return super()._dispatch(request)

    def _user_object(self, login: str, kind: str = "User") -> dict[str, Any]:
        uid = int(hashlib.sha256(login.lower().encode()).hexdigest()[:6], 16) + 1  # stable across runs
        return {
            "login": login,
            "id": uid,
            "node_id": f"U_kgDO{uid}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
            "gravatar_id": "",
            "url": f"{self.url}/users/{login}",
            "html_url": f"https://github.com/{login}",
            "type": kind,
            "site_admin": False,
        }

    def _is_org(self, owner: str) -> bool:
        return self.orgs is not None and owner.lower() in self.orgs

    def _repo(self, owner: str, name: str) -> dict[str, Any] | None:
        key = f"{owner}/{name}".lower()
        with self._lock:
            if key not in self._repos and self._auto_repos:
                self.add_repo(f"{owner}/{name}")
            repo = self._repos.get(key)
            if repo is not None:  # the URL is only known once the server has a port
                api = f"{self.url}/repos/{repo['full_name']}"
                repo.update(url=api, releases_url=api + "/releases{/id}", tags_url=api + "/tags")
                repo["owner"]["url"] = f"{self.url}/users/{repo['owner']['login']}"
            return repo

    def _paginate(self, request: Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        try:
            per_page = int(request.arg("per_page") or 30)
        except ValueError:
            per_page = 30
        per_page = 30 if per_page < 1 else min(per_page, 100)
        try:
            page = max(1, int(request.arg("page") or 1))
        except ValueError:
            page = 1
        last = max(1, math.ceil(len(items) / per_page))

        def link(p: int) -> str:
            query = [(k, v) for k, values in request.query.items() for v in values if k != "page"]
            query.append(("page", str(p)))
            return f"<{self.url}{request.path}?{urllib.parse.urlencode(query)}>"

        links = []
        if page > 1:
            links.append(f'{link(min(page - 1, last))}; rel="prev"')
        if page < last:
            links.append(f'{link(page + 1)}; rel="next"')
            links.append(f'{link(last)}; rel="last"')
        if page > 1:
            links.append(f'{link(1)}; rel="first"')
        headers = {"Link": ", ".join(links)} if links else {}
        return items[(page - 1) * per_page: page * per_page], headers

    # -- actions: workflows, runs, artifacts --------------------------------------------------------

    def _workflow_object(self, owner: str, name: str, workflow: str) -> dict[str, Any]:
        wid = int(hashlib.sha256(f"{owner}/{name}/{workflow}".lower().encode()).hexdigest()[:6], 16)
        api = f"{self.url}/repos/{owner}/{name}/actions/workflows/{wid}"
        return {"id": wid, "node_id": f"W_{wid}", "name": workflow.rsplit(".", 1)[0],
                "path": f".github/workflows/{workflow}", "state": "active", "url": api,
                "html_url": f"https://github.com/{owner}/{name}/actions/workflows/{workflow}",
                "badge_url": f"https://github.com/{owner}/{name}/workflows/{workflow}/badge.svg",
                "created_at": gh_time(datetime(2024, 1, 1, tzinfo=UTC)),
                "updated_at": gh_time(datetime(2024, 1, 1, tzinfo=UTC))}

    def _find_workflow(self, owner: str, name: str, ref: str) -> str | None:
        with self._lock:
            known = {r["workflow"] for r in self._runs if r["repo"] == f"{owner}/{name}".lower()}
        for workflow in known:
            if ref in (workflow, str(self._workflow_object(owner, name, workflow)["id"])):
                return workflow
        return None

    def _get_workflow(self, request: Request, owner: str, name: str, ref: str) -> Response:
        workflow = self._find_workflow(owner, name, ref)
        if workflow is None:
            return self._error(404, "Not Found", f"{DOCS}/actions/workflows#get-a-workflow")
        return Response(200, self._workflow_object(owner, name, workflow))

    def _run_object(self, owner: str, name: str, run: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{owner}/{name}/actions/runs/{run['id']}"
        workflow = self._workflow_object(owner, name, run["workflow"])
        return {"id": run["id"], "name": workflow["name"], "head_branch": run["head_branch"],
                "head_sha": run["head_sha"], "event": run["event"], "status": run["status"],
                "conclusion": run["conclusion"], "workflow_id": workflow["id"], "url": api,
                "artifacts_url": f"{api}/artifacts", "path": workflow["path"],
                "repository": self._repo(owner, name)}

    def _list_workflow_runs(self, request: Request, owner: str, name: str, ref: str) -> Response:
        workflow = self._find_workflow(owner, name, ref)
        if workflow is None:
            return self._error(404, "Not Found", f"{DOCS}/actions/workflow-runs#list-workflow-runs-for-a-workflow")
        status = request.arg("status")
        with self._lock:
            runs = [r for r in reversed(self._runs) if r["repo"] == f"{owner}/{name}".lower()
                    and r["workflow"] == workflow
                    and all(request.arg(key) in (None, r[field]) for key, field in
                            (("branch", "head_branch"), ("event", "event"), ("head_sha", "head_sha")))
                    and status in (None, r["status"], r["conclusion"])]
        page, headers = self._paginate(request, [self._run_object(owner, name, r) for r in runs])
        return Response(200, {"total_count": len(runs), "workflow_runs": page}, headers)

    def _commit_object(self, owner: str, name: str, sha: str) -> dict[str, Any]:
        return {"sha": sha, "node_id": f"C_{sha[:12]}", "url": f"{self.url}/repos/{owner}/{name}/commits/{sha}",
                "html_url": f"https://github.com/{owner}/{name}/commit/{sha}",
                "commit": {"message": "commit", "tree": {"sha": "0" * 40}}, "parents": []}

    def _resolve(self, repo: str, ref: str) -> tuple[str, list[str]] | None:
        """A branch name or a commit -> (commit, its history oldest first); None: unknown."""
        with self._lock:
            history = self._branches.get((repo, ref))
            if history:
                return history[-1], list(history)
            for (owner_repo, _), commits in self._branches.items():
                if owner_repo == repo and ref in commits:
                    return ref, commits[:commits.index(ref) + 1]
            known = {sha for (r, _), sha in self._tags.items() if r == repo}
            known |= {run["head_sha"] for run in self._runs if run["repo"] == repo}
        return (ref, [ref]) if ref in known else None

    def _compare(self, request: Request, owner: str, name: str, base: str, head: str) -> Response:
        repo = f"{owner}/{name}".lower()
        base_at, head_at = self._resolve(repo, base), self._resolve(repo, head)
        if base_at is None or head_at is None:
            return self._error(404, "Not Found", f"{DOCS}/commits/commits#compare-two-commits")
        (base_sha, base_history), (head_sha, head_history) = base_at, head_at
        if base_sha == head_sha:
            status, ahead, behind = "identical", 0, 0
        elif head_sha in base_history:
            status, ahead, behind = "behind", 0, len(base_history) - 1 - base_history.index(head_sha)
        elif base_sha in head_history:
            status, ahead, behind = "ahead", len(head_history) - 1 - head_history.index(base_sha), 0
        else:
            common = [sha for sha in head_history if sha in base_history]
            status = "diverged"
            ahead = len(head_history) - (head_history.index(common[-1]) + 1 if common else 0)
            behind = len(base_history) - (base_history.index(common[-1]) + 1 if common else 0)
        api = f"{self.url}/repos/{owner}/{name}/compare/{base}...{head}"
        return Response(200, {"url": api, "html_url": f"https://github.com/{owner}/{name}/compare/{base}...{head}",
                              "permalink_url": api, "diff_url": api + ".diff", "patch_url": api + ".patch",
                              "base_commit": self._commit_object(owner, name, base_sha),
                              "merge_base_commit": self._commit_object(owner, name, base_sha if status == "behind"
                                                                       else head_sha),
                              "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
                              "commits": [], "files": []})

    def _git_ref(self, request: Request, owner: str, name: str, kind: str, ref_name: str) -> Response:
        repo = f"{owner}/{name}".lower()
        with self._lock:
            if kind == "tags":
                sha = self._tags.get((repo, ref_name))
            else:
                history = self._branches.get((repo, ref_name))
                sha = history[-1] if history else None
        if sha is None:
            return self._error(404, "Not Found", f"{DOCS}/git/refs#get-a-reference")
        api = f"{self.url}/repos/{owner}/{name}/git/refs/{kind}/{ref_name}"
        return Response(200, {"ref": f"refs/{kind}/{ref_name}", "node_id": f"REF_{sha[:12]}", "url": api,
                              "object": {"sha": sha, "type": "commit",
                                         "url": f"{self.url}/repos/{owner}/{name}/git/commits/{sha}"}})

    def _list_run_artifacts(self, request: Request, owner: str, name: str, run_id: str) -> Response:
        with self._lock:
            run = next((r for r in self._runs if r["id"] == int(run_id) and r["repo"] == f"{owner}/{name}".lower()),
                       None)
        if run is None:
            return self._error(404, "Not Found", f"{DOCS}/actions/artifacts#list-workflow-run-artifacts")
        api = f"{self.url}/repos/{owner}/{name}/actions/artifacts"
        artifacts = [{"id": aid, "node_id": f"MDg_{aid}", "name": artifact_name, "size_in_bytes": len(data),
                      "url": f"{api}/{aid}", "archive_download_url": f"{api}/{aid}/zip", "expired": False,
                      "created_at": gh_time(datetime.now(UTC)),
                      "expires_at": gh_time(datetime(2099, 1, 1, tzinfo=UTC)),
                      "updated_at": gh_time(datetime.now(UTC)),
                      "workflow_run": {"id": run["id"], "head_branch": run["head_branch"], "head_sha": run["head_sha"]}}
                     for artifact_name, (aid, data) in run["artifacts"].items()]
        page, headers = self._paginate(request, artifacts)
        return Response(200, {"total_count": len(artifacts), "artifacts": page}, headers)

    def _download_artifact(self, request: Request, owner: str, name: str, artifact_id: str) -> Response:
        with self._lock:
            for run in self._runs:
                for aid, data in run["artifacts"].values():
                    if aid == int(artifact_id) and run["repo"] == f"{owner}/{name}".lower():
                        key = secrets.token_hex(16)
                        self._blobs[key] = data
                        return Response(302, None, {"Location": f"{self.url}/_blobs/{key}"})
        return self._error(404, "Not Found", f"{DOCS}/actions/artifacts#download-an-artifact")

    def _blob(self, request: Request, key: str) -> Response:
        with self._lock:
            data = self._blobs.get(key)
        return Response(200, data, {"Content-Type": "application/zip"}) if data is not None else Response(404, b"")

    # -- repos and releases ----------------------------------------------------------------------

    def _rate_limit(self, request: Request) -> Response:
        with self._lock:
            core = {"limit": self.rate_limit, "remaining": self._remaining, "reset": self._reset,
                    "used": self.rate_limit - self._remaining, "resource": "core"}
        return Response(200, {"resources": {"core": core}, "rate": core})

    def _get_repo(self, request: Request, owner: str, name: str) -> Response:
        repo = self._repo(owner, name)
        if repo is None:
            return self._error(404, "Not Found", f"{DOCS}/repos/repos#get-a-repository")
        return Response(200, repo)

    def _release_object(self, repo: dict[str, Any], rel: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo['full_name']}"
        tag_path = rel["tag_name"] if not rel["draft"] else rel["untagged"]
        return {
            "url": f"{api}/releases/{rel['id']}",
            "assets_url": f"{api}/releases/{rel['id']}/assets",
            "upload_url": f"{self.url}/repos/{repo['full_name']}/releases/{rel['id']}/assets{{?name,label}}",
            "html_url": f"https://github.com/{repo['full_name']}/releases/tag/{tag_path}",
            "id": rel["id"],
            "author": self._user_object(self.login),
            "node_id": f"RE_kwDO{rel['id']}",
            "tag_name": rel["tag_name"],
            "target_commitish": rel["target_commitish"],
            "name": rel["name"],
            "draft": rel["draft"],
            "immutable": False,
            "prerelease": rel["prerelease"],
            "created_at": gh_time(rel["created_at"]),
            "updated_at": gh_time(rel["updated_at"]),
            "published_at": gh_time(rel["published_at"]) if rel["published_at"] else None,
            "assets": [],
            "tarball_url": f"{api}/tarball/{rel['tag_name']}",
            "zipball_url": f"{api}/zipball/{rel['tag_name']}",
            "body": rel["body"],
        }

    def _find_release(self, owner: str, name: str, pred: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        repo = self._repo(owner, name)
        if repo is None:
            return None, None
        with self._lock:
            for rel in self._releases[repo["full_name"].lower()]:
                if pred(rel):
                    return repo, rel
        return repo, None

    def _create_release(self, request: Request, owner: str, name: str) -> Response:
        repo = self._repo(owner, name)
        if repo is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#create-a-release")
        try:
            data = request.json()
        except ValueError:
            return self._error(400, "Problems parsing JSON", f"{DOCS}/releases/releases#create-a-release")
        if not isinstance(data, dict):
            return self._error(400, "Problems parsing JSON", f"{DOCS}/releases/releases#create-a-release")
        doc = f"{DOCS}/releases/releases#create-a-release"
        tag = data.get("tag_name")
        if not isinstance(tag, str) or not tag:
            return self._error(422, 'Invalid request.\n\n"tag_name" wasn\'t supplied.', doc)
        make_latest = data.get("make_latest", "true")
        if make_latest not in ("true", "false", "legacy"):
            return self._error(422, "Validation Failed", doc, errors=[
                {"resource": "Release", "code": "invalid", "field": "make_latest"}])
        for key in ("draft", "prerelease", "generate_release_notes"):
            if key in data and not isinstance(data[key], bool):
                return self._error(
                    422, f'Invalid request.\n\nFor \'properties/{key}\', {data[key]!r} is not a boolean.', doc)
        key = repo["full_name"].lower()
        now = datetime.now(UTC)
        with self._lock:
            if any(r["tag_name"] == tag for r in self._releases[key]):
                return self._error(422, "Validation Failed", doc, errors=[
                    {"resource": "Release", "code": "already_exists", "field": "tag_name"}])
            draft, prerelease = bool(data.get("draft", False)), bool(data.get("prerelease", False))
            body = data.get("body")
            if data.get("generate_release_notes") and not body:
                body = f"**Full Changelog**: https://github.com/{repo['full_name']}/commits/{tag}"
            rel = {
                "id": next(self._ids),
                "tag_name": tag,
                "target_commitish": data.get("target_commitish") or repo["default_branch"],
                "name": data.get("name") if data.get("name") is not None else tag,
                "body": body,
                "draft": draft,
                "prerelease": prerelease,
                "created_at": now,
                "updated_at": now,
                "published_at": None if draft else now,
                "untagged": f"untagged-{secrets.token_hex(10)}",
                "make_latest": make_latest,
            }
            self._releases[key].insert(0, rel)
            if not draft and not prerelease and make_latest in ("true", "legacy"):
                self._latest[key] = rel["id"]
            obj = self._release_object(repo, rel)
        return Response(201, obj, {"Location": obj["url"]})

    def _list_releases(self, request: Request, owner: str, name: str) -> Response:
        repo = self._repo(owner, name)
        if repo is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#list-releases")
        with self._lock:
            releases = [self._release_object(repo, r) for r in self._releases[repo["full_name"].lower()]]
        page, headers = self._paginate(request, releases)
        return Response(200, page, headers)

    def _release_by_tag(self, request: Request, owner: str, name: str, tag: str) -> Response:
        repo, rel = self._find_release(owner, name, lambda r: r["tag_name"] == tag and not r["draft"])
        if rel is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#get-a-release-by-tag-name")
        return Response(200, self._release_object(repo, rel))  # type: ignore[arg-type]

    def _latest_release(self, request: Request, owner: str, name: str) -> Response:
        repo = self._repo(owner, name)
        latest = self._latest.get(repo["full_name"].lower()) if repo else None
        repo, rel = self._find_release(owner, name, lambda r: r["id"] == latest)
        if rel is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#get-the-latest-release")
        return Response(200, self._release_object(repo, rel))  # type: ignore[arg-type]

    def _get_release(self, request: Request, owner: str, name: str, rid: str) -> Response:
        repo, rel = self._find_release(owner, name, lambda r: r["id"] == int(rid))
        if rel is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#get-a-release")
        return Response(200, self._release_object(repo, rel))  # type: ignore[arg-type]

    def _update_release(self, request: Request, owner: str, name: str, rid: str) -> Response:
        repo, rel = self._find_release(owner, name, lambda r: r["id"] == int(rid))
        if rel is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#update-a-release")
        try:
            data = request.json() or {}
        except ValueError:
            return self._error(400, "Problems parsing JSON")
        with self._lock:
            for key in ("tag_name", "target_commitish", "name", "body", "prerelease"):
                if key in data:
                    rel[key] = data[key]
            if "draft" in data:
                rel["draft"] = bool(data["draft"])
                if not rel["draft"] and rel["published_at"] is None:
                    rel["published_at"] = datetime.now(UTC)
            rel["updated_at"] = datetime.now(UTC)
            if data.get("make_latest", "true") == "true" and not rel["draft"] and not rel["prerelease"]:
                self._latest[repo["full_name"].lower()] = rel["id"]  # type: ignore[index]
            return Response(200, self._release_object(repo, rel))  # type: ignore[arg-type]

    def _delete_release(self, request: Request, owner: str, name: str, rid: str) -> Response:
        repo, rel = self._find_release(owner, name, lambda r: r["id"] == int(rid))
        if rel is None:
            return self._error(404, "Not Found", f"{DOCS}/releases/releases#delete-a-release")
        key = repo["full_name"].lower()  # type: ignore[index]
        with self._lock:
            self._releases[key].remove(rel)
            if self._latest.get(key) == rel["id"]:
                published = [r for r in self._releases[key] if not r["draft"] and not r["prerelease"]]
                self._latest[key] = published[0]["id"] if published else None
        return Response(204)

    # -- container packages --------------------------------------------------------------------

    def _scope_ok(self, scope: str, owner: str) -> bool:
        if self.orgs is None or scope == "user":
            return True
        return (scope == "orgs") == self._is_org(owner)

    def _pkg_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._pkg_locks.setdefault(key, threading.Lock())

    def _scan(self, owner: str, name: str) -> dict[str, Any] | None:
        """Refresh a package's versions from the registry; None when the package does not exist."""
        if self.registry is None:
            return None
        key = f"{owner}/{name}".lower()
        reg = self.registry_name(owner, name)
        with self._lock:
            state = self._pkg.setdefault(key, {"versions": {}, "deleted": []})
            known = list(state["versions"])
        tags = self.registry.tags(reg)
        if tags is None and not known:
            return None
        current: dict[str, set[str]] = {}
        media: dict[str, str] = {}
        for tag in tags or []:
            head = self.registry.head_manifest(reg, tag)
            if head is not None:
                current.setdefault(head[0], set()).add(tag)
                media[head[0]] = head[1]
        for digest in list(current):
            if media.get(digest) in INDEX_TYPES:
                index = self.registry.get_manifest(reg, digest)
                for child in (index.json().get("manifests", []) if index else []):
                    if child.get("digest") not in current and self.registry.head_manifest(reg, child["digest"]):
                        current[child["digest"]] = set()
        for digest in known:  # orphans: untagged, unreferenced, but still in the registry
            if digest not in current and self.registry.head_manifest(reg, digest) is not None:
                current[digest] = set()
        now = datetime.now(UTC)
        with self._lock:
            versions = state["versions"]
            for digest in list(versions):
                if digest not in current:
                    del versions[digest]  # removed behind the fake's back
            for digest, tag_set in current.items():
                version = versions.get(digest)
                if version is None:
                    created = self._pending_created.pop((key, digest), now)
                    versions[digest] = {"id": next(self._ids), "digest": digest, "tags": sorted(tag_set),
                                        "created": created, "updated": created}
                elif version["tags"] != sorted(tag_set):
                    version["tags"], version["updated"] = sorted(tag_set), now
        if not current and not state["deleted"]:
            return None
        return state

    def _version_object(self, scope: str, owner: str, name: str, version: dict[str, Any],
                        deleted: bool = False) -> dict[str, Any]:
        enc = urllib.parse.quote(name, safe="")
        api_scope = "users" if scope == "user" else scope
        html_scope = "orgs" if scope == "orgs" else "users"
        obj = {
            "id": version["id"],
            "name": version["digest"],
            "url": f"{self.url}/{api_scope}/{owner}/packages/container/{enc}/versions/{version['id']}",
            "package_html_url": f"https://github.com/{html_scope}/{owner}/packages/container/package/{enc}",
            "created_at": gh_time(version["created"]),
            "updated_at": gh_time(version["updated"]),
            "html_url": f"https://github.com/{html_scope}/{owner}/packages/container/{enc}/{version['id']}",
            "metadata": {"package_type": "container", "container": {"tags": list(version["tags"])}},
        }
        if deleted:
            obj["deleted_at"] = gh_time(version["deleted"])
        return obj

    def _package_not_found(self) -> Response:
        return self._error(404, "Package not found.",
                           f"{DOCS}/packages/packages#list-package-versions-for-a-package-owned-by-an-organization")

    def _list_versions(self, request: Request, scope: str, owner: str, name: str) -> Response:
        if not self._scope_ok(scope, owner):
            return self._package_not_found()
        key = f"{owner}/{name}".lower()
        with self._pkg_lock(key):
            state = self._scan(owner, name)
            if state is None:
                return self._package_not_found()
            with self._lock:
                if (request.arg("state") or "active") == "deleted":
                    rows = sorted(state["deleted"], key=lambda v: (v["deleted"], v["id"]), reverse=True)
                    objects = [self._version_object(scope, owner, name, v, deleted=True) for v in rows]
                else:
                    rows = sorted(state["versions"].values(), key=lambda v: (v["created"], v["id"]), reverse=True)
                    objects = [self._version_object(scope, owner, name, v) for v in rows]
        page, headers = self._paginate(request, objects)
        return Response(200, page, headers)

    def _get_version(self, request: Request, scope: str, owner: str, name: str, vid: str) -> Response:
        if not self._scope_ok(scope, owner):
            return self._package_not_found()
        with self._pkg_lock(f"{owner}/{name}".lower()):
            state = self._scan(owner, name)
            if state is None:
                return self._package_not_found()
            with self._lock:
                version = next((v for v in state["versions"].values() if v["id"] == int(vid)), None)
                if version is None:
                    return self._error(404, "Not Found", f"{DOCS}/packages/packages")
                return Response(200, self._version_object(scope, owner, name, version))

    def _delete_version(self, request: Request, scope: str, owner: str, name: str, vid: str) -> Response:
        if not self._scope_ok(scope, owner):
            return self._package_not_found()
        key = f"{owner}/{name}".lower()
        with self._pkg_lock(key):
            state = self._scan(owner, name)
            if state is None:
                return self._package_not_found()
            with self._lock:
                version = next((v for v in state["versions"].values() if v["id"] == int(vid)), None)
                if version is None:
                    return self._error(404, "Not Found", f"{DOCS}/packages/packages")
                if self.refuse_last_version and len(state["versions"]) == 1:
                    return self._error(400, "You cannot delete the last version of a package. "
                                            "You must delete the package instead.", f"{DOCS}/packages/packages")
            self.registry.delete_manifest(self.registry_name(owner, name), version["digest"])  # type: ignore[union-attr]
            with self._lock:
                state["versions"].pop(version["digest"], None)
                version["deleted"] = datetime.now(UTC)
                state["deleted"].append(version)
        return Response(204)


def start(registry_url: str | None = None, **kwargs: Any) -> GitHubFake:
    """Start a GitHub fake (see ``GitHubFake`` for the arguments); a context manager, or call ``.stop()``."""
    fake = GitHubFake(registry_url, **kwargs)
    fake.start()
    return fake
