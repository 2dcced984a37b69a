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

Blobs are streamed (CHUNK bytes at a time, one PATCH with Content-Length, then PUT ?digest=) and never
pass through a Docker engine. They are not hashed on the way: the target hashes what it receives and
refuses a wrong ?digest= (DIGEST_INVALID: DigestMismatch), and the source is content-addressed. Lookups
tell "confirmed missing" (404: None) from "failed" (network, 429, 5xx: retried, then TransientError;
401/403: AuthError at once): a failure never counts as a miss.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from ghbuild import __version__
from ghbuild.errors import AuthError, DigestMismatch, RegistryError, TransientError
from ghbuild.http import session as http_session
from ghbuild.http.retry import is_loopback, retry_after_seconds
from ghbuild.naming import DIGEST_RE, DOCKER_HUB_HOSTS, DOCKER_HUB_REGISTRY
from ghbuild.registry.credentials import Credentials

# --------------------------------------------------------------------------- media types

MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
INDEX_TYPES = (MT_DOCKER_LIST, MT_OCI_INDEX)
IMAGE_TYPES = (MT_DOCKER_MANIFEST, MT_OCI_MANIFEST)
# Every type we understand, and never schema1: without an Accept header distribution converts a schema2
# manifest to a signed schema1 (different digest), and an Accept without the list types makes the registry
# answer a manifest list's tag with one platform's manifest (the amd64 child digest, not the list's).
ACCEPT_MANIFEST = ", ".join((MT_OCI_INDEX, MT_DOCKER_LIST, MT_OCI_MANIFEST, MT_DOCKER_MANIFEST))
# Layers that must not be copied (their blobs live elsewhere, e.g. Windows base layers).
NON_DISTRIBUTABLE = ("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd")

CHUNK = 1 << 20                # bytes read from the source per iteration while streaming a blob
# --------------------------------------------------------------------------- auth


