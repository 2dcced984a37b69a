"""The GitHub Actions cache endpoints of the GitHub fake (mixed into ``GitHubFake``, tests/fakes/github.py), with
the pull request and branch look-ups `ghbuild cache` makes, as GitHub answers them (API version 2022-11-28):

- ``GET /repos/{o}/{r}/actions/caches``: ``{"total_count", "actions_caches": [...]}``, each entry ``id``,
  ``ref``, ``key``, ``version``, ``last_accessed_at``, ``created_at``, ``size_in_bytes``; ``per_page`` (default 30,
  at most 100) and ``page`` with a ``Link`` header; filters ``ref`` (exact) and ``key`` (a prefix); ``sort``
  ``created_at`` / ``last_accessed_at`` (the default) / ``size_in_bytes``, ``direction`` ``desc`` (the default) or
  ``asc``. ``total_count`` counts every entry the filters match, not the page.
- ``GET /repos/{o}/{r}/actions/cache/usage``: ``{"full_name", "active_caches_size_in_bytes", "active_caches_count"}``.
- ``DELETE /repos/{o}/{r}/actions/caches/{cache_id}``: 204, or 404 ``Not Found``.
- ``GET /repos/{o}/{r}/pulls/{n}``: a pull request object (``state`` ``open`` / ``closed``, ``head``, ``base``);
  404 for a number it does not know.
- ``GET /repos/{o}/{r}/branches/{branch}`` (a slash in the name as is or as %2F): a branch object, 404 ``Branch not
  found`` for a branch without commits (``add_commits``) or deleted (``delete_branch``).

Knobs: ``add_cache``, ``add_pull`` / ``close_pull``, ``delete_branch``; ``actions_read_only`` (tokens whose delete is
a 403 "Resource not accessible by integration", a job token with ``actions: read``), ``no_actions`` (tokens that get
that 403 on every cache endpoint), ``hide_branches`` (every branch a 404: a token that cannot read contents).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from .dockerhub import bearer_token, utc
from .httpserver import Request, Response

DOCS = "https://docs.github.com/rest"
_SEG = r"([^/]+)"
_NOT_ACCESSIBLE = "Resource not accessible by integration"


def cache_time(when: datetime) -> str:
    """The cache API's timestamps: milliseconds and a Z."""
    return utc(when).strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc(when).microsecond // 1000:03d}Z"


