"""GHCR backend (`ghcr.io`): the GitHub packages API (GITHUB_TOKEN; GITHUB_API_URL redirects it).

A version is one digest with its tags; it is deleted only when every tag on it is to be deleted. An
index's children are untagged versions: they go with their index, never while a kept index refers to
them. The children are read from the registry (the index manifest), so that lookup is injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, Self
from urllib.parse import quote

from ghbuild.errors import AuthError, PruneAbort, PruneError, RegistryError
from ghbuild.http.origin import same_origin
from ghbuild.http.response import Response
from ghbuild.http.retry import RateLimit, retry_after_seconds
from ghbuild.http.session import Session
from ghbuild.registry.client import Registry, RegistryFactory
from ghbuild.registry.credentials import GHCR_HOST, ghcr_credentials
from ghbuild.registry.manifest import Manifest
from ghbuild.registry.readers import DEFAULT_READERS, Readers
from ghbuild.retention.api import ApiClient
from ghbuild.retention.backend import DeletesDigests
from ghbuild.retention.plan import DigestDeletion, TagInfo, descendants, iso, parse_time

DEFAULT_GITHUB_API = "https://api.github.com"
GITHUB_API_VERSION = "2022-11-28"


class ManifestSource(Protocol):
    """Where the GHCR backend reads index manifests (their children are untagged versions)."""

    def get_manifest(self, repo: str, ref: str) -> Manifest: ...

    def clone(self) -> Self: ...     # a client of its own for each reader (ghbuild.registry.readers)


class GhcrClient(ApiClient):
    """Container package versions through the GitHub REST API; index children read from the registry.

    owner_type: "orgs" or "users" (or "user": the token's own packages); None tries /orgs/ and falls back
    to /users/ on 404. `registry` (a ghbuild.registry.client.Registry, or any ManifestSource) and
    `registry_repo` are where index manifests are read (default: ghcr.io/<owner>/<package> with the same
    token). Deletes are paced (`pace`, GitHub asks for a second between writes); 403/429 with Retry-After or
    an exhausted x-ratelimit-remaining are waited out (bounded).
    """

    service = "GitHub"

    def __init__(self, api_url: str | None = None, token: str | None = None, owner: str | None = None,
                 package: str | None = None, owner_type: str | None = None, *,
                 registry: ManifestSource | None = None, registry_repo: str | None = None,
                 session: Session | None = None, sleep: Callable[[float], None] = time.sleep,
                 pace: float = 1.0, per_page: int = 100, actor: str | None = None, readers: int = DEFAULT_READERS,
                 **kwargs: Any):
        if not token:
            raise PruneError("GHCR: no token: pruning package versions needs GITHUB_TOKEN with packages: write "
                             "(and admin access to the package); refusing to report success without pruning")
        if not owner or not package:
            raise PruneError(f"GHCR: owner and package are required (got {owner!r}, {package!r})")
        if owner_type not in (None, "orgs", "users", "user"):
            raise PruneError(f"GHCR: owner_type {owner_type!r}: expected orgs, users or user")
        super().__init__(api_url or DEFAULT_GITHUB_API, session=session, sleep=sleep, pace=pace, **kwargs)
        self._token = str(token)
        self.secrets.append(self._token)
        self.owner, self.package, self.owner_type = owner, package, owner_type
        self.per_page = per_page
        self.registry: ManifestSource | None = registry
        self.registry_repo = registry_repo or f"{owner}/{package}".lower()
        self.actor = actor
        self._children: dict[str, tuple[str, ...]] = {}
        self.readers = readers
        self._readers: Readers[ManifestSource] | None = None

    def rate_limit(self, r: Response) -> RateLimit | None:
        """403 or 429 with Retry-After, or with x-ratelimit-remaining 0 (wait until x-ratelimit-reset; longer
        than `max_wait`: PruneAbort), or a bare 429 (back off). A plain 403 is no rate limit: no permission."""
        if r.status_code not in (403, 429):
            return None
        wait = retry_after_seconds(r.headers.get("Retry-After"), self.clock)
        if wait is not None:
            return RateLimit(wait)
        if r.headers.get("X-RateLimit-Remaining") == "0" and r.headers.get("X-RateLimit-Reset", "").isdigit():
            wait = max(0.0, int(r.headers["X-RateLimit-Reset"]) - self.clock()) + 1.0
            if wait > self.max_wait:
                raise PruneAbort(f"GitHub API rate limit exhausted until {r.headers['X-RateLimit-Reset']} "
                                 f"(in {wait:.0f}s, more than the {self.max_wait:g}s this run waits)")
            return RateLimit(wait)
        if r.status_code == 429:
            return RateLimit(None)
        return None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": GITHUB_API_VERSION}

    def _base(self, scope: str) -> str:
        pkg = quote(self.package, safe="")
        if scope == "user":
            return f"{self.api_url}/user/packages/container/{pkg}/versions"
        return f"{self.api_url}/{scope}/{quote(self.owner, safe='')}/packages/container/{pkg}/versions"

    def _check_auth(self, r, what: str) -> None:
        if r.status_code == 401:
            raise PruneAbort(f"{what}: GitHub rejected the token (HTTP 401 {self.message(r) or 'Bad credentials'})")
        if r.status_code == 403:
            raise PruneAbort(self.scrub(f"{what}: GitHub refused (HTTP 403 {self.message(r)}): the token needs "
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
            self.visit_page(url, seen, what)
            r = self.request("GET", url, what, headers=self._headers())
            self._check_auth(r, what)
            if r.status_code == 404 and len(seen) == 1:
                return None
            if r.status_code != 200:
                raise PruneError(self.scrub(f"{what}: page {len(seen)}: HTTP {r.status_code} {self.message(r)}; "
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
            if nxt and not same_origin(nxt, self.api_url):
                raise PruneError(f"{what}: next page on another host ({nxt}); not sending the token there")
            url = nxt or None
        return versions

    def _registry(self) -> ManifestSource:
        if self.registry is None:
            self.registry = Registry(GHCR_HOST, ghcr_credentials(self.actor or "", self._token), log=self.log,
                                     sleep=self.sleep)
        return self.registry

    def children(self, digest: str) -> tuple[str, ...]:
        """The manifests an index refers to, read from the registry; () for an image or a missing manifest."""
        if digest not in self._children:
            self._children[digest] = self._read_children(self._registry(), digest)
        return self._children[digest]

    def read_children(self, digests: Iterable[str]) -> None:
        """What every index among `digests` refers to, to any depth, read side by side (up to `readers` at once)
        into the cache `children` answers from: a package of thousands of tags is that many manifest reads."""
        if self._readers is None:
            self._readers = Readers(self._registry(), self.readers)
        level = sorted(set(digests) - set(self._children))
        while level:
            kids = self._readers.map(self._read_children, level)
            self._children.update(zip(level, kids, strict=True))
            level = sorted({kid for found in kids for kid in found} - set(self._children))

    def _read_children(self, reg: ManifestSource, digest: str) -> tuple[str, ...]:
        try:
            manifest = reg.get_manifest(self.registry_repo, digest)
        except AuthError as exc:
            raise PruneAbort(self.scrub(f"reading {self.registry_repo}@{digest[:19]} from the registry: {exc}")) \
                from None
        except RegistryError as exc:
            if "HTTP 404" in str(exc):
                return ()
            raise PruneError(self.scrub(f"reading {self.registry_repo}@{digest[:19]} from the registry "
                                        f"(needed to know what a kept index refers to): {exc}")) from None
        return tuple(c.digest for c in manifest.children()) if manifest.is_index else ()

    def delete_version(self, version_id: int | str) -> bool:
        """DELETE one version. True: deleted; False: already gone (404)."""
        scope = self.owner_type or "orgs"
        url = f"{self._base(scope)}/{version_id}"
        what = f"delete version {version_id} of ghcr.io/{self.owner}/{self.package}"
        r = self.request("DELETE", url, what, headers=self._headers())
        if r.status_code in (200, 202, 204):
            return True
        if r.status_code == 404:
            return False
        self._check_auth(r, what)
        raise PruneError(self.scrub(f"{what}: HTTP {r.status_code} {self.message(r)}".rstrip()))


def ghcr_tag_infos(versions: Sequence[Mapping[str, Any]],
                   children: Callable[[str], Sequence[str]]) -> list[TagInfo]:
    """Tagged versions -> one TagInfo per tag (time: `updated_at`, else `created_at`; the version `name`
    is the digest)."""
    out = []
    for v in versions:
        tags = _tags_of(v)
        if not tags or not v.get("name"):
            continue
        pushed = parse_time(v.get("updated_at")) or parse_time(v.get("created_at"))
        kids = descendants(str(v["name"]), children)
        out += [TagInfo(str(t), str(v["name"]), pushed, kids) for t in tags]
    return out


class GhcrBackend(DeletesDigests):
    """The delete loop's view of one GHCR package (a Backend[DigestDeletion]): versions listed through the
    GitHub API, deleted by version (one digest: every tag on it, an index with its untagged children)."""

    name = "ghcr"
    unit = "version(s)"

    def __init__(self, client: GhcrClient):
        self.client = client
        self.pace = client.pace
        self.versions: dict[str, Mapping[str, Any]] = {}
        self._listed = 0

    def list_tags(self) -> list[TagInfo]:
        versions = self.client.list_versions()
        self.client.read_children(str(v["name"]) for v in versions if v.get("name") and _tags_of(v))
        self.versions = {str(v["name"]): v for v in versions if v.get("name")}
        self._listed = len(versions)
        return ghcr_tag_infos(versions, self.client.children)

    def summary(self) -> str:
        return f"{self._listed} versions in {self.client.pages} page(s)"

    def stats(self) -> dict[str, int]:
        return {"pages": self.client.pages, "versions": self._listed}

    def entry(self, item: DigestDeletion) -> dict[str, Any] | None:
        version = self.versions.get(item.digest)
        if version is None:   # a child that is not a version (already gone)
            return None
        return {"tags": list(item.tags), "digest": item.digest, "version_id": version.get("id"),
                "pushed": iso(parse_time(version.get("updated_at")) or parse_time(version.get("created_at"))),
                "reason": item.reason}

    def label(self, item: DigestDeletion) -> str:
        tags = ", ".join(item.tags) or f"untagged {item.digest[:19]}"
        return f"version {self.versions[item.digest].get('id')} ({tags})"

    def delete(self, item: DigestDeletion) -> bool:
        return self.client.delete_version(self.versions[item.digest]["id"])


def backend(repository: str, path: str, env: Mapping[str, str], api: str | None = None, *,
            registry_factory: RegistryFactory | None = None, **client_kwargs: Any) -> GhcrBackend:
    """The backend for `ghcr.io/<owner>/<package>`, with GITHUB_TOKEN from `env` (PruneError when unset).
    GHBUILD_GHCR_OWNER_TYPE (orgs, users, user) skips the /orgs/-then-/users/ probe."""
    if not env.get("GITHUB_TOKEN"):
        raise PruneError(f"{repository}: GITHUB_TOKEN not set: pruning GHCR needs a token with packages: write; "
                         "refusing to report success without pruning")
    pkg_owner, _, package = path.partition("/")
    if not package:
        raise PruneError(f"{repository}: a GHCR repository is ghcr.io/<owner>/<package>")
    reg = registry_factory(GHCR_HOST) if registry_factory else None
    client = GhcrClient(api_url(api, env), env["GITHUB_TOKEN"], pkg_owner, package,
                        env.get("GHBUILD_GHCR_OWNER_TYPE") or None, registry=reg, registry_repo=path,
                        actor=env.get("GITHUB_ACTOR"), **client_kwargs)
    return GhcrBackend(client)


def api_url(api: str | None, env: Mapping[str, str]) -> str:
    return api or env.get("GITHUB_API_URL") or DEFAULT_GITHUB_API


def _tags_of(version: Mapping[str, Any]) -> list[Any]:
    return ((version.get("metadata") or {}).get("container") or {}).get("tags") or []
