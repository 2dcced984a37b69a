"""Retention of nightly tags: `ghbuild prune [--keep N] [--apply]`.

Publishing leaves one multi-arch index per commit (`<nightly>-<40 hex sha>`, optionally with per-arch
`<nightly>-<sha>-<suffix>` tags) next to the moving tags (`<nightly>`, `<nightly>-<suffix>`). Pruning keeps
the newest N commits (config `publish.retention`, default 14; a commit's index tag and its per-arch tags
count as one) and deletes the rest. It is a dry run unless `apply=True`.

Rules (`plan_prune`, pure):

- Candidates are only the per-commit tags `<nightly>-<sha>` and `<nightly>-<sha>-<suffix>`. The moving
  tags and every other tag (releases, `latest`...) are never candidates.
- Commits are ranked by push time (the newest push of any of their tags); a commit with no known push
  time is kept. Ties are broken by name, so a run is reproducible.
- A tag is never deleted when its digest is referenced by a kept tag: a kept tag's own digest, the
  children of a kept index, the moving tags' digests and their children.

Backends, picked from the publish repository's host:

- Docker Hub (`docker.io`, `registry-1.docker.io`): the Hub API (`DockerHubClient`). A bearer token from
  `POST /v2/auth/token` (DOCKERHUB_USERNAME + DOCKERHUB_TOKEN; missing or refused: PruneError before
  anything is listed or deleted), every page of `GET /v2/namespaces/{ns}/repositories/{repo}/tags`
  (`next` followed until null, bounded, and the total checked against `count`), then
  `DELETE /v2/repositories/{ns}/{repo}/tags/{tag}/`: paced, 429 `Retry-After` honoured (capped), 5xx
  retried, 404 = already gone. Hub deletes only the tag; an index's children are listed in the tag's
  `images`.
- GHCR (`ghcr.io`): the GitHub packages API (`GhcrClient`, GITHUB_TOKEN). A version is one digest with
  its tags; it is deleted only when every tag on it is to be deleted. An index's children are untagged
  versions: they go with their index, never while a kept index refers to them. The children are read
  from the registry (the index manifest), so that lookup is injectable.
- Any other registry (a local hub, a self-hosted distribution): the plain registry API. A plain registry
  cannot delete a single tag (only a manifest by digest, which removes every tag on it) and keeps no push
  time, so the image config's `created` field is the time (an index: its newest child), a digest is
  deleted only when no kept tag shares it, and an image without a real `created` (reproducible builds
  set it to the epoch) is kept.

Endpoints can be redirected (tests, demos): GHBUILD_DOCKERHUB_API (Docker Hub API base URL) and the
standard GITHUB_API_URL.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ghbuild import naming
from ghbuild.credentials import GHCR_HOST, ghcr_credentials
from ghbuild.errors import ConfigError, PruneAbort, PruneError

DEFAULT_HUB_API = "https://hub.docker.com"
DEFAULT_GITHUB_API = "https://api.github.com"
GITHUB_API_VERSION = "2022-11-28"
_EPOCH_FLOOR = datetime(1970, 1, 2, tzinfo=timezone.utc)   # a `created` before this is not a real time

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


# =========================================================================== the plan (pure)


@dataclass(frozen=True)
class TagInfo:
    """One tag as a backend reports it. `children`: the manifests an index refers to (empty for an image)."""

    name: str
    digest: str | None
    pushed: datetime | None
    children: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    tag: str
    digest: str | None
    pushed: datetime | None
    commit: str | None
    # newest | moving | other | no-time | referenced (kept) ; old (deleted)
    kind: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"tags": [self.tag], "digest": self.digest, "pushed": _iso(self.pushed), "commit": self.commit,
                "reason": self.reason}


@dataclass
class PrunePlan:
    keep: list[Decision]                       # every tag that stays, with why
    delete: list[Decision]                     # per-commit tags of commits older than the newest N
    protected: dict[str, str]                  # digest -> which kept tag refers to it
    commits: list[tuple[str, datetime | None]]  # (sha, push time), newest first; unknown times last
    kept_commits: list[str]

    @property
    def referenced(self) -> list[Decision]:
        """Old per-commit tags kept only because a kept tag refers to their digest."""
        return [d for d in self.keep if d.kind == "referenced"]


def nightly_pattern(nightly_tag: str, suffixes: Iterable[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(s) for s in sorted(set(suffixes), key=len, reverse=True))
    return re.compile(rf"{re.escape(nightly_tag)}-([0-9a-f]{{40}})(?:-({alts}))?" if alts else
                      rf"{re.escape(nightly_tag)}-([0-9a-f]{{40}})()")


def moving_tags(nightly_tag: str, suffixes: Iterable[str]) -> frozenset[str]:
    return frozenset({nightly_tag, *(f"{nightly_tag}-{s}" for s in suffixes)})


def plan_prune(tags: Sequence[TagInfo], keep: int, nightly_tag: str = "nightly",
               arch_suffixes: Iterable[str] = ("x86_64", "arm64")) -> PrunePlan:
    """Which tags stay and which go. Pure: no I/O.

    `keep` commits survive (a commit = its `<nightly>-<sha>` tag and its `<nightly>-<sha>-<suffix>` tags);
    the other per-commit tags are deleted unless a kept tag refers to their digest. Every tag that is not
    a per-commit nightly tag is kept and protects its digest and its children.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise PruneError(f"keep: {keep!r}: must be a whole number of commits, at least 1")
    suffixes = tuple(arch_suffixes)
    pattern = nightly_pattern(nightly_tag, suffixes)
    moving = moving_tags(nightly_tag, suffixes)

    groups: dict[str, list[TagInfo]] = {}
    others: list[TagInfo] = []
    for tag in sorted(tags, key=lambda t: t.name):
        m = pattern.fullmatch(tag.name)
        if m and tag.name not in moving:
            groups.setdefault(m.group(1), []).append(tag)
        else:
            others.append(tag)

    def group_time(sha: str) -> datetime | None:
        times = [t.pushed for t in groups[sha] if t.pushed is not None]
        return max(times) if times else None

    timed = sorted(((sha, group_time(sha)) for sha in groups if group_time(sha) is not None),
                   key=lambda st: (st[1], st[0]), reverse=True)
    untimed = sorted(sha for sha in groups if group_time(sha) is None)
    kept_commits = [sha for sha, _ in timed[:keep]]
    rank = {sha: i + 1 for i, (sha, _) in enumerate(timed)}

    keep_list: list[Decision] = []
    protected: dict[str, str] = {}

    def protect(tag: TagInfo) -> None:
        if tag.digest:
            protected.setdefault(tag.digest, f"tag {tag.name}")
        for child in tag.children:
            protected.setdefault(child, f"a child of {tag.name}")

    for tag in others:
        kind = "moving" if tag.name in moving else "other"
        reason = "moving tag: never pruned" if kind == "moving" else "not a per-commit nightly tag"
        keep_list.append(Decision(tag.name, tag.digest, tag.pushed, None, kind, reason))
        protect(tag)
    for sha in kept_commits:
        for tag in groups[sha]:
            keep_list.append(Decision(tag.name, tag.digest, tag.pushed, sha, "newest",
                                      f"commit #{rank[sha]} of the newest {keep}"))
            protect(tag)
    for sha in untimed:
        for tag in groups[sha]:
            keep_list.append(Decision(tag.name, tag.digest, None, sha, "no-time", "no push time known: kept"))
            protect(tag)

    delete: list[Decision] = []
    for sha, _ in reversed(timed[keep:]):   # oldest first: an interrupted run has removed the oldest
        for tag in groups[sha]:
            if tag.digest and tag.digest in protected:
                keep_list.append(Decision(tag.name, tag.digest, tag.pushed, sha, "referenced",
                                          f"older than the newest {keep} commits, but its digest is "
                                          f"{protected[tag.digest]} (kept)"))
            else:
                delete.append(Decision(tag.name, tag.digest, tag.pushed, sha, "old",
                                       f"commit #{rank[sha]}: older than the newest {keep}"))
    commits = timed + [(sha, None) for sha in untimed]
    return PrunePlan(keep_list, delete, protected, commits, kept_commits)


