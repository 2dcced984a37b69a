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

The module also holds the pieces the GitHub fake shares: ``FakeServer`` (the threaded loopback HTTP server
with the fault and logging knobs) and ``RegistryClient`` (a small distribution API client that can also
push tiny test images and indexes over plain HTTP).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import re
import secrets
import socket
import tarfile
import threading
import time
import traceback
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, NamedTuple

LOOPBACK = "127.0.0.1"

MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
INDEX_TYPES = frozenset({MT_OCI_INDEX, MT_DOCKER_LIST})
ACCEPT_MANIFESTS = ", ".join((MT_OCI_INDEX, MT_OCI_MANIFEST, MT_DOCKER_LIST, MT_DOCKER_MANIFEST))


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def utc(when: datetime) -> datetime:
    """An aware UTC datetime (naive ones are taken as UTC)."""
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def hub_time(when: datetime) -> str:
    """Docker Hub's timestamp format: microseconds and a Z, e.g. 2024-04-29T18:36:09.683545Z."""
    return utc(when).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ----------------------------------------------------------------------------------------------
# The backing registry
# ----------------------------------------------------------------------------------------------


class RegistryError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: bytes):
        super().__init__(f"registry {method} {path} -> {status}: {body[:300]!r}")
        self.status = status


class Manifest(NamedTuple):
    digest: str
    media_type: str
    body: bytes

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class RegistryClient:
    """Just enough of the distribution HTTP API (no auth) to read, push and delete manifests.

    One keep-alive connection per thread. Also pushes small but valid test images (``push_image``,
    ``push_index``, ``tag``) with plain blob uploads and manifest PUTs: no engine needed.
    """

    def __init__(self, url: str, timeout: float = 10.0):
        parsed = urllib.parse.urlsplit(url.rstrip("/"))
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"registry URL must be http://host:port, got {url!r}")
        self.url = f"http://{parsed.netloc}"
        self._host = parsed.hostname
        self._port = parsed.port or 80
        self._timeout = timeout
        self._local = threading.local()

    # -- transport ---------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("http://") or path.startswith("https://"):
            split = urllib.parse.urlsplit(path)
            path = split.path + (f"?{split.query}" if split.query else "")
        for attempt in range(2):  # one retry for a keep-alive connection the registry closed
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
                self._local.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
                continue
            if resp.will_close:
                conn.close()
                self._local.conn = None
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _check(self, method: str, path: str, expected: tuple[int, ...], **kw: Any) -> tuple[dict[str, str], bytes]:
        status, headers, data = self.request(method, path, **kw)
        if status not in expected:
            raise RegistryError(method, path, status, data)
        return headers, data

    # -- reading -----------------------------------------------------------------------------

    def tags(self, name: str) -> list[str] | None:
        """All tags of a repository (following Link pagination), or None when the registry has no such repository."""
        path: str | None = f"/v2/{name}/tags/list"
        tags: list[str] = []
        for _ in range(10_000):
            if path is None:
                break
            status, headers, data = self.request("GET", path)
            if status == 404:
                return None
            if status != 200:
                raise RegistryError("GET", path, status, data)
            tags.extend(json.loads(data).get("tags") or [])  # distribution says "tags": null when empty
            match = re.search(r"<([^>]+)>;\s*rel=\"?next\"?", headers.get("link", ""))
            path = match.group(1) if match else None
        return tags

    def head_manifest(self, name: str, ref: str) -> tuple[str, str] | None:
        """(digest, media type) of a tag or digest, or None if it is not there."""
        status, headers, data = self.request("HEAD", f"/v2/{name}/manifests/{ref}", headers={"Accept": ACCEPT_MANIFESTS})
        if status == 404:
            return None
        if status != 200:
            raise RegistryError("HEAD", f"/v2/{name}/manifests/{ref}", status, data)
        digest = headers.get("docker-content-digest")
        media_type = headers.get("content-type", "").split(";")[0].strip()
        if not digest:  # cannot happen with distribution, but a HEAD without it needs a GET
            manifest = self.get_manifest(name, ref)
            return None if manifest is None else (manifest.digest, manifest.media_type)
        return digest, media_type

    def get_manifest(self, name: str, ref: str) -> Manifest | None:
        status, headers, data = self.request("GET", f"/v2/{name}/manifests/{ref}", headers={"Accept": ACCEPT_MANIFESTS})
        if status == 404:
            return None
        if status != 200:
            raise RegistryError("GET", f"/v2/{name}/manifests/{ref}", status, data)
        media_type = headers.get("content-type", "").split(";")[0].strip()
        try:
            media_type = json.loads(data).get("mediaType") or media_type
        except ValueError:
            pass
        return Manifest(headers.get("docker-content-digest") or sha256_digest(data), media_type, data)

    def get_blob(self, name: str, digest: str) -> bytes | None:
        status, _, data = self.request("GET", f"/v2/{name}/blobs/{digest}")
        if status == 404:
            return None
        if status != 200:
            raise RegistryError("GET", f"/v2/{name}/blobs/{digest}", status, data)
        return data

    # -- writing -----------------------------------------------------------------------------

    def put_manifest(self, name: str, ref: str, body: bytes, media_type: str) -> str:
        headers, _ = self._check("PUT", f"/v2/{name}/manifests/{ref}", (201,), body=body,
                                 headers={"Content-Type": media_type})
        return headers.get("docker-content-digest") or sha256_digest(body)

    def delete_manifest(self, name: str, digest: str) -> bool:
        """Delete a manifest by digest (distribution cannot delete by tag); False if it was not there.

        Distribution also removes every tag that points at the digest."""
        status, _, data = self.request("DELETE", f"/v2/{name}/manifests/{digest}")
        if status == 404:
            return False
        if status != 202:
            raise RegistryError("DELETE", f"/v2/{name}/manifests/{digest}", status, data)
        return True

    def push_blob(self, name: str, data: bytes) -> str:
        digest = sha256_digest(data)
        status, _, _ = self.request("HEAD", f"/v2/{name}/blobs/{digest}")
        if status == 200:
            return digest
        headers, _ = self._check("POST", f"/v2/{name}/blobs/uploads/", (202,), body=b"")
        location = headers["location"]
        location += ("&" if "?" in location else "?") + "digest=" + urllib.parse.quote(digest)
        self._check("PUT", location, (201,), body=data, headers={"Content-Type": "application/octet-stream"})
        return digest

    def push_image(self, name: str, tag: str | None = None, *, architecture: str = "amd64", os: str = "linux",
                   variant: str | None = None, payload: bytes = b"", media_type: str = MT_OCI_MANIFEST) -> dict[str, Any]:
        """Push a one-layer image (a real gzipped tar) and return its descriptor, with ``platform``.

        ``payload`` goes into the layer's one file, so different payloads give different digests."""
        tar_buf = io.BytesIO()
        with tarfile.open(fileobj=tar_buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            content = payload or f"{os}/{architecture}{'/' + variant if variant else ''}\n".encode()
            info = tarfile.TarInfo("payload.txt")
            info.size, info.mtime, info.mode = len(content), 0, 0o644
            tar.addfile(info, io.BytesIO(content))
        raw_layer = tar_buf.getvalue()
        layer = gzip.compress(raw_layer, mtime=0)
        oci = media_type == MT_OCI_MANIFEST
        config: dict[str, Any] = {
            "architecture": architecture,
            "os": os,
            "created": "1970-01-01T00:00:00Z",
            "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(raw_layer)]},
        }
        if variant:
            config["variant"] = variant
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": MT_OCI_CONFIG if oci else MT_DOCKER_CONFIG,
                       "digest": self.push_blob(name, config_bytes), "size": len(config_bytes)},
            "layers": [{"mediaType": MT_OCI_LAYER if oci else MT_DOCKER_LAYER,
                        "digest": self.push_blob(name, layer), "size": len(layer)}],
        }
        body = json.dumps(manifest, indent=2).encode()
        digest = self.put_manifest(name, tag or sha256_digest(body), body, media_type)
        platform = {"architecture": architecture, "os": os}
        if variant:
            platform["variant"] = variant
        return {"mediaType": media_type, "digest": digest, "size": len(body), "platform": platform}

    def push_index(self, name: str, children: list[dict[str, Any]], tag: str | None = None, *,
                   media_type: str = MT_OCI_INDEX) -> dict[str, Any]:
        """Push a multi-arch index of already pushed manifests (descriptors from ``push_image``)."""
        body = json.dumps({"schemaVersion": 2, "mediaType": media_type, "manifests": children}, indent=2).encode()
        digest = self.put_manifest(name, tag or sha256_digest(body), body, media_type)
        return {"mediaType": media_type, "digest": digest, "size": len(body)}

    def tag(self, name: str, ref: str, new_tag: str) -> str:
        """Point ``new_tag`` at the manifest ``ref`` (a tag or digest) refers to; returns the digest."""
        manifest = self.get_manifest(name, ref)
        if manifest is None:
            raise RegistryError("GET", f"/v2/{name}/manifests/{ref}", 404, b"")
        return self.put_manifest(name, new_tag, manifest.body, manifest.media_type)


