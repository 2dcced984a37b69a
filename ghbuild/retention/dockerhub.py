"""Docker Hub backend (`docker.io`, `registry-1.docker.io`): the Hub API.

A bearer token from `POST /v2/auth/token` (DOCKERHUB_USERNAME + DOCKERHUB_TOKEN; missing or refused:
PruneError before anything is listed or deleted), every page of
`GET /v2/namespaces/{ns}/repositories/{repo}/tags` (`next` followed until null, bounded, and the total
checked against `count`), then `DELETE /v2/repositories/{ns}/{repo}/tags/{tag}/`: 429 `Retry-After`
honoured (capped), 5xx retried, 404 = already gone. Hub deletes only the tag; an index's children are
listed in the tag's `images`. The API base can be redirected with GHBUILD_DOCKERHUB_API (tests, demos).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ghbuild.errors import PruneAbort, PruneError
from ghbuild.http.origin import same_origin
from ghbuild.http.session import Session
from ghbuild.retention.api import ApiClient
from ghbuild.retention.backend import DeletesTags
from ghbuild.retention.plan import Decision, TagInfo, parse_time

DEFAULT_HUB_API = "https://hub.docker.com"


class DockerHubClient(ApiClient):
    """Docker Hub's tag API with a bearer token from `POST /v2/auth/token` (user + personal access token).

    The token needs the "Read, Write, Delete" scope to delete tags. Missing credentials raise PruneError
    here, before any request.
    """

    service = "Docker Hub"

    def __init__(self, api_url: str = DEFAULT_HUB_API, username: str | None = None, token: str | None = None,
                 session: Session | None = None, sleep: Callable[[float], None] = time.sleep, pace: float = 0.5,
                 page_size: int = 100, **kwargs: Any):
        missing = [what for what, value in (("username", username), ("token", token)) if not value]
        if missing:
            raise PruneError(f"Docker Hub: no {' and no '.join(missing)}: pruning needs a user and an access "
                             "token with the Read, Write, Delete scope (DOCKERHUB_USERNAME, DOCKERHUB_TOKEN); "
                             "refusing to report success without pruning")
        super().__init__(api_url, session=session, sleep=sleep, pace=pace, **kwargs)
        self.username, self._token = str(username), str(token)
        self.secrets.append(self._token)
        self.page_size = page_size
        self._access: str | None = None

    def login(self) -> None:
        what = f"Docker Hub login as {self.username}"
        r = self.request("POST", f"{self.api_url}/v2/auth/token", what,
                         json_body={"identifier": self.username, "secret": self._token})
        if r.status_code in (401, 403):
            raise PruneAbort(f"Docker Hub rejected the credentials of user {self.username!r} (HTTP {r.status_code}): "
                             "check DOCKERHUB_USERNAME and DOCKERHUB_TOKEN (a personal or organization access token)")
        if r.status_code != 200:
            raise PruneError(self.scrub(f"{what}: HTTP {r.status_code} {self.message(r)}".rstrip()))
        try:
            access = r.json().get("access_token") or r.json().get("token")
        except (ValueError, AttributeError):
            access = None
        if not access:
            raise PruneError(f"{what}: the answer carries no access_token")
        self._access = str(access)
        self.secrets.append(self._access)

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
            self.visit_page(url, seen_urls, what)
            headers = self._auth() if same_origin(url, self.api_url) else {"Accept": "application/json"}
            r = self.request("GET", url, what, headers=headers)
            if r.status_code == 401:
                raise PruneAbort(f"{what}: Docker Hub refused the access token of user {self.username!r} (HTTP 401)")
            if r.status_code == 404 and not by_name and count is None:
                raise PruneError(f"{what}: no such repository (HTTP 404)")
            if r.status_code != 200:
                raise PruneError(self.scrub(f"{what}: page {len(seen_urls)}: HTTP {r.status_code} "
                                            f"{self.message(r)}; refusing to prune from a partial list"))
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
        """DELETE one tag. True: deleted; False: already gone (404). PruneAbort when the token is
        refused (after one fresh login) or the user may not delete; PruneError for other failures."""
        url = f"{self.api_url}/v2/repositories/{namespace}/{repository}/tags/{tag}/"
        what = f"delete {namespace}/{repository}:{tag} on Docker Hub"
        relogged = False
        while True:
            r = self.request("DELETE", url, what, headers=self._auth())
            if r.status_code in (200, 202, 204):
                return True
            if r.status_code == 404:
                return False
            if r.status_code == 401 and not relogged:   # the access token expired during a long run
                relogged = True
                self.login()
                continue
            if r.status_code == 401:
                raise PruneAbort(f"{what}: Docker Hub refused a fresh access token of user {self.username!r} "
                                 "(HTTP 401)")
            if r.status_code == 403:
                raise PruneAbort(f"{what}: user {self.username!r} may not delete tags here (HTTP 403): the access "
                                 "token needs the Read, Write, Delete scope and write access to the repository")
            raise PruneError(self.scrub(f"{what}: HTTP {r.status_code} {self.message(r)}".rstrip()))


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


class DockerHubBackend(DeletesTags):
    """The delete loop's view of one Docker Hub repository (a Backend[Decision]): tags listed through the Hub
    API, deleted one tag at a time."""

    name = "dockerhub"
    unit = "tag(s)"

    def __init__(self, client: DockerHubClient, repository: str, path: str):
        self.client, self.repository, self.path = client, repository, path
        self.pace = client.pace
        self.namespace = self.repo = ""
        self._listed = 0

    def list_tags(self) -> list[TagInfo]:
        self.namespace, self.repo = hub_repository(self.path)
        self.client.login()
        tags = [hub_tag_info(t) for t in self.client.list_tags(self.namespace, self.repo)]
        self._listed = len(tags)
        return tags

    def summary(self) -> str:
        return f"{self._listed} tags in {self.client.pages} page(s)"

    def stats(self) -> dict[str, int]:
        return {"pages": self.client.pages}

    def entry(self, item: Decision) -> dict[str, Any]:
        return item.to_dict()

    def label(self, item: Decision) -> str:
        return f"{self.repository}:{item.tag}"

    def delete(self, item: Decision) -> bool:
        return self.client.delete_tag(self.namespace, self.repo, item.tag)


def backend(repository: str, path: str, env: Mapping[str, str], api: str | None = None,
            **client_kwargs: Any) -> DockerHubBackend:
    """The backend for `docker.io/<path>`, with the credentials in `env` (PruneError when unset)."""
    if not env.get("DOCKERHUB_USERNAME") or not env.get("DOCKERHUB_TOKEN"):
        unset = [v for v in ("DOCKERHUB_USERNAME", "DOCKERHUB_TOKEN") if not env.get(v)]
        raise PruneError(f"{repository}: {' and '.join(unset)} not set: pruning Docker Hub needs a user and an "
                         "access token with the Read, Write, Delete scope; refusing to report success "
                         "without pruning")
    client = DockerHubClient(api_url(api, env), env["DOCKERHUB_USERNAME"], env["DOCKERHUB_TOKEN"], **client_kwargs)
    return DockerHubBackend(client, repository, path)


def api_url(api: str | None, env: Mapping[str, str]) -> str:
    return api or env.get("GHBUILD_DOCKERHUB_API") or DEFAULT_HUB_API