@dataclass(frozen=True)
class DigestDeletion:
    """One manifest to delete by digest (GHCR version, plain registry manifest)."""

    digest: str
    tags: tuple[str, ...]
    reason: str
    parent: str | None = None        # for an untagged child: the index it goes with


def plan_digests(plan: PrunePlan, tags: Sequence[TagInfo],
                 children: Mapping[str, Sequence[str]]) -> tuple[list[DigestDeletion], list[dict[str, Any]]]:
    """For registries that delete by digest: the digests to delete (index first, then its children) and
    the children kept because a kept tag refers to them.

    A digest goes only when every tag on it is to be deleted. An index's children go with it unless a
    kept tag refers to them or a kept tag sits on them. `children`: digest -> child digests of indexes.
    """
    by_digest: dict[str, list[str]] = {}
    for tag in tags:
        if tag.digest:
            by_digest.setdefault(tag.digest, []).append(tag.name)
    doomed_tags = {d.tag for d in plan.delete}
    reasons = {d.tag: d.reason for d in plan.delete}
    out: list[DigestDeletion] = []
    seen: set[str] = set()
    skipped: list[dict[str, Any]] = []
    for decision in plan.delete:
        digest = decision.digest
        if not digest or digest in seen:
            continue
        names = sorted(by_digest.get(digest, [decision.tag]))
        if any(n not in doomed_tags for n in names) or digest in plan.protected:
            continue   # cannot happen with plan_prune's rules; kept defensively
        seen.add(digest)
        out.append(DigestDeletion(digest, tuple(names), reasons[decision.tag]))
        for child in children.get(digest, ()):
            if child in seen:
                continue
            child_tags = by_digest.get(child, [])
            if child in plan.protected:
                skipped.append({"tags": sorted(child_tags), "digest": child, "pushed": None, "commit": decision.commit,
                                "reason": f"child of {', '.join(names)}, but it is {plan.protected[child]} (kept)"})
                seen.add(child)
                continue
            if any(n not in doomed_tags for n in child_tags):
                continue
            seen.add(child)
            out.append(DigestDeletion(child, tuple(sorted(child_tags)),
                                      f"child of {', '.join(names)}, deleted with it", parent=digest))
    return out, skipped


# =========================================================================== helpers

_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def parse_time(text: Any) -> datetime | None:
    """RFC 3339 / ISO 8601 (Z, offsets, up to nanoseconds) -> aware UTC datetime; None if absent or bad."""
    if not isinstance(text, str) or not text.strip():
        return None
    value = _FRACTION.sub(r"\1", text.strip(), count=1)
    if value[-1:] in "Zz":
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def _iso(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if when else None


def _retry_after(value: str | None, clock: Callable[[], float]) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - clock())