# ----------------------------------------------------------------------------------------------
# The HTTP server shared by the fakes
# ----------------------------------------------------------------------------------------------


class RequestRecord(NamedTuple):
    """One served request: ``path`` is the request target as sent (query string included), ``time`` is
    ``time.monotonic()`` when the request arrived (so gaps between records measure a client's pacing)."""
    method: str
    path: str
    status: int
    time: float


@dataclass
class Request:
    method: str
    target: str                      # as sent, with the query string
    path: str                        # without the query string, still percent-encoded
    query: dict[str, list[str]]
    headers: Any                     # http.client.HTTPMessage (case-insensitive .get)
    body: bytes

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class Response:
    status: int
    body: Any = None                 # dict / list (sent as JSON), bytes, or None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    remaining: int
    body: Any
    method: str | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is dropped after this (bounds the handler threads)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _serve(self) -> None:
        self.server.fake._serve(self)  # type: ignore[attr-defined]

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, fake: FakeServer):
        self.fake = fake
        self._track = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._conn_threads: set[threading.Thread] = set()
        super().__init__((LOOPBACK, 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._run, args=(request, client_address), daemon=True,
                                  name=f"{type(self.fake).__name__}-conn")
        with self._track:
            self._sockets.add(request)
            self._conn_threads.add(thread)
        thread.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a client going away mid-request is not the fake's error
            pass
        finally:
            self.shutdown_request(request)
            with self._track:
                self._sockets.discard(request)
                self._conn_threads.discard(threading.current_thread())

    def close_connections(self) -> list[threading.Thread]:
        with self._track:
            sockets, threads = list(self._sockets), list(self._conn_threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return threads


class FakeServer:
    """A threaded HTTP server on 127.0.0.1 (free port) with routing, fault injection and a request log.

    Subclasses add routes with ``self.route(method, regex, handler)``; the regex is matched against the
    percent-encoded path and its groups are passed percent-decoded to ``handler(request, *groups)``,
    which returns a ``Response``.
    """

    def __init__(self) -> None:
        self.url: str = ""
        self.errors: list[str] = []          # tracebacks of exceptions inside handlers (served as 500)
        self._lock = threading.RLock()
        self._log: list[RequestRecord] = []
        self._faults: list[_Fault] = []
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Response]]] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeServer:
        if self._server is not None:
            return self
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"{type(self).__name__}-serve")
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        threads = server.close_connections()
        server.server_close()
        for thread in threads:
            thread.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- knobs -------------------------------------------------------------------------------

    def fail_next(self, path_regex: str, status: int, headers: dict[str, str] | None = None, count: int = 1,
                  body: Any = None, method: str | None = None) -> None:
        """Answer the next ``count`` requests whose target (path and query) matches ``path_regex``
        (``re.search``; and ``method``, if given) with ``status``, ``headers`` and ``body`` (default: the
        fake's usual error JSON), before any authentication or routing, as an edge proxy would."""
        with self._lock:
            self._faults.append(_Fault(re.compile(path_regex), status, dict(headers or {}), count, body,
                                       method.upper() if method else None))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log: (method, path-with-query, status, monotonic arrival time)."""
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    # -- plumbing ----------------------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Callable[..., Response]) -> None:
        self._routes.append((method.upper(), re.compile(pattern), handler))

    def error_body(self, status: int, message: str) -> Any:
        """The JSON body this API sends with an error; subclasses use their API's shape."""
        return {"message": message}

    def default_headers(self, request: Request, response: Response) -> dict[str, str]:
        return {}

    def _take_fault(self, request: Request) -> Response | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and (fault.method is None or fault.method == request.method) \
                        and fault.pattern.search(request.target):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    body = fault.body if fault.body is not None else self.error_body(
                        fault.status, http.client.responses.get(fault.status, "Error"))
                    return Response(fault.status, body, dict(fault.headers))
        return None

    def _dispatch(self, request: Request) -> Response:
        allowed = False
        for method, pattern, handler in self._routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method != request.method and not (request.method == "HEAD" and method == "GET"):
                allowed = True
                continue
            groups = [urllib.parse.unquote(g) if g is not None else None for g in match.groups()]
            return handler(request, *groups)
        if allowed:
            return Response(405, self.error_body(405, "Method Not Allowed"))
        return Response(404, self.error_body(404, "Not Found"))

    def _read_body(self, handler: BaseHTTPRequestHandler) -> bytes:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            for _ in range(1_000_000):
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    break
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
            return b"".join(chunks)
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length > 0 else b""

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        body = self._read_body(handler)
        split = urllib.parse.urlsplit(handler.path)
        request = Request(handler.command, handler.path, split.path or "/",
                          urllib.parse.parse_qs(split.query, keep_blank_values=True), handler.headers, body)
        response = self._take_fault(request)
        if response is None:
            try:
                response = self._dispatch(request)
            except Exception:  # noqa: BLE001 - reported to the test through .errors
                self.errors.append(f"{request.method} {request.target}\n{traceback.format_exc()}")
                response = Response(500, self.error_body(500, "Internal Server Error"))
        headers = self.default_headers(request, response)
        headers.update(response.headers)
        if response.body is None:
            payload = b""
        elif isinstance(response.body, bytes):
            payload = response.body
        else:
            payload = json.dumps(response.body).encode()
            headers.setdefault("Content-Type", "application/json")
        with self._lock:
            self._log.append(RequestRecord(request.method, request.target, response.status, arrived))
        handler.send_response(response.status)
        for key, value in headers.items():
            handler.send_header(key, value)
        if response.status not in (204, 304):
            handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if request.method != "HEAD" and response.status not in (204, 304):
            handler.wfile.write(payload)
        handler.wfile.flush()


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
                entry = self._pushed[(namespace, repository, tag)] = [digest, datetime.now(timezone.utc)]
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
