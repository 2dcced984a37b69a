"""A fake of Docker Hub's HTTP API (hub.docker.com) for tests, backed by a real distribution registry.

Usage::

    with dockerhub.start("http://127.0.0.1:5001", users={"bot": "dckr_pat_x"}) as hub:
        token = requests.post(hub.url + "/v2/auth/token",
                              json={"identifier": "bot", "secret": "dckr_pat_x"}).json()["access_token"]
        page = requests.get(hub.url + "/v2/namespaces/acme/app/tags?page_size=100").json()
        requests.delete(hub.url + "/v2/repositories/acme/app/tags/nightly-old/",
                        headers={"Authorization": f"Bearer {token}"})

What it serves (JSON shapes as Docker Hub sends them):

- ``POST /v2/auth/token`` ``{"identifier", "secret"}`` -> ``{"access_token": <JWT>}``; the older
  ``POST /v2/users/login`` ``{"username", "password"}`` -> ``{"token": <JWT>}``. Wrong credentials: 401.
- ``GET /v2/namespaces/{ns}/repositories/{repo}/tags`` and ``GET /v2/repositories/{ns}/{repo}/tags/``:
  ``{"count", "next", "previous", "results": [tag, ...]}``; ``page`` / ``page_size`` (default 10, capped at
  ``page_size_max``), ``ordering`` (``last_updated``, ``-last_updated`` (default), ``name``, ``-name``) and
  ``name`` (substring filter). ``next`` / ``previous`` are absolute URLs (the request's own query with
  ``page`` replaced, keys sorted, as Django REST framework builds them) or null. A page past the end is a
  404 ``{"message": "httperror 404: object not found", "errinfo": {...}}``.
- ``GET .../tags/{tag}`` (both path styles): one tag object.
- ``DELETE /v2/repositories/{ns}/{repo}/tags/{tag}/`` -> 204; needs ``Authorization: Bearer <JWT>``
  (``JWT <token>`` is accepted too); 401 without or with an unknown token, 404 for an unknown tag.

The tags are those of the backing registry's repository ``prefix + ns/repo`` (or ``repos["ns/repo"]``).
Distribution keeps no push time, so ``last_updated`` / ``tag_last_pushed`` is the time this fake first saw
the tag at its current digest (a tag that moves to another digest is "pushed" again); tests set it with
``set_pushed``.

Test knobs (shared with the GitHub fake through ``FakeServer``): ``fail_next`` injects error responses
(429 with ``Retry-After``, 500...), ``requests`` is the request log, ``errors`` holds tracebacks of crashes
inside the fake (a test should assert it is empty), ``tokens`` the valid tokens, ``page_size_max``.

The server scaffolding the GitHub fake shares (``FakeServer``: the threaded loopback HTTP server with the fault
and logging knobs) is in httpserver.py; the registry is read through oci.py's ``RegistryClient``.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from .httpserver import FakeServer, Request, Response

# RegistryClient, sha256_digest and the media types are imported from here by tests/test_prune.py too.
from .oci import (  # noqa: F401
    INDEX_TYPES,
    MT_OCI_INDEX,
    MT_OCI_MANIFEST,
    Manifest,
    RegistryClient,
    sha256_digest,
)


def utc(when: datetime) -> datetime:
    """An aware UTC datetime (naive ones are taken as UTC)."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def hub_time(when: datetime) -> str:
    """Docker Hub's timestamp format: microseconds and a Z, e.g. 2024-04-29T18:36:09.683545Z."""
    return utc(when).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def bearer_token(request: Request, schemes: tuple[str, ...] = ("bearer",)) -> str | None:
    """The credential of an ``Authorization: <scheme> <credential>`` header whose scheme is one of
    ``schemes`` (case-insensitive); "" for any other header; None when there is no header."""
    value = request.headers.get("Authorization")
    if value is None:
        return None
    scheme, _, credential = value.strip().partition(" ")
    return credential.strip() if scheme.lower() in schemes and credential.strip() else ""