def _is_loopback_url(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def _same_origin(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.netloc) == (y.scheme, y.netloc)


class _ApiClient:
    """requests session + bounded retries: rate limits waited out (capped), 5xx and network errors retried."""

    service = "API"

    def __init__(self, api_url: str, *, session=None, sleep: Callable[[float], None] = time.sleep,
                 pace: float = 0.5, log: Log | None = None, clock: Callable[[], float] = time.time,
                 max_wait: float = 120.0, rate_attempts: int = 6, error_attempts: int = 3,
                 backoff: float = 1.0, timeout: tuple[float, float] = (10.0, 60.0), max_pages: int = 1000):
        import requests

        self.api_url = api_url.rstrip("/")
        if session is None:
            session = requests.Session()
            if _is_loopback_url(self.api_url):
                session.trust_env = False   # never send loopback traffic through a proxy
        self.session = session
        self.sleep, self.pace, self.clock = sleep, pace, clock
        self.log = log or _stderr
        self.max_wait, self.rate_attempts, self.error_attempts = max_wait, rate_attempts, error_attempts
        self.backoff, self.timeout, self.max_pages = backoff, timeout, max_pages
        self.pages = 0              # pages listed (for the result's stats)
        self.deletes = 0            # delete requests started (pacing)
        self._secrets: list[str] = []

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _rate_wait(self, r) -> float | None:
        """Seconds to wait before retrying when `r` says "rate limited"; None otherwise."""
        if r.status_code == 429:
            wait = _retry_after(r.headers.get("Retry-After"), self.clock)
            return wait if wait is not None else -1.0   # -1: no hint, use the backoff
        return None

    def _request(self, method: str, url: str, what: str, *, headers: Mapping[str, str] | None = None,
                 json_body: Any = None):
        import requests

        rate_tries = error_tries = 0
        while True:
            try:
                r = self.session.request(method, url, headers=dict(headers or {}), json=json_body,
                                         timeout=self.timeout, allow_redirects=False)
            except requests.RequestException as exc:
                error_tries += 1
                if error_tries >= self.error_attempts:
                    raise PruneError(self._scrub(f"{what}: {self.service} unreachable after {error_tries} "
                                                 f"attempts: {type(exc).__name__}: {exc}")) from None
                self._wait(self.backoff * 2 ** (error_tries - 1), f"{what}: {type(exc).__name__}")
                continue
            wait = self._rate_wait(r)
            if wait is not None:
                rate_tries += 1
                if rate_tries >= self.rate_attempts:
                    raise PruneAbort(f"{what}: {self.service} still rate limits after {rate_tries} attempts "
                                     f"(HTTP {r.status_code})")
                if wait < 0:
                    wait = self.backoff * 2 ** (rate_tries - 1)
                if wait > self.max_wait:
                    self.log(f"{self.service} asks to wait {wait:g}s; waiting {self.max_wait:g}s (the cap)")
                self._wait(min(wait, self.max_wait), f"{what}: HTTP {r.status_code} rate limited")
                continue
            if r.status_code >= 500:
                error_tries += 1
                if error_tries >= self.error_attempts:
                    return r
                self._wait(self.backoff * 2 ** (error_tries - 1), f"{what}: HTTP {r.status_code}")
                continue
            return r

    def _wait(self, seconds: float, why: str) -> None:
        self.log(f"waiting {seconds:g}s: {why}")
        self.sleep(seconds)

    def _paced(self) -> None:
        """Called before each delete: `pace` seconds between deletes."""
        if self.deletes and self.pace > 0:
            self.sleep(self.pace)
        self.deletes += 1

    @staticmethod
    def _message(r) -> str:
        try:
            body = r.json()
        except ValueError:
            return (r.text or "")[:200].strip()
        if isinstance(body, dict):
            return str(body.get("message") or body.get("detail") or "")[:200]
        return ""


# =========================================================================== Docker Hub


class DockerHubClient(_ApiClient):
    """Docker Hub's tag API with a bearer token from `POST /v2/auth/token` (user + personal access token).

    The token needs the "Read, Write, Delete" scope to delete tags. Missing credentials raise PruneError
    here, before any request.
    """

    service = "Docker Hub"

    def __init__(self, api_url: str = DEFAULT_HUB_API, username: str | None = None, token: str | None = None,
                 session=None, sleep: Callable[[float], None] = time.sleep, pace: float = 0.5,
                 page_size: int = 100, **kwargs: Any):
        missing = [what for what, value in (("username", username), ("token", token)) if not value]
        if missing:
            raise PruneError(f"Docker Hub: no {' and no '.join(missing)}: pruning needs a user and an access "
                             "token with the Read, Write, Delete scope (DOCKERHUB_USERNAME, DOCKERHUB_TOKEN); "
                             "refusing to report success without pruning")
        super().__init__(api_url, session=session, sleep=sleep, pace=pace, **kwargs)
        self.username, self._token = str(username), str(token)
        self._secrets.append(self._token)
        self.page_size = page_size
        self._access: str | None = None

    def login(self) -> None:
        what = f"Docker Hub login as {self.username}"
        r = self._request("POST", f"{self.api_url}/v2/auth/token", what,
                          json_body={"identifier": self.username, "secret": self._token})
        if r.status_code in (401, 403):
            raise PruneAbort(f"Docker Hub rejected the credentials of user {self.username!r} (HTTP {r.status_code}): "
                             "check DOCKERHUB_USERNAME and DOCKERHUB_TOKEN (a personal or organization access token)")
        if r.status_code != 200:
            raise PruneError(self._scrub(f"{what}: HTTP {r.status_code} {self._message(r)}".rstrip()))
        try:
            access = r.json().get("access_token") or r.json().get("token")
        except (ValueError, AttributeError):
            access = None
        if not access:
            raise PruneError(f"{what}: the answer carries no access_token")
        self._access = str(access)
        self._secrets.append(self._access)

    def _auth(self) -> dict[str, str]:
        if self._access is None:
            self.login()
        return {"Authorization": f"Bearer {self._access}", "Accept": "application/json"}

    def list_tags(self, namespace: str, repository: str) -> list[dict[str, Any]]:
        """Every tag object of the repository: `next` followed until null (bounded, loop-checked), and the
        number seen checked against the `count` Hub reports, so a listing that stopped early is an error."""
        url: str | None = (f"{self.api_url}/v2/namespaces/{namespace}/repositories/{repository}/tags"
                           f"?page_size={self.page_size}")
        what = f"list tags of {namespace}/{repository} on Docker Hub"
        seen_urls: set[str] = set()
        by_name: dict[str, dict[str, Any]] = {}
        count: int | None = None
        while url is not None:
            if len(seen_urls) >= self.max_pages:
                raise PruneError(f"{what}: more than {self.max_pages} pages; refusing to prune from a partial list")
            if url in seen_urls:
                raise PruneError(f"{what}: pagination loops back to {url}")
            seen_urls.add(url)
            headers = self._auth() if _same_origin(url, self.api_url) else {"Accept": "application/json"}
            r = self._request("GET", url, what, headers=headers)
            if r.status_code == 401:
                raise PruneAbort(f"{what}: Docker Hub refused the access token of user {self.username!r} (HTTP 401)")
            if r.status_code == 404 and not by_name and count is None:
                raise PruneError(f"{what}: no such repository (HTTP 404)")
            if r.status_code != 200:
                raise PruneError(self._scrub(f"{what}: page {len(seen_urls)}: HTTP {r.status_code} "
                                             f"{self._message(r)}; refusing to prune from a partial list"))
            self.pages += 1
            try:
                body = r.json()
                results = body["results"]
            except (ValueError, KeyError, TypeError):
                raise PruneError(f"{what}: page {len(seen_urls)} is not a tag list") from None
            if isinstance(body.get("count"), int):
                count = body["count"]
            for tag in results or []:
                if isinstance(tag, dict) and tag.get("name"):
                    by_name[tag["name"]] = tag
            nxt = body.get("next")
            url = str(nxt) if nxt else None
        if count is not None and len(by_name) < count:
            raise PruneError(f"{what}: saw {len(by_name)} of {count} tags (did tags change while listing?); "
                             "refusing to prune from a partial list")
        return list(by_name.values())

    def delete_tag(self, namespace: str, repository: str, tag: str) -> bool:
        """DELETE one tag (paced). True: deleted; False: already gone (404). PruneAbort when the token is
        refused (after one fresh login) or the user may not delete; PruneError for other failures."""
        self._paced()
        url = f"{self.api_url}/v2/repositories/{namespace}/{repository}/tags/{tag}/"
        what = f"delete {namespace}/{repository}:{tag} on Docker Hub"
        relogged = False
        while True:
            r = self._request("DELETE", url, what, headers=self._auth())
            if r.status_code in (200, 202, 204):
                return True
            if r.status_code == 404:
                return False
            if r.status_code == 401 and not relogged:   # the access token expired during a long run
                relogged = True
                self.login()
                continue
            if r.status_code == 401:
                raise PruneAbort(f"{what}: Docker Hub refused a fresh access token of user {self.username!r} (HTTP 401)")
            if r.status_code == 403:
                raise PruneAbort(f"{what}: user {self.username!r} may not delete tags here (HTTP 403): the access "
                                 "token needs the Read, Write, Delete scope and write access to the repository")
            raise PruneError(self._scrub(f"{what}: HTTP {r.status_code} {self._message(r)}".rstrip()))


def hub_tag_info(obj: Mapping[str, Any]) -> TagInfo:
    """A Hub tag object -> TagInfo. Push time: `tag_last_pushed`, else `last_updated`. An index's children
    are the digests in `images` (Hub lists one image per platform, attestations hidden)."""
    images = [i for i in (obj.get("images") or []) if isinstance(i, dict)]
    digest = obj.get("digest") or (images[0].get("digest") if len(images) == 1 else None)
    children = tuple(sorted({str(i["digest"]) for i in images if i.get("digest") and i.get("digest") != digest}))
    pushed = parse_time(obj.get("tag_last_pushed")) or parse_time(obj.get("last_updated"))
    return TagInfo(str(obj["name"]), str(digest) if digest else None, pushed, children)


def hub_repository(path: str) -> tuple[str, str]:
    parts = path.split("/")
    if len(parts) == 1:
        return "library", parts[0]
    if len(parts) != 2 or not all(parts):
        raise PruneError(f"docker.io/{path}: a Docker Hub repository is namespace/name")
    return parts[0], parts[1]


# =========================================================================== GHCR (GitHub packages API)


class GhcrClient(_ApiClient):
    """Container package versions through the GitHub REST API; index children read from the registry.

    owner_type: "orgs" or "users" (or "user": the token's own packages); None tries /orgs/ and falls back
    to /users/ on 404. `registry` (a ghbuild.registry.Registry or anything with `get_manifest(repo, ref)`)
    and `registry_repo` are where index manifests are read (default: ghcr.io/<owner>/<package> with the
    same token). Deletes are paced (`pace`, GitHub asks for a second between writes); 403/429 with
    Retry-After or an exhausted x-ratelimit-remaining are waited out (bounded).
    """

    service = "GitHub"

    def __init__(self, api_url: str | None = None, token: str | None = None, owner: str | None = None,
                 package: str | None = None, owner_type: str | None = None, *, registry=None,
                 registry_repo: str | None = None, session=None, sleep: Callable[[float], None] = time.sleep,
                 pace: float = 1.0, per_page: int = 100, actor: str | None = None, **kwargs: Any):
        if not token:
            raise PruneError("GHCR: no token: pruning package versions needs GITHUB_TOKEN with packages: write "
                             "(and admin access to the package); refusing to report success without pruning")
        if not owner or not package:
            raise PruneError(f"GHCR: owner and package are required (got {owner!r}, {package!r})")
        if owner_type not in (None, "orgs", "users", "user"):
            raise PruneError(f"GHCR: owner_type {owner_type!r}: expected orgs, users or user")
        super().__init__(api_url or DEFAULT_GITHUB_API, session=session, sleep=sleep, pace=pace, **kwargs)
        self._token = str(token)
        self._secrets.append(self._token)
        self.owner, self.package, self.owner_type = owner, package, owner_type
        self.per_page = per_page
        self.registry, self.registry_repo = registry, registry_repo or f"{owner}/{package}".lower()
        self.actor = actor
        self._children: dict[str, tuple[str, ...]] = {}

    def _rate_wait(self, r) -> float | None:
        if r.status_code not in (403, 429):
            return None
        wait = _retry_after(r.headers.get("Retry-After"), self.clock)
        if wait is not None:
            return wait
        if r.headers.get("X-RateLimit-Remaining") == "0" and r.headers.get("X-RateLimit-Reset", "").isdigit():
            wait = max(0.0, int(r.headers["X-RateLimit-Reset"]) - self.clock()) + 1.0
            if wait > self.max_wait:
                raise PruneAbort(f"GitHub API rate limit exhausted until {r.headers['X-RateLimit-Reset']} "
                                 f"(in {wait:.0f}s, more than the {self.max_wait:g}s this run waits)")
            return wait
        if r.status_code == 429:
            return -1.0
        return None   # a plain 403: no permission

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": GITHUB_API_VERSION}

    def _base(self, scope: str) -> str:
        from urllib.parse import quote

        pkg = quote(self.package, safe="")
        if scope == "user":
            return f"{self.api_url}/user/packages/container/{pkg}/versions"
        return f"{self.api_url}/{scope}/{quote(self.owner, safe='')}/packages/container/{pkg}/versions"

    def _check_auth(self, r, what: str) -> None:
        if r.status_code == 401:
            raise PruneAbort(f"{what}: GitHub rejected the token (HTTP 401 {self._message(r) or 'Bad credentials'})")
        if r.status_code == 403:
            raise PruneAbort(self._scrub(f"{what}: GitHub refused (HTTP 403 {self._message(r)}): the token needs "
                                         "packages: read to list and packages: write plus admin access to the "
                                         "package to delete"))

    def list_versions(self) -> list[dict[str, Any]]:
        """Every active version (Link rel=next followed to the end, bounded)."""
        scopes = [self.owner_type] if self.owner_type else ["orgs", "users"]
        what = f"list versions of ghcr.io/{self.owner}/{self.package}"
        for scope in scopes:
            versions = self._list_scope(scope, what)
            if versions is not None:
                self.owner_type = scope
                return versions
        raise PruneError(f"{what}: package not found (HTTP 404) under "
                         f"{' or '.join('/' + s + '/' for s in scopes)}{self.owner}")

    def _list_scope(self, scope: str, what: str) -> list[dict[str, Any]] | None:
        """Every version under /orgs/ or /users/; None when the first page is a 404 (wrong owner type)."""
        url: str | None = f"{self._base(scope)}?per_page={self.per_page}&state=active"
        versions: list[dict[str, Any]] = []
        seen: set[str] = set()
        while url is not None:
            if len(seen) >= self.max_pages:
                raise PruneError(f"{what}: more than {self.max_pages} pages; refusing to prune from a partial list")
            if url in seen:
                raise PruneError(f"{what}: pagination loops back to {url}")
            seen.add(url)
            r = self._request("GET", url, what, headers=self._headers())
            self._check_auth(r, what)
            if r.status_code == 404 and len(seen) == 1:
                return None
            if r.status_code != 200:
                raise PruneError(self._scrub(f"{what}: page {len(seen)}: HTTP {r.status_code} {self._message(r)}; "
                                             "refusing to prune from a partial list"))
            self.pages += 1
            try:
                page = r.json()
            except ValueError:
                page = None
            if not isinstance(page, list):
                raise PruneError(f"{what}: page {len(seen)} is not a list of versions")
            versions += [v for v in page if isinstance(v, dict)]
            nxt = r.links.get("next", {}).get("url")
            if nxt and not _same_origin(nxt, self.api_url):
                raise PruneError(f"{what}: next page on another host ({nxt}); not sending the token there")
            url = nxt or None
        return versions

    def children(self, digest: str) -> tuple[str, ...]:
        """The manifests an index refers to, read from the registry; () for an image or a missing manifest."""
        if digest in self._children:
            return self._children[digest]
        reg = self.registry
        if reg is None:
            from ghbuild import registry as registry_mod

            reg = self.registry = registry_mod.Registry(
                GHCR_HOST, ghcr_credentials(self.actor or "", self._token), log=self.log, sleep=self.sleep)
        from ghbuild import registry as registry_mod

        try:
            manifest = reg.get_manifest(self.registry_repo, digest)
        except registry_mod.AuthError as exc:
            raise PruneAbort(self._scrub(f"reading {self.registry_repo}@{digest[:19]} from the registry: {exc}")) from None
        except registry_mod.RegistryError as exc:
            if "HTTP 404" in str(exc):
                self._children[digest] = ()
                return ()
            raise PruneError(self._scrub(f"reading {self.registry_repo}@{digest[:19]} from the registry "
                                         f"(needed to know what a kept index refers to): {exc}")) from None
        kids = tuple(c.digest for c in manifest.children()) if manifest.is_index else ()
        self._children[digest] = kids
        return kids

    def delete_version(self, version_id: int | str) -> bool:
        """DELETE one version (paced). True: deleted; False: already gone (404)."""
        self._paced()
        scope = self.owner_type or "orgs"
        url = f"{self._base(scope)}/{version_id}"
        what = f"delete version {version_id} of ghcr.io/{self.owner}/{self.package}"
        r = self._request("DELETE", url, what, headers=self._headers())
        if r.status_code in (200, 202, 204):
            return True
        if r.status_code == 404:
            return False
        self._check_auth(r, what)
        raise PruneError(self._scrub(f"{what}: HTTP {r.status_code} {self._message(r)}".rstrip()))


def ghcr_tag_infos(versions: Sequence[Mapping[str, Any]],
                   children: Callable[[str], Sequence[str]]) -> list[TagInfo]:
    """Tagged versions -> one TagInfo per tag (time: `updated_at`, else `created_at`; the version `name`
    is the digest)."""
    out = []
    for v in versions:
        tags = ((v.get("metadata") or {}).get("container") or {}).get("tags") or []
        if not tags or not v.get("name"):
            continue
        pushed = parse_time(v.get("updated_at")) or parse_time(v.get("created_at"))
        kids = tuple(children(str(v["name"])))
        out += [TagInfo(str(t), str(v["name"]), pushed, kids) for t in tags]
    return out


# =========================================================================== run


def _result(image: str, repository: str, backend: str, api: str | None, dry_run: bool, keep: int) -> dict[str, Any]:
    return {"image": image, "repository": repository, "backend": backend, "api": api, "dry_run": dry_run,
            "keep": keep, "kept": [], "deleted": [], "would_delete": [], "skipped_referenced": [], "errors": [],
            "stats": {}, "ok": True}


def _fill_plan(result: dict[str, Any], plan: PrunePlan, tags: Sequence[TagInfo]) -> None:
    result["kept"] = [d.to_dict() for d in plan.keep if d.kind in ("newest", "moving", "no-time")]
    result["skipped_referenced"] = [d.to_dict() for d in plan.referenced]
    result["stats"].update(tags=len(tags), candidates=len(plan.delete) + sum(
        d.kind in ("newest", "no-time", "referenced") for d in plan.keep), commits=len(plan.commits),
        commits_kept=len(plan.kept_commits) + sum(t is None for _, t in plan.commits),
        other_tags=sum(d.kind == "other" for d in plan.keep))


def resolve_repository(options, image: str, owner: str | None, env: Mapping[str, str]) -> str:
    from ghbuild.config import expand_repository

    if image not in options.images:
        raise ConfigError(f"--image {image}: no such image (known: {', '.join(options.images)})")
    template = options.images[image].publish or options.registries.publish
    if not template:
        raise ConfigError(f"{options.config_path}: registries.publish: not set; nothing to prune")
    owner = owner or env.get("GITHUB_REPOSITORY_OWNER") or (env.get("GITHUB_REPOSITORY") or "").partition("/")[0]
    if "{owner}" in template and not owner:
        raise ConfigError(f"registries.publish {template!r} needs {{owner}}: set GITHUB_REPOSITORY (or pass owner)")
    return naming.validate_repository(expand_repository(template, image, owner or ""), "registries.publish")


def run_prune(options, image: str, keep: int | None = None, apply: bool = False,
              env: Mapping[str, str] | None = None, hub_api: str | None = None, github_api: str | None = None,
              log: Log = _stderr, *, owner: str | None = None,
              registry_factory: Callable[[str], Any] | None = None, sleep: Callable[[float], None] = time.sleep,
              pace: float | None = None, session=None) -> dict[str, Any]:
    """Prune the nightly tags of one image's publish repository; a dry run unless `apply`.

    Returns a dict: image, repository, backend ("dockerhub" | "ghcr" | "registry"), api, dry_run, keep,
    kept / skipped_referenced / deleted / would_delete / errors (lists of {"tags", "digest", "pushed",
    "commit", "reason"}; errors have "error"), stats, ok (False when any delete failed or the run stopped).
    Raises PruneError (missing or refused credentials, incomplete listing) before anything is deleted.
    """
    env = os.environ if env is None else env
    keep = options.publish.retention if keep is None else keep
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise PruneError(f"--keep {keep!r}: must be a whole number of commits, at least 1")
    repository = resolve_repository(options, image, owner, env)
    host, path = naming.split_repository(repository)
    nightly, suffixes = options.publish.nightly_tag, tuple(options.publish.arch_suffixes.values())
    kwargs: dict[str, Any] = {"sleep": sleep, "log": log, "session": session}
    if pace is not None:
        kwargs["pace"] = pace

    if host in naming.DOCKER_HUB_HOSTS:
        api = hub_api or env.get("GHBUILD_DOCKERHUB_API") or DEFAULT_HUB_API
        result = _result(image, repository, "dockerhub", api, not apply, keep)
        if not env.get("DOCKERHUB_USERNAME") or not env.get("DOCKERHUB_TOKEN"):
            unset = [v for v in ("DOCKERHUB_USERNAME", "DOCKERHUB_TOKEN") if not env.get(v)]
            raise PruneError(f"{repository}: {' and '.join(unset)} not set: pruning Docker Hub needs a user and an "
                             "access token with the Read, Write, Delete scope; refusing to report success "
                             "without pruning")
        return _prune_hub(result, path, keep, nightly, suffixes, apply, log,
                          DockerHubClient(api, env["DOCKERHUB_USERNAME"], env["DOCKERHUB_TOKEN"], **kwargs))
    if host == GHCR_HOST:
        api = github_api or env.get("GITHUB_API_URL") or DEFAULT_GITHUB_API
        result = _result(image, repository, "ghcr", api, not apply, keep)
        if not env.get("GITHUB_TOKEN"):
            raise PruneError(f"{repository}: GITHUB_TOKEN not set: pruning GHCR needs a token with packages: write; "
                             "refusing to report success without pruning")
        pkg_owner, _, package = path.partition("/")
        if not package:
            raise PruneError(f"{repository}: a GHCR repository is ghcr.io/<owner>/<package>")
        reg = registry_factory(GHCR_HOST) if registry_factory else None
        client = GhcrClient(api, env["GITHUB_TOKEN"], pkg_owner, package, env.get("GHBUILD_GHCR_OWNER_TYPE") or None,
                            registry=reg, registry_repo=path, actor=env.get("GITHUB_ACTOR"), **kwargs)
        return _prune_ghcr(result, keep, nightly, suffixes, apply, log, client)
    result = _result(image, repository, "registry", None, not apply, keep)
    if registry_factory is None:
        from ghbuild.registry import client_factory

        registry_factory = client_factory(env, log)
    return _prune_registry(result, registry_factory(host), path, keep, nightly, suffixes, apply, log,
                           sleep, 0.5 if pace is None else pace)


def _prune_hub(result, path, keep, nightly, suffixes, apply, log, client: DockerHubClient) -> dict[str, Any]:
    ns, repo = hub_repository(path)
    client.login()
    raw = client.list_tags(ns, repo)
    tags = [hub_tag_info(t) for t in raw]
    plan = plan_prune(tags, keep, nightly, suffixes)
    _fill_plan(result, plan, tags)
    result["stats"]["pages"] = client.pages
    log(f"{result['repository']}: {len(tags)} tags in {client.pages} page(s); {len(plan.commits)} commits, "
        f"keeping the newest {keep}; {len(plan.delete)} tag(s) to delete")
    for decision in plan.delete:
        entry = decision.to_dict()
        if not apply:
            result["would_delete"].append(entry)
            log(f"would delete {result['repository']}:{decision.tag} ({decision.reason})")
            continue
        try:
            gone = client.delete_tag(ns, repo, decision.tag)
        except PruneAbort as exc:
            result["errors"].append({**entry, "error": str(exc)})
            log(f"stopping: {exc}")
            break
        except PruneError as exc:
            result["errors"].append({**entry, "error": str(exc)})
            log(f"failed: {exc}")
            continue
        if not gone:
            entry["already_gone"] = True
        result["deleted"].append(entry)
        log(f"deleted {result['repository']}:{decision.tag}" + ("" if gone else " (already gone)"))
    result["stats"]["deletes"] = client.deletes
    result["ok"] = not result["errors"]
    return result


def _prune_ghcr(result, keep, nightly, suffixes, apply, log, client: GhcrClient) -> dict[str, Any]:
    versions = client.list_versions()
    by_digest = {str(v["name"]): v for v in versions if v.get("name")}
    tags = ghcr_tag_infos(versions, client.children)
    plan = plan_prune(tags, keep, nightly, suffixes)
    _fill_plan(result, plan, tags)
    children = {t.digest: t.children for t in tags if t.digest and t.children}
    deletions, skipped = plan_digests(plan, tags, children)
    result["skipped_referenced"] += skipped
    result["stats"].update(pages=client.pages, versions=len(versions))
    log(f"{result['repository']}: {len(versions)} versions in {client.pages} page(s); {len(plan.commits)} commits, "
        f"keeping the newest {keep}; {len(deletions)} version(s) to delete")
    failed_parents: set[str] = set()
    for d in deletions:
        version = by_digest.get(d.digest)
        if version is None:   # a child that is not a version (already gone)
            continue
        entry = {"tags": list(d.tags), "digest": d.digest, "version_id": version.get("id"),
                 "pushed": _iso(parse_time(version.get("updated_at")) or parse_time(version.get("created_at"))),
                 "reason": d.reason}
        label = ", ".join(d.tags) or f"untagged {d.digest[:19]}"
        if not apply:
            result["would_delete"].append(entry)
            log(f"would delete version {version.get('id')} ({label}): {d.reason}")
            continue
        if d.parent in failed_parents:   # never orphan-delete the children of an index that stayed
            result["errors"].append({**entry, "error": "not deleted: its index could not be deleted"})
            continue
        try:
            gone = client.delete_version(version["id"])
        except PruneAbort as exc:
            result["errors"].append({**entry, "error": str(exc)})
            log(f"stopping: {exc}")
            break
        except PruneError as exc:
            result["errors"].append({**entry, "error": str(exc)})
            failed_parents.add(d.digest)
            log(f"failed: {exc}")
            continue
        if not gone:
            entry["already_gone"] = True
        result["deleted"].append(entry)
        log(f"deleted version {version.get('id')} ({label})" + ("" if gone else " (already gone)"))
    result["stats"]["deletes"] = client.deletes
    result["ok"] = not result["errors"]
    return result


def _config_created(reg, repo: str, manifest) -> datetime | None:
    import json

    try:
        config = json.loads(reg.read_blob(repo, manifest.data["config"]["digest"]))
    except (KeyError, TypeError, ValueError):
        return None
    when = parse_time(config.get("created")) if isinstance(config, dict) else None
    return when if when is not None and when >= _EPOCH_FLOOR else None


def _prune_registry(result, reg, path, keep, nightly, suffixes, apply, log, sleep, pace) -> dict[str, Any]:
    """Plain registry API: no single-tag delete (a manifest DELETE removes every tag on that digest) and no
    push time (the image config's `created`, an index's newest child, is the time)."""
    from ghbuild import registry as registry_mod

    pattern = nightly_pattern(nightly, suffixes)
    manifests: dict[str, Any] = {}
    created: dict[str, datetime | None] = {}

    def time_of(manifest) -> datetime | None:
        if manifest.digest not in created:
            if manifest.is_index:
                times = []
                for child in manifest.platforms().values():
                    if child.digest not in manifests:
                        manifests[child.digest] = reg.get_manifest(path, child.digest)
                    times.append(_config_created(reg, path, manifests[child.digest]))
                known = [t for t in times if t is not None]
                created[manifest.digest] = max(known) if known and len(known) == len(times) else None
            else:
                created[manifest.digest] = _config_created(reg, path, manifest)
        return created[manifest.digest]

    try:
        names = reg.list_tags(path)
        tags: list[TagInfo] = []
        for name in names:
            try:
                manifest = reg.get_manifest(path, name)
            except registry_mod.RegistryError as exc:
                if "HTTP 404" in str(exc):   # deleted since the listing
                    continue
                raise
            manifests[manifest.digest] = manifest
            kids = tuple(c.digest for c in manifest.children()) if manifest.is_index else ()
            pushed = time_of(manifest) if pattern.fullmatch(name) else None
            tags.append(TagInfo(name, manifest.digest, pushed, kids))
    except registry_mod.AuthError as exc:
        raise PruneAbort(f"{result['repository']}: the registry refused the credentials: {exc}") from None
    except registry_mod.RegistryError as exc:
        raise PruneError(f"{result['repository']}: listing failed: {exc}; refusing to prune from a partial list") from None

    plan = plan_prune(tags, keep, nightly, suffixes)
    _fill_plan(result, plan, tags)
    deletions, skipped = plan_digests(plan, tags, {t.digest: t.children for t in tags if t.digest and t.children})
    result["skipped_referenced"] += skipped
    log(f"{result['repository']}: {len(tags)} tags; {len(plan.commits)} commits, keeping the newest {keep}; "
        f"{len(deletions)} manifest(s) to delete (a plain registry deletes by digest)")
    deletes = 0
    failed_parents: set[str] = set()
    for d in deletions:
        entry = {"tags": list(d.tags), "digest": d.digest, "pushed": _iso(created.get(d.digest)), "reason": d.reason}
        label = ", ".join(d.tags) or "untagged"
        if not apply:
            result["would_delete"].append(entry)
            log(f"would delete {result['repository']}@{d.digest} ({label}): {d.reason}")
            continue
        if d.parent in failed_parents:
            result["errors"].append({**entry, "error": "not deleted: its index could not be deleted"})
            continue
        if deletes and pace > 0:
            sleep(pace)
        deletes += 1
        try:
            gone = reg.delete_manifest(path, d.digest)
        except registry_mod.AuthError as exc:
            result["errors"].append({**entry, "error": str(exc)})
            log(f"stopping: {exc}")
            break
        except registry_mod.RegistryError as exc:
            hint = " (is storage.delete.enabled set on the registry?)" if "405" in str(exc) or "UNSUPPORTED" in str(exc) else ""
            result["errors"].append({**entry, "error": f"{exc}{hint}"})
            failed_parents.add(d.digest)
            log(f"failed: {exc}{hint}")
            continue
        if not gone:
            entry["already_gone"] = True
        result["deleted"].append(entry)
        log(f"deleted {result['repository']}@{d.digest} ({label})")
    result["stats"]["deletes"] = deletes
    result["ok"] = not result["errors"]
    return result


# =========================================================================== output


def render(result: Mapping[str, Any]) -> str:
    """Human-readable summary for the CLI."""
    def label(e: Mapping[str, Any]) -> str:
        return ", ".join(e.get("tags") or []) or f"untagged {str(e.get('digest'))[:19]}"

    head = f"ghbuild prune: {result['repository']} ({result['backend']}), keep the newest {result['keep']} commits"
    lines = [head + (" (dry run: nothing deleted)" if result["dry_run"] else "")]
    for key, title in (("kept", "keep"), ("skipped_referenced", "keep (referenced)"),
                       ("would_delete", "would delete"), ("deleted", "deleted")):
        for e in result.get(key) or []:
            lines.append(f"  {title:<18} {label(e)}  {e.get('reason', '')}")
    for e in result.get("errors") or []:
        lines.append(f"  {'FAILED':<18} {label(e)}  {e.get('error')}")
    s = result.get("stats") or {}
    lines.append(f"  {s.get('tags', 0)} tags, {s.get('commits', 0)} commits; "
                 f"{len(result.get('deleted') or result.get('would_delete') or [])} "
                 f"{'to delete' if result['dry_run'] else 'deleted'}, {len(result.get('errors') or [])} failed")
    return "\n".join(lines)