class ActionsCacheRoutes:
    """Mixed into GitHubFake: needs its ``route``, ``_lock``, ``_ids``, ``_error``, ``_paginate``, ``add_repo``
    and ``_branches``."""

    def _init_actions_cache(self: Any) -> None:
        self._caches: dict[str, list[dict[str, Any]]] = {}     # repo (lower) -> entries
        self._pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.actions_read_only: set[str] = set()
        self.no_actions: set[str] = set()
        self.hide_branches = False
        repo = rf"/repos/{_SEG}/{_SEG}"
        self.route("GET", rf"{repo}/actions/caches/?", self._list_caches)
        self.route("DELETE", rf"{repo}/actions/caches/(\d+)", self._delete_cache)
        self.route("GET", rf"{repo}/actions/cache/usage", self._cache_usage)
        self.route("GET", rf"{repo}/pulls/(\d+)", self._get_pull)
        self.route("GET", rf"{repo}/branches/(.+)", self._get_branch)

    # -- knobs ---------------------------------------------------------------------------------

    def add_cache(self: Any, full_name: str, ref: str, key: str, size: int = 1000, *,
                  created: datetime | None = None, accessed: datetime | None = None) -> int:
        """An Actions cache entry stored under ``ref``; returns its id."""
        self.add_repo(full_name)
        with self._lock:
            cid = next(self._ids)
            # Default: one second apart in the order they were added (ids count up), as a run writes them.
            created = utc(created or datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=cid % 1_000_000))
            self._caches.setdefault(full_name.lower(), []).append({
                "id": cid, "ref": ref, "key": key, "version": hashlib.sha256(key.encode()).hexdigest(),
                "size_in_bytes": size, "created": created, "accessed": utc(accessed or created)})
        return cid

    def caches(self: Any, full_name: str) -> list[dict[str, Any]]:
        """The entries a repository holds now (a copy), oldest first."""
        with self._lock:
            return sorted((dict(e) for e in self._caches.get(full_name.lower(), [])), key=lambda e: e["id"])

    def add_pull(self: Any, full_name: str, number: int, *, state: str = "open", head_ref: str = "feature",
                 head_repo: str | None = None, base: str = "main") -> None:
        self.add_repo(full_name)
        with self._lock:
            self._pulls[(full_name.lower(), number)] = {"state": state, "head_ref": head_ref,
                                                         "head_repo": head_repo or full_name, "base": base}

    def close_pull(self: Any, full_name: str, number: int) -> None:
        with self._lock:
            self._pulls[(full_name.lower(), number)]["state"] = "closed"

    def delete_branch(self: Any, full_name: str, branch: str) -> None:
        with self._lock:
            self._branches.pop((full_name.lower(), branch), None)

    # -- handlers ------------------------------------------------------------------------------

    def _refused(self: Any, request: Request, doc: str, *, write: bool = False) -> Response | None:
        token = bearer_token(request, ("bearer", "token"))
        if token in self.no_actions or (write and token in self.actions_read_only):
            return self._error(403, _NOT_ACCESSIBLE, doc)
        return None

    def _cache_object(self: Any, entry: dict[str, Any]) -> dict[str, Any]:
        return {"id": entry["id"], "ref": entry["ref"], "key": entry["key"], "version": entry["version"],
                "last_accessed_at": cache_time(entry["accessed"]), "created_at": cache_time(entry["created"]),
                "size_in_bytes": entry["size_in_bytes"]}

    def _list_caches(self: Any, request: Request, owner: str, name: str) -> Response:
        doc = f"{DOCS}/actions/cache#list-github-actions-caches-for-a-repository"
        refused = self._refused(request, doc)
        if refused is not None:
            return refused
        sort = request.arg("sort") or "last_accessed_at"
        direction = request.arg("direction") or "desc"
        field = {"created_at": "created", "last_accessed_at": "accessed", "size_in_bytes": "size_in_bytes"}.get(sort)
        if field is None or direction not in ("asc", "desc"):
            return self._error(422, "Validation Failed", doc)
        ref, key = request.arg("ref"), request.arg("key")
        with self._lock:
            rows = [e for e in self._caches.get(f"{owner}/{name}".lower(), [])
                    if (ref is None or e["ref"] == ref) and (key is None or e["key"].startswith(key))]
            rows.sort(key=lambda e: (e[field], e["id"]), reverse=direction == "desc")
            objects = [self._cache_object(e) for e in rows]
        page, headers = self._paginate(request, objects)
        return Response(200, {"total_count": len(objects), "actions_caches": page}, headers)

    def _delete_cache(self: Any, request: Request, owner: str, name: str, cache_id: str) -> Response:
        doc = f"{DOCS}/actions/cache#delete-a-github-actions-cache-for-a-repository-using-a-cache-id"
        refused = self._refused(request, doc, write=True)
        if refused is not None:
            return refused
        with self._lock:
            entries = self._caches.get(f"{owner}/{name}".lower(), [])
            found = next((e for e in entries if e["id"] == int(cache_id)), None)
            if found is None:
                return self._error(404, "Not Found", doc)
            entries.remove(found)
        return Response(204)

    def _cache_usage(self: Any, request: Request, owner: str, name: str) -> Response:
        doc = f"{DOCS}/actions/cache#get-github-actions-cache-usage-for-a-repository"
        refused = self._refused(request, doc)
        if refused is not None:
            return refused
        with self._lock:
            entries = self._caches.get(f"{owner}/{name}".lower(), [])
            return Response(200, {"full_name": f"{owner}/{name}",
                                  "active_caches_size_in_bytes": sum(e["size_in_bytes"] for e in entries),
                                  "active_caches_count": len(entries)})

    def _get_pull(self: Any, request: Request, owner: str, name: str, number: str) -> Response:
        with self._lock:
            pull = self._pulls.get((f"{owner}/{name}".lower(), int(number)))
        if pull is None:
            return self._error(404, "Not Found", f"{DOCS}/pulls/pulls#get-a-pull-request")
        api = f"{self.url}/repos/{owner}/{name}/pulls/{number}"
        head_repo = pull["head_repo"]
        return Response(200, {
            "url": api, "id": 2_000_000 + int(number), "number": int(number), "state": pull["state"],
            "html_url": f"https://github.com/{owner}/{name}/pull/{number}", "title": f"pull request {number}",
            "closed_at": None if pull["state"] == "open" else cache_time(datetime.now(UTC)),
            "merged_at": None,
            "head": {"label": f"{head_repo.split('/')[0]}:{pull['head_ref']}", "ref": pull["head_ref"],
                     "sha": "0" * 40, "repo": {"full_name": head_repo}},
            "base": {"label": f"{owner}:{pull['base']}", "ref": pull["base"], "sha": "1" * 40,
                     "repo": {"full_name": f"{owner}/{name}"}}})

    def _get_branch(self: Any, request: Request, owner: str, name: str, branch: str) -> Response:
        with self._lock:
            history = None if self.hide_branches else self._branches.get((f"{owner}/{name}".lower(), branch))
        if not history:
            return self._error(404, "Branch not found", f"{DOCS}/branches/branches#get-a-branch")
        api = f"{self.url}/repos/{owner}/{name}"
        return Response(200, {"name": branch, "protected": False,
                              "commit": {"sha": history[-1], "url": f"{api}/commits/{history[-1]}"},
                              "_links": {"self": f"{api}/branches/{branch}",
                                         "html": f"https://github.com/{owner}/{name}/tree/{branch}"}})