# ----------------------------------------------------------------------------------------------
# Docker Hub
# ----------------------------------------------------------------------------------------------

_NAME = r"([^/]+)"


class DockerHubFake(FakeServer):
    """Docker Hub's tag API over a real registry.

    registry_url: the backing distribution registry (http, no auth, deletes enabled).
    users: Docker Hub identifiers and their secrets (password or personal access token) that
        ``/v2/auth/token`` and ``/v2/users/login`` accept.
    prefix / repos: Docker Hub ``ns/repo`` lives in registry repository ``repos["ns/repo"]`` if given,
        else ``prefix + "ns/repo"``.
    private: ``"ns/repo"`` names whose tag listing needs a valid token (else 404, as Hub answers for a
        private repository). Others are public: listing needs no token, but a bad one is a 401.
    page_size_max / page_size_over_max: Hub caps ``page_size`` at 100; "clamp" serves 100 per page for a
        larger request, "error" answers 400.
    write_access: None lets every valid token delete anywhere; else {user: {namespace, ...}} and a
        delete elsewhere is a 403.
    """

    def __init__(self, registry_url: str, *, users: dict[str, str] | None = None, prefix: str = "",
                 repos: dict[str, str] | None = None, private: set[str] | None = None,
                 page_size_max: int = 100, page_size_over_max: str = "clamp",
                 write_access: dict[str, set[str]] | None = None):
        super().__init__()
        self.registry = RegistryClient(registry_url)
        self.users: dict[str, str] = dict(users if users is not None else {"ghbuild": "dckr_pat_test"})
        self.prefix = prefix
        self.repos = dict(repos or {})
        self.private: set[str] = set(private or ())
        self.page_size_max = page_size_max
        self.page_size_default = 10
        self.page_size_over_max = page_size_over_max
        self.write_access = write_access
        self.tokens: set[str] = set()           # valid access tokens; clear it to "expire" them all
        self._token_user: dict[str, str] = {}
        self._pushed: dict[tuple[str, str, str], list[Any]] = {}   # (ns, repo, tag) -> [digest|None, datetime]
        self._ids: dict[Any, int] = {}
        self._repo_locks: dict[str, threading.Lock] = {}
        self._manifests: dict[tuple[str, str], Manifest] = {}     # (registry name, digest): immutable
        self._configs: dict[tuple[str, str], dict[str, Any]] = {}
        tags_new = rf"/v2/namespaces/{_NAME}/repositories/{_NAME}/tags/?"
        tags_old = rf"/v2/repositories/{_NAME}/{_NAME}/tags/?"
        self.route("POST", r"/v2/auth/token/?", self._auth_token)
        self.route("POST", r"/v2/users/login/?", self._users_login)
        self.route("GET", tags_new, self._list_tags)
        self.route("GET", tags_old, self._list_tags)
        self.route("GET", rf"/v2/namespaces/{_NAME}/repositories/{_NAME}/tags/{_NAME}/?", self._get_tag)
        self.route("GET", rf"/v2/repositories/{_NAME}/{_NAME}/tags/{_NAME}/?", self._get_tag)
        self.route("DELETE", rf"/v2/repositories/{_NAME}/{_NAME}/tags/{_NAME}/?", self._delete_tag)

    # -- public helpers ------------------------------------------------------------------------

    def registry_name(self, namespace: str, repository: str) -> str:
        key = f"{namespace}/{repository}"
        return self.repos.get(key, self.prefix + key)

    def set_pushed(self, namespace: str, repository: str, tag: str, when: datetime) -> None:
        """Set a tag's ``last_updated`` / ``tag_last_pushed`` (kept until the tag moves to another digest)."""
        with self._lock:
            entry = self._pushed.get((namespace, repository, tag))
            if entry is None:
                self._pushed[(namespace, repository, tag)] = [None, utc(when)]
            else:
                entry[1] = utc(when)

    def issue_token(self, user: str | None = None) -> str:
        """A valid access token, as ``/v2/auth/token`` would give (for tests that skip the exchange)."""
        user = user or next(iter(self.users), "ghbuild")
        now = int(time.time())

        def b64(obj: Any) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")

        token = ".".join((b64({"alg": "RS256", "typ": "JWT"}),
                          b64({"sub": user, "username": user, "iat": now, "exp": now + 600,
                               "jti": secrets.token_hex(8), "iss": "https://hub.docker.com"}),
                          base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")))
        with self._lock:
            self.tokens.add(token)
            self._token_user[token] = user
        return token

    # -- wire details --------------------------------------------------------------------------

    def error_body(self, status: int, message: str) -> Any:
        return {"message": message, "errinfo": {}}

    @staticmethod
    def _not_found(namespace: str, repository: str, **extra: str) -> Response:
        return Response(404, {"message": "httperror 404: object not found",
                              "errinfo": {"namespace": namespace, "repository": repository, **extra}})

    def _token_of(self, request: Request) -> tuple[str | None, Response | None]:
        """(user, None) for a valid token, (None, None) without an Authorization header, else (None, 401)."""
        credential = bearer_token(request, ("bearer", "jwt"))
        if credential is None:
            return None, None
        with self._lock:
            valid = credential in self.tokens
            user = self._token_user.get(credential, "")
        if not valid:
            return None, Response(401, {"detail": "Authentication credentials were not provided or are invalid.",
                                        "message": "invalid authorization token"})
        return user, None

    def _id(self, key: Any) -> int:
        with self._lock:
            return self._ids.setdefault(key, 1000 + len(self._ids))

    def _repo_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._repo_locks.setdefault(name, threading.Lock())

    def _manifest(self, name: str, digest: str) -> Manifest | None:
        key = (name, digest)
        with self._lock:
            cached = self._manifests.get(key)
        if cached is not None:
            return cached
        manifest = self.registry.get_manifest(name, digest)
        if manifest is not None:
            with self._lock:
                self._manifests[key] = manifest
        return manifest

    def _config(self, name: str, digest: str) -> dict[str, Any]:
        key = (name, digest)
        with self._lock:
            cached = self._configs.get(key)
        if cached is None:
            blob = self.registry.get_blob(name, digest)
            cached = json.loads(blob) if blob else {}
            with self._lock:
                self._configs[key] = cached
        return cached

    def _pushed_at(self, namespace: str, repository: str, tag: str, digest: str) -> datetime:
        with self._lock:
            entry = self._pushed.get((namespace, repository, tag))
            if entry is None or (entry[0] is not None and entry[0] != digest):
                entry = self._pushed[(namespace, repository, tag)] = [digest, datetime.now(UTC)]
            elif entry[0] is None:
                entry[0] = digest
            return entry[1]

    # -- tag objects ---------------------------------------------------------------------------

    def _image(self, name: str, digest: str, platform: dict[str, Any] | None, pushed: datetime) -> dict[str, Any]:
        manifest = self._manifest(name, digest)
        body = manifest.json() if manifest is not None else {}
        size = sum(int(layer.get("size", 0)) for layer in body.get("layers", []))
        if platform is None:
            platform = self._config(name, body["config"]["digest"]) if body.get("config") else {}
        return {
            "architecture": platform.get("architecture", ""),
            "features": " ".join(platform.get("features", [])) if platform.get("features") else "",
            "variant": platform.get("variant"),
            "digest": digest,
            "os": platform.get("os", ""),
            "os_features": " ".join(platform.get("os.features", [])) if platform.get("os.features") else "",
            "os_version": platform.get("os.version"),
            "size": size,
            "status": "active",
            "last_pulled": None,
            "last_pushed": hub_time(pushed),
        }

    def _tag_object(self, namespace: str, repository: str, name: str, tag: str, digest: str,
                    media_type: str) -> dict[str, Any]:
        pushed = self._pushed_at(namespace, repository, tag, digest)
        if media_type in INDEX_TYPES:
            manifest = self._manifest(name, digest)
            images = []
            for child in (manifest.json().get("manifests", []) if manifest else []):
                platform = child.get("platform") or {}
                annotations = child.get("annotations") or {}
                # Hub hides buildx attestation manifests (platform unknown/unknown) from the image list.
                if annotations.get("vnd.docker.reference.type") == "attestation-manifest" or \
                        platform.get("os") == "unknown":
                    continue
                images.append(self._image(name, child["digest"], platform, pushed))
        else:
            images = [self._image(name, digest, None, pushed)]
        user = next(iter(self.users), "ghbuild")
        return {
            "creator": self._id(("user", user)),
            "id": self._id(("tag", namespace, repository, tag)),
            "images": images,
            "last_updated": hub_time(pushed),
            "last_updater": self._id(("user", user)),
            "last_updater_username": user,
            "name": tag,
            "repository": self._id(("repo", namespace, repository)),
            "full_size": images[0]["size"] if images else 0,
            "v2": True,
            "tag_status": "active",
            "tag_last_pulled": None,
            "tag_last_pushed": hub_time(pushed),
            "media_type": media_type,
            "content_type": "image",
            "digest": digest,
        }

    def _visible(self, request: Request, namespace: str, repository: str) -> Response | None:
        user, denied = self._token_of(request)
        if denied is not None:
            return denied
        if f"{namespace}/{repository}" in self.private and user is None:
            return self._not_found(namespace, repository)
        return None

    # -- handlers ------------------------------------------------------------------------------

    def _auth_token(self, request: Request) -> Response:
        try:
            data = request.json() or {}
        except ValueError:
            return Response(400, {"message": "invalid JSON body", "errinfo": {}})
        identifier, secret = data.get("identifier"), data.get("secret")
        if not isinstance(identifier, str) or not isinstance(secret, str) or not identifier or not secret:
            return Response(400, {"message": "identifier and secret are required", "errinfo": {}})
        if self.users.get(identifier) != secret:
            return Response(401, {"detail": "Incorrect authentication credentials",
                                  "message": "Incorrect authentication credentials"})
        return Response(200, {"access_token": self.issue_token(identifier)})

    def _users_login(self, request: Request) -> Response:
        try:
            data = request.json() or {}
        except ValueError:
            return Response(400, {"message": "invalid JSON body", "errinfo": {}})
        username, password = data.get("username"), data.get("password")
        if not username or not password or self.users.get(username) != password:
            return Response(401, {"detail": "Incorrect authentication credentials"})
        return Response(200, {"token": self.issue_token(username)})

    def _list_tags(self, request: Request, namespace: str, repository: str) -> Response:
        denied = self._visible(request, namespace, repository)
        if denied is not None:
            return denied
        try:
            page_size = int(request.arg("page_size") or self.page_size_default)
        except ValueError:
            page_size = self.page_size_default
        if page_size < 1:
            page_size = self.page_size_default
        if page_size > self.page_size_max:
            if self.page_size_over_max == "error":
                return Response(400, {"message": f"page_size: ensure this value is less than or equal to "
                                                 f"{self.page_size_max}", "errinfo": {}})
            page_size = self.page_size_max
        try:
            page = int(request.arg("page") or 1)
        except ValueError:
            return self._not_found(namespace, repository)

        name = self.registry_name(namespace, repository)
        wanted = (request.arg("name") or "").lower()
        with self._repo_lock(name):  # a consistent snapshot: never the middle of a tag delete
            tags = self.registry.tags(name)
            if tags is None:
                return self._not_found(namespace, repository)
            entries = []
            for tag in tags:
                if wanted and wanted not in tag.lower():
                    continue
                head = self.registry.head_manifest(name, tag)
                if head is not None:  # else deleted behind the fake's back since tags/list
                    entries.append((tag, *head))
            objects = [self._tag_object(namespace, repository, name, tag, digest, mt) for tag, digest, mt in entries]

        ordering = request.arg("ordering") or "-last_updated"
        key_name = ordering.lstrip("-")
        if key_name == "name":
            objects.sort(key=lambda o: o["name"], reverse=ordering.startswith("-"))
        else:  # last_updated; ties by name so that pages are stable
            objects.sort(key=lambda o: o["name"])
            objects.sort(key=lambda o: o["last_updated"], reverse=ordering.startswith("-"))

        count = len(objects)
        pages = max(1, -(-count // page_size))
        if page < 1 or page > pages:
            return self._not_found(namespace, repository)
        results = objects[(page - 1) * page_size: page * page_size]
        return Response(200, {
            "count": count,
            "next": self._page_url(request, page + 1) if page < pages else None,
            "previous": self._page_url(request, page - 1) if page > 1 else None,
            "results": results,
        })

    def _page_url(self, request: Request, page: int) -> str:
        # As Django REST framework's PageNumberPagination builds them: the request's own query with
        # "page" replaced (keys sorted), and no "page" at all in the link to the first page.
        query = {k: v for k, v in request.query.items() if k != "page"}
        if page > 1:
            query["page"] = [str(page)]
        encoded = urllib.parse.urlencode(sorted(query.items()), doseq=True)
        return f"{self.url}{request.path}" + (f"?{encoded}" if encoded else "")

    def _get_tag(self, request: Request, namespace: str, repository: str, tag: str) -> Response:
        denied = self._visible(request, namespace, repository)
        if denied is not None:
            return denied
        name = self.registry_name(namespace, repository)
        with self._repo_lock(name):
            head = self.registry.head_manifest(name, tag)
            if head is None:
                return self._not_found(namespace, repository, tag=tag)
            return Response(200, self._tag_object(namespace, repository, name, tag, *head))

    def _delete_tag(self, request: Request, namespace: str, repository: str, tag: str) -> Response:
        user, denied = self._token_of(request)
        if denied is not None:
            return denied
        if user is None:
            return Response(401, {"detail": "Authentication credentials were not provided.",
                                  "message": "authentication required"})
        if self.write_access is not None and namespace not in self.write_access.get(user, set()):
            return Response(403, {"detail": "You do not have permission to perform this action.",
                                  "message": "forbidden"})
        name = self.registry_name(namespace, repository)
        with self._repo_lock(name):
            head = self.registry.head_manifest(name, tag)
            if head is None:
                return self._not_found(namespace, repository, tag=tag)
            digest = head[0]
            manifest = self.registry.get_manifest(name, digest)
            if manifest is None:  # deleted between the HEAD and the GET
                return self._not_found(namespace, repository, tag=tag)
            # Docker Hub deletes only the tag. Distribution can only delete a manifest by digest, which
            # also removes every other tag pointing at that digest (and the manifest itself, which a
            # kept multi-arch index may still reference). So: note the sibling tags and whether a
            # tagged index references the digest, delete the digest, then put the identical manifest
            # bytes back under each sibling tag (or, with no sibling, by digest, untagged, so the index
            # stays whole). The digest is unchanged, so the siblings' last_updated is unchanged too.
            siblings, referenced = [], False
            for other in self.registry.tags(name) or []:
                if other == tag:
                    continue
                other_head = self.registry.head_manifest(name, other)
                if other_head is None:
                    continue
                if other_head[0] == digest:
                    siblings.append(other)
                elif other_head[1] in INDEX_TYPES:
                    index = self._manifest(name, other_head[0])
                    if index and any(m.get("digest") == digest for m in index.json().get("manifests", [])):
                        referenced = True
            self.registry.delete_manifest(name, digest)
            for other in siblings:
                self.registry.put_manifest(name, other, manifest.body, manifest.media_type)
            if not siblings and referenced:
                self.registry.put_manifest(name, digest, manifest.body, manifest.media_type)
        with self._lock:
            self._pushed.pop((namespace, repository, tag), None)
        return Response(204)


def start(registry_url: str, **kwargs: Any) -> DockerHubFake:
    """Start a Docker Hub fake (see ``DockerHubFake`` for the arguments); use it as a context manager
    or call ``.stop()``."""
    fake = DockerHubFake(registry_url, **kwargs)
    fake.start()
    return fake
