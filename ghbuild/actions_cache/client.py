"""The GitHub REST API calls of `ghbuild cache` and of the build job's budget check, on ghbuild's own HTTP stack.

PyGithub (used for releases and artifacts) has no endpoint of the Actions cache (2.x: no list, usage or delete),
so these calls go through ghbuild.http like the GHCR backend's: one client, one retry policy
(ghbuild.http.retry: 5xx and network errors retried, 429 and GitHub's 403 rate limits waited out with their
Retry-After or x-ratelimit-reset, bounded), the token scrubbed from every message and never sent to another
origin. The pull request and branch look-ups PyGithub does have use the same client, so one run has one policy.

Endpoints (API version 2022-11-28):
- `GET /repos/{o}/{r}/actions/caches?per_page=100&sort=created_at&direction=asc`, then the Link header's
  rel="next" to the end: oldest first, so entries written while listing land on later pages, not shift earlier
  ones; each entry counted once by id;
- `GET /repos/{o}/{r}/actions/cache/usage`: `active_caches_size_in_bytes`, `active_caches_count`;
- `DELETE /repos/{o}/{r}/actions/caches/{cache_id}`: 204, or 404 when already gone;
- `GET /repos/{o}/{r}` (the default branch), `GET .../pulls/{n}` (`state`), `GET .../branches/{b}` (404: gone).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from ghbuild.errors import PruneAbort, PruneError
from ghbuild.http.origin import same_origin
from ghbuild.http.response import Response
from ghbuild.retention.api import ApiClient
from ghbuild.retention.ghcr import DEFAULT_GITHUB_API, GITHUB_API_VERSION, GhcrClient

PER_PAGE = 100
PERMISSIONS = "actions: read to list and read usage, actions: write to delete"


class ActionsCacheClient(ApiClient):
    """One repository's Actions caches. Errors are PruneError (exit 14); a rejected token or a refusal is
    PruneAbort, raised before anything is deleted."""

    service = "GitHub"
    # GitHub's rate-limit answers, read as the GHCR backend reads them: the same API, the same rule.
    rate_limit = GhcrClient.rate_limit

    def __init__(self, repository: str, token: str | None, api_url: str | None = None, **kwargs: Any):
        if not token:
            raise PruneError(f"cache: GITHUB_TOKEN is not set: reading the Actions caches needs a token with "
                             f"{PERMISSIONS}")
        if api_url and (urlsplit(api_url).scheme not in ("http", "https") or "@" in api_url):
            shown = "(value not shown: it holds user info)" if "@" in api_url else repr(api_url)
            raise PruneError(f"cache: GITHUB_API_URL {shown} is not an http:// or https:// URL without user info")
        super().__init__(api_url or DEFAULT_GITHUB_API, **kwargs)
        self.repository = repository
        self._token = token
        self.secrets.append(token)
        owner, _, name = repository.partition("/")
        self.repo_url = f"{self.api_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}"
        self.total_count: int | None = None
        self.cut_at: str | None = None      # the first page not listed, when the listing stopped at max_pages

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": GITHUB_API_VERSION}

    def _get(self, url: str, what: str) -> Response:
        return self.request("GET", url, what, headers=self._headers())

    def _check_auth(self, r: Response, what: str) -> None:
        if r.status_code == 401:
            raise PruneAbort(f"{what}: GitHub rejected the token (HTTP 401 {self.message(r) or 'Bad credentials'}); "
                             "check GITHUB_TOKEN")
        if r.status_code == 403:
            raise PruneAbort(self.scrub(f"{what}: GitHub refused (HTTP 403 {self.message(r)}): the token needs "
                                        f"{PERMISSIONS}"))

    def _json(self, r: Response, what: str) -> Any:
        if self._expect(r, what, 200) == 404:
            raise PruneError(f"{what}: HTTP 404 {self.message(r)}".rstrip())
        try:
            return r.json()
        except ValueError:
            raise PruneError(f"{what}: the answer is not JSON") from None

    def list_caches(self) -> list[dict[str, Any]]:
        """Every cache entry, page by page (Link rel="next", never a page twice, never another origin); past
        `max_pages` pages the listing stops there (`cut_at`: the first page not read)."""
        what = f"cache: listing the Actions caches of {self.repository}"
        url: str | None = f"{self.repo_url}/actions/caches?per_page={PER_PAGE}&sort=created_at&direction=asc"
        found: list[dict[str, Any]] = []
        seen: set[str] = set()
        while url is not None:
            if len(seen) >= self.max_pages:
                # Verdicts are per ref and per entry: what was listed can be judged without the rest.
                self.cut_at = url
                break
            self.visit_page(url, seen, what)
            r = self._get(url, what)
            page = self._json(r, f"{what}: page {len(seen)}")
            if not isinstance(page, dict) or not isinstance(page.get("actions_caches"), list):
                raise PruneError(f"{what}: page {len(seen)} has no actions_caches list")
            self.pages += 1
            if isinstance(page.get("total_count"), int):
                self.total_count = page["total_count"]
            found += [entry for entry in page["actions_caches"] if isinstance(entry, dict)]
            nxt = r.links.get("next", {}).get("url") or None
            if nxt and not same_origin(nxt, self.api_url):
                raise PruneError(f"{what}: next page on another host ({nxt}); not sending the token there")
            url = nxt
        return found

    def usage(self) -> tuple[int, int]:
        """(bytes, entries) of the repository's active caches (GitHub refreshes it about every 5 minutes)."""
        what = f"cache: usage of {self.repository}"
        body = self._json(self._get(f"{self.repo_url}/actions/cache/usage", what), what)
        size, count = (body.get("active_caches_size_in_bytes"), body.get("active_caches_count")) \
            if isinstance(body, dict) else (None, None)
        if not isinstance(size, int) or not isinstance(count, int):
            raise PruneError(f"{what}: no active_caches_size_in_bytes / active_caches_count in the answer")
        return size, count

    def default_branch(self) -> str:
        what = f"cache: reading {self.repository}"
        body = self._json(self._get(self.repo_url, what), what)
        branch = body.get("default_branch") if isinstance(body, dict) else None
        if not isinstance(branch, str) or not branch:
            raise PruneError(f"{what}: the answer names no default_branch")
        return branch

    def pull_state(self, number: str) -> tuple[str, str]:
        """("open" | "closed" | "unknown", why unknown)."""
        what = f"cache: pull request #{number} of {self.repository}"
        r = self._get(f"{self.repo_url}/pulls/{quote(number, safe='')}", what)
        if self._expect(r, what, 200) == 404:
            return "unknown", "GitHub does not know it (HTTP 404)"
        body = self._json(r, what)
        state = body.get("state") if isinstance(body, dict) else None
        return (state, "") if state in ("open", "closed") else ("unknown", f"state {state!r}")

    def branch_state(self, branch: str) -> tuple[str, str]:
        """("exists" | "deleted", ""); 404 is "deleted" (see `run` for the check that makes a 404 mean that, not a
        token that sees no branch at all)."""
        what = f"cache: branch {branch} of {self.repository}"
        r = self._get(f"{self.repo_url}/branches/{quote(branch, safe='/')}", what)
        return ("deleted" if self._expect(r, what, 200) == 404 else "exists"), ""

    def delete(self, cache_id: int) -> bool:
        """DELETE one entry. True: deleted; False: already gone (404)."""
        what = f"cache: deleting Actions cache {cache_id} of {self.repository}"
        r = self.request("DELETE", f"{self.repo_url}/actions/caches/{cache_id}", what, headers=self._headers())
        return self._expect(r, what, 200, 202, 204) != 404

    def _expect(self, r: Response, what: str, *ok: int) -> int:
        """The answer's status when it is one of `ok` or a 404; a refusal is PruneAbort, anything else PruneError."""
        if r.status_code in ok or r.status_code == 404:
            return r.status_code
        self._check_auth(r, what)
        raise PruneError(self.scrub(f"{what}: HTTP {r.status_code} {self.message(r)}".rstrip()))
