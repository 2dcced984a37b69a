"""The registry layer: OCI distribution protocol over HTTP, for publishing and base-image lookups.

Library choice: ghbuild.http.session for HTTP (http.client and ssl: TLS and CA bundles, proxies, kept-alive
connections, streamed bodies, timeouts, dropping Authorization on cross-host redirects to blob storage; it
replaced `requests`, whose import cost more than a whole republish's requests) plus this small client for the
distribution protocol and its token auth. No registry library fitted (measured, see docs/registry.md):
python-dxf uploads only as one monolithic PUT, turns a 202 mount answer into an exception and leaks the
upload session, replays a spent body after a 401 and has no retries; oras-py reads whole blobs into
memory, has no mount, forces the OCI Content-Type on manifest pushes (a Docker manifest list is refused)
and reuses a pull-scoped token for pushes; docker-registry-client-async is asyncio with one scope per
token, so a cross-repository mount never gets the source's pull right.

The layers, each in its own module: ghbuild.http.session (one HTTP exchange, redirects), ghbuild.registry.auth
(challenges, scoped tokens), ghbuild.http.retry (the retry policy), this client (manifests, blobs, tags),
ghbuild.registry.upload (blob upload sessions, resumed where the registry allows) and ghbuild.registry.copy
(registry to registry).

Blobs are streamed (CHUNK bytes at a time, one PATCH with Content-Length, then PUT ?digest=) and never
pass through a Docker engine. They are not hashed on the way: the target hashes what it receives and
refuses a wrong ?digest= (DIGEST_INVALID: DigestMismatch), and the source is content-addressed. Lookups
tell "confirmed missing" (404: None) from "failed" (network, 429, 5xx: retried, then TransientError;
401/403: AuthError at once): a failure never counts as a miss.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar
from urllib.parse import urlencode, urljoin

from ghbuild import __version__
from ghbuild.errors import DigestMismatch, RegistryError, TransientError
from ghbuild.http.origin import is_loopback
from ghbuild.http.response import Response
from ghbuild.http.retry import Retrier, RetryPolicy
from ghbuild.http.session import session_for
from ghbuild.naming import DIGEST_RE, DOCKER_HUB_HOSTS, DOCKER_HUB_REGISTRY
from ghbuild.registry import answers, credentials, upload
from ghbuild.registry.auth import RegistryAuth, pull_scope, push_scope
from ghbuild.registry.copy import CHUNK as CHUNK
from ghbuild.registry.copy import CopyStats as CopyStats
from ghbuild.registry.copy import Meter as Meter
from ghbuild.registry.copy import copy_blob as copy_blob
from ghbuild.registry.copy import copy_image as copy_image
from ghbuild.registry.copy import serialized as serialized
from ghbuild.registry.credentials import Credentials
from ghbuild.registry.manifest import Descriptor, Manifest, sha256_digest
from ghbuild.registry.manifest import make_index as make_index
from ghbuild.registry.mediatypes import ACCEPT_MANIFEST, IMAGE_TYPES, INDEX_TYPES

T = TypeVar("T")


def normalize_repo(host: str, repo: str) -> str:
    """Docker Hub puts single-component names under library/."""
    if host in DOCKER_HUB_HOSTS and "/" not in repo:
        return "library/" + repo
    return repo


class Registry:
    """One registry host. Thread-unsafe (one HTTP session); make one per thread if needed."""

    def __init__(self, host: str, credentials: Credentials | None = None, *, insecure: bool | None = None,
                 verify: bool | str = True, timeout: tuple[float, float] = (10.0, 300.0),
                 attempts: int = 4, delay: float = 2.0, sleep: Callable[[float], None] = time.sleep,
                 log: Callable[[str], None] | None = None):
        if host in DOCKER_HUB_HOSTS:
            host = DOCKER_HUB_REGISTRY
        self.host = host
        self.scheme = "http" if (is_loopback(host) if insecure is None else insecure) else "https"
        self.session = session_for(host)  # never sends loopback traffic through a proxy
        self.session.headers["User-Agent"] = f"ghbuild/{__version__}"
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.verify, self.timeout = verify, timeout
        self.attempts, self.delay, self.sleep = attempts, delay, sleep
        # `attempts` tries `delay` apart, a longer Retry-After heeded up to 2 minutes; 429s count as failures.
        self.retrier = Retrier(RetryPolicy(attempts=attempts, delay=delay, factor=1.0, max_wait=120.0,
                                           min_wait=delay), sleep=sleep, log=self.log)
        self.auth = RegistryAuth(self.session, credentials, verify, timeout, self.scheme)

    def clone(self) -> Registry:
        """A client for the same registry with its own HTTP session (a Session is not thread-safe)."""
        return Registry(self.host, self.auth.credentials, insecure=self.scheme == "http", verify=self.verify,
                        timeout=self.timeout, attempts=self.attempts, delay=self.delay, sleep=self.sleep,
                        log=self.log)

    # ----- plumbing

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}/v2/{path}"

    _errors = staticmethod(answers.distribution_errors)
    _error = staticmethod(answers.answer_error)

    def retry(self, fn: Callable[[], T], what: str) -> T:
        """Retry transient failures (network, 429, 5xx) `attempts` times, `delay` apart (Retry-After wins)."""
        return self.retrier.call(fn, what)

    def _location(self, r: Response) -> str:
        """Upload URL from Location: may be relative; keep our scheme when the host is ours."""
        return answers.location(r, self.host, self.scheme)

    # ----- manifests

    def resolve(self, repo: str, ref: str) -> Descriptor | None:
        """Tag or digest -> descriptor; None only when the registry CONFIRMS absence (404).

        Network errors, timeouts, 429 and 5xx are retried `attempts` times `delay` apart and then raise
        TransientError; 401/403 raise AuthError at once. Neither is ever reported as "missing".
        """
        repo = normalize_repo(self.host, repo)

        def once() -> Descriptor | None:
            r = self.auth.send("HEAD", self.url(f"{repo}/manifests/{ref}"), pull_scope(repo),
                               headers={"Accept": ACCEPT_MANIFEST})
            r.close()
            if r.status_code == 404:  # HEAD has no body: MANIFEST_UNKNOWN / NAME_UNKNOWN both mean absent
                return None
            if r.status_code != 200:
                raise self._error(r, f"HEAD {repo}:{ref}")
            digest = r.headers.get("Docker-Content-Digest")
            if not digest or not DIGEST_RE.match(digest):
                m = self._get_manifest_once(repo, ref)       # some registries omit it on HEAD
                return Descriptor(m.media_type, m.digest, len(m.raw))
            if ref.startswith("sha256:") and digest != ref:
                raise DigestMismatch(f"{repo}@{ref}: registry answered {digest}")
            mt = r.headers.get("Content-Type", "").split(";")[0].strip()
            return Descriptor(mt, digest, int(r.headers.get("Content-Length") or 0))

        return self.retry(once, f"resolve {self.host}/{repo}:{ref}")

    def _find_manifest_once(self, repo: str, ref: str) -> Manifest | None:
        """One GET of a manifest: None when the registry confirms it absent (404)."""
        r = self.auth.send("GET", self.url(f"{repo}/manifests/{ref}"), pull_scope(repo),
                           headers={"Accept": ACCEPT_MANIFEST})
        if r.status_code == 404:
            r.close()
            return None
        return self._manifest_from(r, repo, ref)

    def _get_manifest_once(self, repo: str, ref: str) -> Manifest:
        r = self.auth.send("GET", self.url(f"{repo}/manifests/{ref}"), pull_scope(repo),
                           headers={"Accept": ACCEPT_MANIFEST})
        return self._manifest_from(r, repo, ref)

    def _manifest_from(self, r: Response, repo: str, ref: str) -> Manifest:
        if r.status_code != 200:
            raise self._error(r, f"GET manifest {repo}:{ref}")
        raw = r.content
        digest = sha256_digest(raw)
        claimed = r.headers.get("Docker-Content-Digest")
        if ref.startswith("sha256:") and digest != ref:
            raise DigestMismatch(f"{repo}@{ref}: body hashes to {digest}")
        if claimed and claimed != digest:
            raise DigestMismatch(f"{repo}:{ref}: header says {claimed}, body hashes to {digest}")
        # OCI manifests may omit mediaType in the body: trust Content-Type, then the body.
        mt = r.headers.get("Content-Type", "").split(";")[0].strip()
        if mt not in INDEX_TYPES + IMAGE_TYPES:
            mt = json.loads(raw).get("mediaType") or mt
        if mt not in INDEX_TYPES + IMAGE_TYPES:
            raise RegistryError(f"{repo}:{ref}: unsupported manifest type {mt!r}")
        return Manifest(raw, mt, digest)

    def get_manifest(self, repo: str, ref: str) -> Manifest:
        repo = normalize_repo(self.host, repo)
        return self.retry(lambda: self._get_manifest_once(repo, ref), f"get manifest {repo}:{ref}")

    def find_manifest(self, repo: str, ref: str) -> Manifest | None:
        """get_manifest, or None only when the registry confirms absence (404), as resolve() does: one
        request where a resolve() and a get_manifest() take two."""
        repo = normalize_repo(self.host, repo)
        return self.retry(lambda: self._find_manifest_once(repo, ref), f"get manifest {repo}:{ref}")

    def put_manifest(self, repo: str, ref: str, raw: bytes, media_type: str) -> str:
        """PUT by tag or by digest with the manifest's own media type; returns the digest."""
        repo = normalize_repo(self.host, repo)
        digest = sha256_digest(raw)
        if ref.startswith("sha256:") and ref != digest:
            raise DigestMismatch(f"refusing to push {digest} as {ref}")

        def once() -> str:
            r = self.auth.send("PUT", self.url(f"{repo}/manifests/{ref}"), push_scope(repo),
                               headers={"Content-Type": media_type}, data=raw)
            r.close()
            if r.status_code not in (200, 201):
                raise self._error(r, f"PUT manifest {repo}:{ref}")
            got = r.headers.get("Docker-Content-Digest")
            if got and got != digest:
                raise DigestMismatch(f"registry stored {got}, we sent {digest}")
            return digest

        return self.retry(once, f"put manifest {repo}:{ref}")

    # ----- blobs

    def list_tags(self, repo: str, page_size: int = 1000) -> list[str]:
        """Every tag of a repository, following `Link: <...>; rel="next"` pagination to the end."""
        repo = normalize_repo(self.host, repo)
        url: str | None = self.url(f"{repo}/tags/list?n={page_size}")
        tags: list[str] = []
        for _ in range(100_000):
            if url is None:
                return tags

            def once(page_url: str = url) -> tuple[str | None, list[str]]:
                r = self.auth.send("GET", page_url, pull_scope(repo))
                if r.status_code == 404:
                    return None, []
                if r.status_code != 200:
                    raise self._error(r, f"GET tags {repo}")
                link = r.links.get("next", {}).get("url")
                return (urljoin(page_url, link) if link else None), list(r.json().get("tags") or [])

            url, page = self.retry(once, f"list tags {self.host}/{repo}")
            tags += page
        raise RegistryError(f"list tags {repo}: pagination did not end")

    def delete_manifest(self, repo: str, digest: str) -> bool:
        """DELETE a manifest by digest (every tag pointing at it goes with it). False when already gone."""
        repo = normalize_repo(self.host, repo)

        def once() -> bool:
            r = self.auth.send("DELETE", self.url(f"{repo}/manifests/{digest}"),
                               [f"repository:{repo}:delete,pull,push"])
            r.close()
            if r.status_code in (200, 202):
                return True
            if r.status_code == 404:
                return False
            raise self._error(r, f"DELETE manifest {repo}@{digest}")

        return self.retry(once, f"delete manifest {repo}@{digest[:19]}")

    def blob_exists(self, repo: str, digest: str) -> bool:
        repo = normalize_repo(self.host, repo)

        def once() -> bool:
            r = self.auth.send("HEAD", self.url(f"{repo}/blobs/{digest}"), pull_scope(repo))
            r.close()
            if r.status_code == 200:
                return True
            if r.status_code == 404:
                return False
            raise self._error(r, f"HEAD blob {repo}@{digest}")

        return self.retry(once, f"blob exists {repo}@{digest[:19]}")

    def read_blob(self, repo: str, digest: str, max_size: int = 4 << 20) -> bytes:
        """Small blobs only (image config). Retried like every read; a connection broken mid-body is transient."""
        repo = normalize_repo(self.host, repo)

        def once() -> bytes:
            r = self.auth.send("GET", self.url(f"{repo}/blobs/{digest}"), pull_scope(repo), stream=True)
            try:
                if r.status_code != 200:
                    raise self._error(r, f"GET blob {repo}@{digest}")
                data = r.raw.read(max_size + 1, decode_content=False)
            except OSError as exc:     # ghbuild.http.errors.RequestException is one
                raise TransientError(f"GET blob {repo}@{digest[:19]}: {type(exc).__name__}: {exc}") from exc
            finally:
                r.close()
            if len(data) > max_size or sha256_digest(data) != digest:
                raise DigestMismatch(f"{repo}@{digest}: too large or wrong content")
            return data

        return self.retry(once, f"read blob {repo}@{digest[:19]}")

    def open_blob(self, repo: str, digest: str, offset: int = 0) -> Response:
        """Streaming GET (follows redirects to storage; Authorization is dropped when the origin changes).
        `offset`: from that byte on (`Range`); the answer is a 206, or a 200 with the whole blob from a source
        that ignores ranges (the caller skips what it does not want)."""
        headers = {"Range": f"bytes={offset}-"} if offset else None
        r = self.auth.send("GET", self.url(f"{normalize_repo(self.host, repo)}/blobs/{digest}"),
                           pull_scope(normalize_repo(self.host, repo)), headers=headers, stream=True)
        if r.status_code != 200 and not (offset and r.status_code == 206):
            err = self._error(r, f"GET blob {repo}@{digest}")   # reads the (small) error body first
            r.close()
            raise err
        return r

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> str | None:
        """Cross-repository mount. None when mounted (201); else the upload URL the 202 opened.

        On 202 the registry did NOT mount (blob unknown in from_repo, or no pull right there) and started an
        ordinary upload session instead: use that Location for the upload rather than leaking it.
        """
        repo, from_repo = normalize_repo(self.host, repo), normalize_repo(self.host, from_repo)
        url = self.url(f"{repo}/blobs/uploads/?" + urlencode({"mount": digest, "from": from_repo}))
        r = self.auth.send("POST", url, push_scope(repo) + pull_scope(from_repo),
                           headers={"Content-Length": "0"})
        r.close()
        if r.status_code == 201:
            return None
        if r.status_code == 202:
            return self._location(r)
        raise self._error(r, f"mount {digest[:19]} into {repo} from {from_repo}")

    def start_upload(self, repo: str) -> str:
        return upload.start(self, repo)

    def upload_stream(self, repo: str, desc: Descriptor, chunks: Iterable[bytes], location: str | None = None,
                      reopen: Callable[[int], Iterable[bytes]] | None = None) -> int:
        """The blob into `repo` (ghbuild.registry.upload.stream): how many times a cut upload was resumed."""
        return upload.stream(self, normalize_repo(self.host, repo), desc, chunks, location, reopen)

    def cancel_upload(self, repo: str, location: str) -> None:
        upload.cancel(self, repo, location)


RegistryFactory = Callable[[str], Registry]


def client_factory(env: Mapping[str, str], log: Callable[[str], None]) -> RegistryFactory:
    """host -> one Registry client per host, with the credentials CI put in place (ghbuild.registry.credentials)."""
    cache: dict[str, Registry] = {}

    def make(host: str) -> Registry:
        if host not in cache:
            cache[host] = Registry(host, credentials.for_host(host, env), log=log)
        return cache[host]

    return make