_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="..",service="..",scope=".."` -> ("bearer", {...}). One challenge is enough here."""
    scheme, _, rest = header.strip().partition(" ")
    params = {}
    for m in _CHALLENGE_PARAM.finditer(rest):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
    return scheme.lower(), params


def canonical_scopes(scopes: Iterable[str]) -> frozenset[str]:
    """Merge scopes per resource with sorted actions: "repository:a:push,pull" == "repository:a:pull,push"."""
    merged: dict[tuple[str, str], set[str]] = {}
    for scope in scopes:
        for one in scope.split():
            kind, _, rest = one.partition(":")
            name, _, actions = rest.rpartition(":")
            merged.setdefault((kind, name), set()).update(a for a in actions.split(",") if a)
    return frozenset(f"{k}:{n}:{','.join(sorted(a))}" for (k, n), a in merged.items())


def _covers(have: frozenset[str], want: frozenset[str]) -> bool:
    grants = {s.rpartition(":")[0]: set(s.rpartition(":")[2].split(",")) for s in have}
    return all(s.rpartition(":")[0] in grants and set(s.rpartition(":")[2].split(","))
               <= grants[s.rpartition(":")[0]] for s in want)


class _Auth:
    """Per-registry auth state: Basic header, or Bearer tokens cached per set of scopes with expiry."""

    def __init__(self, session: http_session.Session, credentials: Credentials | None, verify, timeout,
                 registry_scheme: str = "https"):
        self.session, self.credentials, self.verify, self.timeout = session, credentials, verify, timeout
        self.registry_scheme = registry_scheme
        self.scheme: str | None = None            # "basic" or "bearer" once a challenge was seen
        self.bearer: dict[str, str] = {}          # realm, service from the last challenge
        self.tokens: dict[frozenset[str], tuple[str, float]] = {}

    def header(self, scopes: Iterable[str], fresh_for: float = 0.0) -> str | None:
        """Authorization value for these scopes if we already have one (valid for fresh_for more seconds)."""
        if self.scheme == "basic" and self.credentials:
            return self.credentials.basic()
        if self.scheme == "bearer":
            want = canonical_scopes(scopes)
            now = time.monotonic()
            for have, (token, expires) in self.tokens.items():
                if _covers(have, want) and expires - now > max(fresh_for, 5.0):
                    return "Bearer " + token
        return None

    def ensure(self, scopes: Iterable[str], fresh_for: float) -> str | None:
        """Get a token now (before a request whose body cannot be replayed) when the registry uses Bearer."""
        if self.scheme == "bearer" and self.header(scopes, fresh_for) is None:
            self.fetch_token(set(scopes))
            # A token server whose tokens live no longer than fresh_for (60 s without expires_in): the new
            # token as it is, rather than none at all (a request without it is refused for sure).
            return self.header(scopes, fresh_for) or self.header(scopes)
        return self.header(scopes, fresh_for)

    def challenge(self, response: http_session.Response, scopes: Iterable[str]) -> bool:
        """React to a 401. Returns True when a retry with new credentials makes sense."""
        header = response.headers.get("WWW-Authenticate", "")
        scheme, params = parse_challenge(header) if header else ("", {})
        if scheme == "basic":
            first = self.scheme != "basic"
            self.scheme = "basic"
            return bool(self.credentials) and first
        if scheme != "bearer" or "realm" not in params:
            return False
        self.scheme = "bearer"
        self.bearer = {k: params[k] for k in ("realm", "service") if k in params}
        wanted = set(scopes) | set(params.get("scope", "").split())
        if params.get("error") == "insufficient_scope" and self.header(wanted) is not None:
            return False  # a fresh token for exactly these scopes was already refused
        self.fetch_token(wanted)
        return True

    def fetch_token(self, scopes: Iterable[str]) -> None:
        # Each scope is its own `scope=` parameter (Docker's token spec); a mount needs
        # "repository:<target>:pull,push" and "repository:<source>:pull" in the same token.
        query = [("service", self.bearer["service"])] if "service" in self.bearer else []
        scopes = canonical_scopes(scopes)
        query += [("scope", s) for s in sorted(scopes)]
        headers = {"Authorization": self.credentials.basic()} if self.credentials else {}
        if headers and self.registry_scheme == "https" and not self.bearer["realm"].lower().startswith("https://"):
            # The registry is reached over TLS: its credentials never travel in clear text to a token server.
            raise AuthError(f"token server {self.bearer['realm']}: not https, and the registry is; "
                            "the credentials are not sent there")
        try:
            r = self.session.get(self.bearer["realm"], params=query, headers=headers,
                                 verify=self.verify, timeout=self.timeout)
        except http_session.PermanentError as exc:
            raise RegistryError(f"token request to {self.bearer['realm']}: {exc}") from None
        except http_session.RequestException as exc:
            raise TransientError(f"token request to {self.bearer['realm']} failed: {exc}") from exc
        if r.status_code in (401, 403):
            raise AuthError(f"token server {self.bearer['realm']} refused the credentials ({r.status_code})")
        if r.status_code == 429 or r.status_code >= 500:
            raise TransientError(f"token server answered {r.status_code}")
        if r.status_code != 200:
            raise RegistryError(f"token server answered {r.status_code}: {r.text[:200]}")
        body = r.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError("token server answered without a token")
        # The token spec's default lifetime is 60 s when expires_in is absent; Docker Hub gives 300 s.
        expires = time.monotonic() + float(body.get("expires_in") or 60)
        self.tokens[scopes] = (token, expires)


# --------------------------------------------------------------------------- data


class Descriptor(NamedTuple):
    media_type: str
    digest: str
    size: int
    platform: dict | None = None

    def as_json(self) -> dict:
        d = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.platform:
            d["platform"] = self.platform
        return d


class Manifest(NamedTuple):
    raw: bytes                 # the exact bytes: re-serialising JSON changes the digest
    media_type: str
    digest: str

    @property
    def data(self) -> dict:
        return json.loads(self.raw)

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def children(self) -> list[Descriptor]:
        """Index entries with platforms; attestation entries (platform unknown/unknown) are kept too."""
        return [Descriptor(m["mediaType"], m["digest"], m["size"], m.get("platform"))
                for m in self.data.get("manifests", [])]

    def platforms(self) -> dict[str, Descriptor]:
        """'linux/arm64/v8' -> child descriptor, skipping BuildKit attestation manifests (unknown/unknown)."""
        out = {}
        for c in self.children():
            p = c.platform or {}
            if p.get("os") == "unknown" or p.get("architecture") == "unknown":
                continue
            key = "/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x)
            out[key] = c
        return out

    def blobs(self) -> list[Descriptor]:
        d = self.data
        return [Descriptor(b["mediaType"], b["digest"], b["size"])
                for b in [d["config"], *d.get("layers", [])]
                if b.get("mediaType") not in NON_DISTRIBUTABLE and not b.get("urls")]


class CopyStats:
    """Counters of a copy; the threads of one copy each count their own part and add it up at the end."""

    KEYS = ("copied_bytes", "copied_blobs", "skipped_bytes", "skipped_blobs", "mounted_bytes", "mounted_blobs",
            "manifests",            # pushed
            "manifests_present",    # already on the target, not pushed
            "tags_moved")           # tags created or pointed at a new digest

    def __init__(self, **counts: int) -> None:
        for key in self.KEYS:
            setattr(self, key, counts.pop(key, 0))
        if counts:
            raise TypeError(f"CopyStats: unknown counters {', '.join(counts)}")

    def as_dict(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in self.KEYS}

    def add(self, part: CopyStats) -> None:
        for key in self.KEYS:
            setattr(self, key, getattr(self, key) + getattr(part, key))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CopyStats) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"CopyStats({', '.join(f'{k}={v}' for k, v in self.as_dict().items())})"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def normalize_repo(host: str, repo: str) -> str:
    """Docker Hub puts single-component names under library/."""
    if host in DOCKER_HUB_HOSTS and "/" not in repo:
        return "library/" + repo
    return repo


# --------------------------------------------------------------------------- client


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
        self.session = http_session.session_for(host)  # never sends loopback traffic through a proxy
        self.session.headers["User-Agent"] = f"ghbuild/{__version__}"
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.verify, self.timeout = verify, timeout
        self.attempts, self.delay, self.sleep = attempts, delay, sleep
        self.auth = _Auth(self.session, credentials, verify, timeout, self.scheme)

    def clone(self) -> Registry:
        """A client for the same registry with its own HTTP session (a Session is not thread-safe)."""
        return Registry(self.host, self.auth.credentials, insecure=self.scheme == "http", verify=self.verify,
                        timeout=self.timeout, attempts=self.attempts, delay=self.delay, sleep=self.sleep,
                        log=self.log)

    # ----- plumbing

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}/v2/{path}"

    def _send(self, method: str, url: str, scopes: list[str], *, headers=None, data=None,
              stream=False, replayable=True, fresh_for: float = 0.0) -> http_session.Response:
        """One request with auth: answer a 401 challenge once (only when the body can be sent again)."""
        hdrs = dict(headers or {})
        auth = self.auth.ensure(scopes, fresh_for) if not replayable else self.auth.header(scopes)
        for _ in range(2):
            if auth:
                hdrs["Authorization"] = auth
            try:
                r = self.session.request(method, url, headers=hdrs, data=data, stream=stream,
                                         verify=self.verify, timeout=self.timeout, allow_redirects=True)
            except http_session.PermanentError as exc:
                raise RegistryError(f"{method} {url.split('?')[0]}: {exc}") from None
            except http_session.RequestException as exc:
                # Includes a registry closing the connection mid-body (e.g. 401 on a token that expired).
                raise TransientError(f"{method} {url.split('?')[0]}: {type(exc).__name__}: {exc}") from exc
            if r.status_code != 401 or not http_session.same_origin(r.url, url):
                # A 401 from where a redirect led (blob storage) is that host's answer: its challenge would
                # name a token server of its choosing, and the registry's credentials must never go there.
                return r
            if not replayable:
                # The streamed body is spent: take a new token and let the caller restart the blob.
                r.close()
                self.auth.challenge(r, scopes)
                raise TransientError(f"{method} {url.split('?')[0]}: 401 during a streamed upload")
            if not self.auth.challenge(r, scopes):
                return r
            r.close()
            auth = self.auth.header(scopes)
        return r

    @staticmethod
    def _errors(r: http_session.Response) -> list[dict]:
        """The distribution error list of an answer (`{"errors": [{"code": .., "message": ..}]}`), if any."""
        try:
            errs = r.json().get("errors") or []
        except (ValueError, AttributeError, OSError):   # OSError: the error body itself was cut short
            return []
        return [e for e in errs if isinstance(e, dict)] if isinstance(errs, list) else []

    @classmethod
    def _error(cls, r: http_session.Response, what: str) -> RegistryError:
        code = " ".join(f"{e.get('code')}: {e.get('message')}" for e in cls._errors(r))
        text = f"{what}: HTTP {r.status_code} {code}".rstrip()
        if r.status_code in (401, 403):
            return AuthError(text)
        if r.status_code == 429 or r.status_code >= 500:
            err = TransientError(text)
            err.retry_after = r.headers.get("Retry-After")  # type: ignore[attr-defined]
            return err
        return RegistryError(text)

    def _retry(self, fn, what: str):
        """Retry transient failures (network, 429, 5xx) `attempts` times, `delay` apart (Retry-After wins)."""
        last: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except TransientError as exc:
                last = exc
                if attempt == self.attempts:
                    break
                wait = self.delay
                ra = retry_after_seconds(getattr(exc, "retry_after", None))
                if ra is not None:
                    wait = max(wait, min(ra, 120.0))
                self.log(f"retry {attempt}/{self.attempts - 1} in {wait:g}s: {what}: {exc}")
                self.sleep(wait)
        raise TransientError(f"{what}: failed after {self.attempts} attempts: {last}") from last

    @staticmethod
    def _pull(repo: str) -> list[str]:
        return [f"repository:{repo}:pull"]

    @staticmethod
    def _push(repo: str) -> list[str]:
        return [f"repository:{repo}:pull,push"]

    def _location(self, r: http_session.Response) -> str:
        """Upload URL from Location: may be relative; keep our scheme when the host is ours."""
        loc = r.headers.get("Location")
        if not loc:
            raise RegistryError(f"{r.request.method} {r.url}: no Location header in {r.status_code} answer")
        u = urlsplit(urljoin(r.url, loc))
        if u.netloc == self.host and u.scheme != self.scheme:
            u = u._replace(scheme=self.scheme)
        return urlunsplit(u)

    @staticmethod
    def _with_query(url: str, **params: str) -> str:
        u = urlsplit(url)  # keep distribution's `_state` and friends, add ours
        return urlunsplit(u._replace(query=urlencode(parse_qsl(u.query, keep_blank_values=True)
                                                     + list(params.items()))))

    # ----- manifests

    def resolve(self, repo: str, ref: str) -> Descriptor | None:
        """Tag or digest -> descriptor; None only when the registry CONFIRMS absence (404).

        Network errors, timeouts, 429 and 5xx are retried `attempts` times `delay` apart and then raise
        TransientError; 401/403 raise AuthError at once. Neither is ever reported as "missing".
        """
        repo = normalize_repo(self.host, repo)

        def once():
            r = self._send("HEAD", self.url(f"{repo}/manifests/{ref}"), self._pull(repo),
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

        return self._retry(once, f"resolve {self.host}/{repo}:{ref}")

    def _get_manifest_once(self, repo: str, ref: str, absent_ok: bool = False) -> Manifest | None:
        r = self._send("GET", self.url(f"{repo}/manifests/{ref}"), self._pull(repo),
                       headers={"Accept": ACCEPT_MANIFEST})
        if r.status_code == 404 and absent_ok:
            r.close()
            return None
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
        return self._retry(lambda: self._get_manifest_once(repo, ref), f"get manifest {repo}:{ref}")

    def find_manifest(self, repo: str, ref: str) -> Manifest | None:
        """get_manifest, or None only when the registry confirms absence (404), as resolve() does: one
        request where a resolve() and a get_manifest() take two."""
        repo = normalize_repo(self.host, repo)
        return self._retry(lambda: self._get_manifest_once(repo, ref, absent_ok=True), f"get manifest {repo}:{ref}")

    def put_manifest(self, repo: str, ref: str, raw: bytes, media_type: str) -> str:
        """PUT by tag or by digest with the manifest's own media type; returns the digest."""
        repo = normalize_repo(self.host, repo)
        digest = sha256_digest(raw)
        if ref.startswith("sha256:") and ref != digest:
            raise DigestMismatch(f"refusing to push {digest} as {ref}")

        def once():
            r = self._send("PUT", self.url(f"{repo}/manifests/{ref}"), self._push(repo),
                           headers={"Content-Type": media_type}, data=raw)
            r.close()
            if r.status_code not in (200, 201):
                raise self._error(r, f"PUT manifest {repo}:{ref}")
            got = r.headers.get("Docker-Content-Digest")
            if got and got != digest:
                raise DigestMismatch(f"registry stored {got}, we sent {digest}")
            return digest

        return self._retry(once, f"put manifest {repo}:{ref}")

    # ----- blobs

    def list_tags(self, repo: str, page_size: int = 1000) -> list[str]:
        """Every tag of a repository, following `Link: <...>; rel="next"` pagination to the end."""
        repo = normalize_repo(self.host, repo)
        url: str | None = self.url(f"{repo}/tags/list?n={page_size}")
        tags: list[str] = []
        for _ in range(100_000):
            if url is None:
                return tags

            def once(page_url=url):
                r = self._send("GET", page_url, self._pull(repo))
                if r.status_code == 404:
                    return None, []
                if r.status_code != 200:
                    raise self._error(r, f"GET tags {repo}")
                link = r.links.get("next", {}).get("url")
                return (urljoin(page_url, link) if link else None), list(r.json().get("tags") or [])

            url, page = self._retry(once, f"list tags {self.host}/{repo}")
            tags += page
        raise RegistryError(f"list tags {repo}: pagination did not end")

    def delete_manifest(self, repo: str, digest: str) -> bool:
        """DELETE a manifest by digest (every tag pointing at it goes with it). False when already gone."""
        repo = normalize_repo(self.host, repo)

        def once():
            r = self._send("DELETE", self.url(f"{repo}/manifests/{digest}"), [f"repository:{repo}:delete,pull,push"])
            r.close()
            if r.status_code in (200, 202):
                return True
            if r.status_code == 404:
                return False
            raise self._error(r, f"DELETE manifest {repo}@{digest}")

        return self._retry(once, f"delete manifest {repo}@{digest[:19]}")

    def blob_exists(self, repo: str, digest: str) -> bool:
        repo = normalize_repo(self.host, repo)

        def once():
            r = self._send("HEAD", self.url(f"{repo}/blobs/{digest}"), self._pull(repo))
            r.close()
            if r.status_code == 200:
                return True
            if r.status_code == 404:
                return False
            raise self._error(r, f"HEAD blob {repo}@{digest}")

        return self._retry(once, f"blob exists {repo}@{digest[:19]}")

    def read_blob(self, repo: str, digest: str, max_size: int = 4 << 20) -> bytes:
        """Small blobs only (image config). Retried like every read; a connection broken mid-body is transient."""
        repo = normalize_repo(self.host, repo)

        def once():
            r = self._send("GET", self.url(f"{repo}/blobs/{digest}"), self._pull(repo), stream=True)
            try:
                if r.status_code != 200:
                    raise self._error(r, f"GET blob {repo}@{digest}")
                data = r.raw.read(max_size + 1, decode_content=False)
            except OSError as exc:     # http_session.RequestException is one
                raise TransientError(f"GET blob {repo}@{digest[:19]}: {type(exc).__name__}: {exc}") from exc
            finally:
                r.close()
            if len(data) > max_size or sha256_digest(data) != digest:
                raise DigestMismatch(f"{repo}@{digest}: too large or wrong content")
            return data

        return self._retry(once, f"read blob {repo}@{digest[:19]}")

    def open_blob(self, repo: str, digest: str) -> http_session.Response:
        """Streaming GET (follows redirects to storage; Authorization is dropped when the origin changes)."""
        r = self._send("GET", self.url(f"{normalize_repo(self.host, repo)}/blobs/{digest}"),
                       self._pull(normalize_repo(self.host, repo)), stream=True)
        if r.status_code != 200:
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
        r = self._send("POST", url, self._push(repo) + self._pull(from_repo),
                       headers={"Content-Length": "0"})
        r.close()
        if r.status_code == 201:
            return None
        if r.status_code == 202:
            return self._location(r)
        raise self._error(r, f"mount {digest[:19]} into {repo} from {from_repo}")

    def start_upload(self, repo: str) -> str:
        r = self._send("POST", self.url(f"{repo}/blobs/uploads/"), self._push(repo),
                       headers={"Content-Length": "0"})
        r.close()
        if r.status_code != 202:
            raise self._error(r, f"POST upload {repo}")
        return self._location(r)

    def upload_stream(self, repo: str, desc: Descriptor, chunks: Iterable[bytes],
                      location: str | None = None) -> None:
        """POST (unless a mount already opened a session), one streamed PATCH, then PUT ?digest=.

        The PATCH has Content-Length (size known from the descriptor) and no Content-Range: the form docker,
        crane and containerd use, accepted by Docker Hub, GHCR and ECR (multi-PATCH "chunked" uploads
        are where registries differ: ECR drops later chunks, GHCR caps chunk size).
        """
        repo = normalize_repo(self.host, repo)
        location = location or self.start_upload(repo)
        try:
            self._patch_and_commit(repo, desc, chunks, location)
        except BaseException:
            self.cancel_upload(repo, location)  # registries purge abandoned sessions late or never
            raise

    def _patch_and_commit(self, repo: str, desc: Descriptor, chunks: Iterable[bytes], location: str) -> None:
        body = _SizedStream(chunks, desc.size)
        # The body cannot be replayed: make sure the token outlives the request's start.
        r = self._send("PATCH", location, self._push(repo), data=body,
                       headers={"Content-Type": "application/octet-stream"}, replayable=False, fresh_for=60)
        r.close()
        if r.status_code not in (202, 204, 201):  # spec says 202; ECR has answered 201
            raise self._error(r, f"PATCH blob {desc.digest[:19]} to {repo}")
        if body.overflow:
            raise DigestMismatch(f"{desc.digest}: the source sent more than the {desc.size} bytes the manifest says")
        if body.sent != desc.size:   # source ended early without an error: retry the whole blob
            raise TransientError(f"{desc.digest}: streamed {body.sent} of {desc.size} bytes")
        # No local hash: the target hashes what it received and refuses a PUT whose ?digest= differs
        # (DIGEST_INVALID, a MUST of the distribution spec), so a second sha256 here only cost CPU that the
        # registries on the same runner were short of (0.4 CPU s per 630 MB on the 2-core benchmark machine).
        # The PATCH answer carries a NEW Location (distribution's _state encodes the offset): use it.
        put_url = self._with_query(self._location(r), digest=desc.digest)
        r = self._send("PUT", put_url, self._push(repo), headers={"Content-Length": "0",
                                                                 "Content-Type": "application/octet-stream"})
        r.close()
        if r.status_code not in (201, 204):
            raise self._blob_commit_error(r, desc, repo)

    def _blob_commit_error(self, r: http_session.Response, desc: Descriptor, repo: str) -> RegistryError:
        """The PUT ?digest= failed: DIGEST_INVALID means the bytes we streamed do not hash to the digest."""
        err = self._error(r, f"PUT blob {desc.digest[:19]} to {repo}")
        if r.status_code == 400 and any(e.get("code") == "DIGEST_INVALID" for e in self._errors(r)):
            return DigestMismatch(f"{desc.digest}: {repo} refused the streamed bytes ({err})")
        return err

    def cancel_upload(self, repo: str, location: str) -> None:
        """Best effort DELETE of an upload session."""
        try:
            self._send("DELETE", location, self._push(repo)).close()
        except RegistryError:
            pass


class _SizedStream:
    """Iterable body with a length: it goes out with Content-Length (not chunked), streamed.

    Never yields more than `size` bytes (extra bytes would be read as the next request on a kept-alive
    connection); a longer source sets `overflow` instead.
    """

    def __init__(self, chunks: Iterable[bytes], size: int):
        self._chunks, self._size, self.sent, self.overflow = chunks, size, 0, False

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            room = self._size - self.sent
            if len(chunk) > room:
                self.overflow, chunk = True, chunk[:room]
            if chunk:
                self.sent += len(chunk)
                yield chunk
            if self.overflow:
                return


# --------------------------------------------------------------------------- copy

PROGRESS_EVERY = 5.0   # seconds between progress lines while one blob streams


def _with_progress(chunks: Iterable[bytes], desc: Descriptor, log: Callable[[str], None],
                   every: float = PROGRESS_EVERY) -> Iterator[bytes]:
    """Pass chunks through, saying how far a long blob copy is (at most one line per `every` seconds)."""
    sent, start = 0, time.monotonic()
    last = start
    for chunk in chunks:
        sent += len(chunk)
        yield chunk
        now = time.monotonic()
        if now - last >= every:
            rate = sent / max(now - start, 1e-9) / 1e6
            log(f"  ...    {desc.digest[:19]} {sent / 1e6:,.1f} of {desc.size / 1e6:,.1f} MB ({rate:,.1f} MB/s)")
            last = now


def _length_mismatch(resp: http_session.Response, desc: Descriptor) -> DigestMismatch | None:
    """A source whose Content-Length is not the descriptor's size cannot serve these bytes: fail before uploading."""
    length = (resp.headers.get("Content-Length") or "").strip()
    if length.isdigit() and int(length) != desc.size:
        return DigestMismatch(f"{desc.digest}: the source serves {int(length)} bytes, the manifest says {desc.size}")
    return None


def copy_blob(src: Registry, src_repo: str, dst: Registry, dst_repo: str, desc: Descriptor,
              stats: CopyStats, log=None) -> None:
    """Copy one blob unless the target has it; mount when both repos are on one registry host."""
    log = log or dst.log
    if dst.blob_exists(dst_repo, desc.digest):
        stats.skipped_bytes += desc.size
        stats.skipped_blobs += 1
        log(f"  skip   {desc.digest[:19]} {desc.size:>12,} B (present)")
        return
    location = None
    if src.host == dst.host and src_repo != dst_repo:
        location = dst._retry(lambda: dst.mount_blob(dst_repo, desc.digest, src_repo),
                              f"mount {desc.digest[:19]}")
        if location is None:
            stats.mounted_bytes += desc.size
            stats.mounted_blobs += 1
            log(f"  mount  {desc.digest[:19]} {desc.size:>12,} B (from {src_repo})")
            return

    def once():
        nonlocal location
        resp = src.open_blob(src_repo, desc.digest)
        try:
            mismatch = _length_mismatch(resp, desc)
            if mismatch:
                if location:
                    dst.cancel_upload(dst_repo, location)   # the session a refused mount opened
                raise mismatch
            # raw.stream: the bytes as stored, never gunzipped (only identity encoding is accepted).
            chunks = _with_progress(resp.raw.stream(CHUNK, decode_content=False), desc, log)
            dst.upload_stream(dst_repo, desc, chunks, location)
        except RegistryError:
            location = None  # a failed session is not reused: the retry starts a fresh upload
            raise
        finally:
            resp.close()

    dst._retry(once, f"copy blob {desc.digest[:19]}")
    stats.copied_bytes += desc.size
    stats.copied_blobs += 1
    log(f"  copy   {desc.digest[:19]} {desc.size:>12,} B")


def serialized(log: Callable[[str], None]) -> Callable[[str], None]:
    """The same log, one line at a time from several threads (print() writes a line and its newline
    separately, so two copies logging at once shared a line)."""
    lock = threading.Lock()

    def locked(message: str) -> None:
        with lock:
            log(message)

    return locked


def _copy_blobs(src: Registry, src_repo: str, dst: Registry, dst_repo: str, blobs: list[Descriptor],
                stats: CopyStats, log, parallel: int) -> None:
    """Copy blobs, up to `parallel` at once (each worker with its own HTTP sessions): the target hashes
    and writes every byte on its own goroutine per upload, so several uploads keep its cores busy."""
    if parallel <= 1 or len(blobs) <= 1:
        for desc in blobs:
            copy_blob(src, src_repo, dst, dst_repo, desc, stats, log)
        return
    from concurrent.futures import ThreadPoolExecutor

    log = serialized(log or dst.log)
    local = threading.local()

    def one(desc: Descriptor) -> CopyStats:
        if not hasattr(local, "clients"):
            local.clients = (src.clone(), dst.clone())
        part = CopyStats()
        copy_blob(local.clients[0], src_repo, local.clients[1], dst_repo, desc, part, log)
        return part

    # Largest first, so the long transfer starts at once and the small ones fill in around it.
    ordered = sorted(blobs, key=lambda d: -d.size)
    with ThreadPoolExecutor(max_workers=min(parallel, len(ordered)), thread_name_prefix="ghbuild-copy") as pool:
        for part in pool.map(one, ordered):
            stats.add(part)


def copy_image(src: Registry, src_repo: str, ref: str, dst: Registry, dst_repo: str,
               tags: Iterable[str] = (), stats: CopyStats | None = None, log=None,
               parallel: int = 4, *, manifest: Manifest | None = None,
               present: bool | None = None) -> tuple[Manifest, CopyStats]:
    """Copy an image or a whole index (children first, by digest), then tag it. Manifest bytes are kept.
    `manifest` (the source's, already read) and `present` (whether the target holds it, already asked) save
    those requests when the caller has the answers."""
    stats = stats or CopyStats()
    log = log or dst.log
    m = manifest if manifest is not None else src.get_manifest(src_repo, ref)
    if present is None:
        present = dst.resolve(dst_repo, m.digest) is not None   # a stored manifest implies its blobs are there
    if m.is_index:
        for child in m.children():
            copy_image(src, src_repo, child.digest, dst, dst_repo, (), stats, log, parallel)
    elif present:
        for desc in m.blobs():
            stats.skipped_bytes += desc.size
            stats.skipped_blobs += 1
        log(f"  skip   {m.digest[:19]} manifest present: {len(m.blobs())} blobs not checked one by one")
    else:
        _copy_blobs(src, src_repo, dst, dst_repo, m.blobs(), stats, log, parallel)
    if present:
        stats.manifests_present += 1
    else:
        dst.put_manifest(dst_repo, m.digest, m.raw, m.media_type)  # by digest: no tag moves yet
        stats.manifests += 1
    for tag in tags:
        have = dst.resolve(dst_repo, tag)
        if have is None or have.digest != m.digest:
            dst.put_manifest(dst_repo, tag, m.raw, m.media_type)
            stats.tags_moved += 1
    return m, stats


def make_index(children: list[Descriptor]) -> tuple[bytes, str]:
    """A manifest list for Docker schema2 children, an OCI index otherwise (never mixed)."""
    if not children or any(not c.platform for c in children):
        raise ValueError("every index entry needs a platform")
    docker = all(c.media_type == MT_DOCKER_MANIFEST for c in children)
    mt = MT_DOCKER_LIST if docker else MT_OCI_INDEX
    doc = {"schemaVersion": 2, "mediaType": mt, "manifests": [c.as_json() for c in children]}
    return json.dumps(doc, indent=3).encode(), mt


RegistryFactory = Callable[[str], Registry]


def client_factory(env: Mapping[str, str], log: Callable[[str], None]) -> RegistryFactory:
    """host -> one Registry client per host, with the credentials CI put in place (ghbuild.registry.credentials)."""
    from ghbuild.registry import credentials

    cache: dict[str, Registry] = {}

    def make(host: str) -> Registry:
        if host not in cache:
            cache[host] = Registry(host, credentials.for_host(host, env), log=log)
        return cache[host]

    return make
