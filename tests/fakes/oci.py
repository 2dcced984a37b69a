"""The tests' and benchmarks' own client of the OCI distribution HTTP API: the oracle that checks what
ghbuild wrote to a registry, and the tool that puts test images there.

Independent of ghbuild on purpose (standard library only, no auth, plain HTTP on loopback): a registry
result is checked with code that shares nothing with ghbuild.registry.client, the code under test. One keep-alive
connection per thread. Used by the fakes (tests/fakes/dockerhub.py and github.py read their backing
registry through it), the registry and engine tests, and bench/publish_copy.py.

Two styles of call: the raw ``request`` / ``manifest`` (status, lower-cased headers, body), for tests that
assert on status codes and headers, and typed helpers (``get_manifest``, ``tags``, ``push_image``, ...)
that raise ``RegistryError`` on an unexpected status and return None for a 404.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import re
import tarfile
import threading
import urllib.parse
from datetime import datetime
from typing import IO, Any, NamedTuple

MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
INDEX_TYPES = frozenset({MT_OCI_INDEX, MT_DOCKER_LIST})
IMAGE_TYPES = frozenset({MT_OCI_MANIFEST, MT_DOCKER_MANIFEST})
MANIFEST_TYPES = (MT_OCI_INDEX, MT_OCI_MANIFEST, MT_DOCKER_LIST, MT_DOCKER_MANIFEST)
# Accept header for GET/HEAD /v2/<name>/manifests/<ref>: every manifest and index type.
ACCEPT_MANIFESTS = ", ".join(MANIFEST_TYPES)

Body = bytes | IO[bytes] | None


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


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


def _media_type(headers: dict[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip()


class RegistryClient:
    """Just enough of the distribution HTTP API (no auth) to read, push, mount and delete.

    ``RegistryClient("http://127.0.0.1:5000")`` or ``RegistryClient("127.0.0.1:5000")``. Also pushes small
    but valid test images (``push_image``, ``push_index``, ``tag``) with plain blob uploads and manifest
    PUTs (no engine needed), and streams large blobs from files (``upload_blob``).
    """

    def __init__(self, url: str, timeout: float = 30.0):
        parsed = urllib.parse.urlsplit(url.rstrip("/") if "://" in url else "http://" + url.rstrip("/"))
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"registry URL must be http://host:port, got {url!r}")
        self.url = f"http://{parsed.netloc}"
        self.host = parsed.netloc                      # "127.0.0.1:5000", as in image references
        self._host = parsed.hostname
        self._port = parsed.port or 80
        self._timeout = timeout
        self._local = threading.local()

    # -- transport ---------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Body = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request; ``path`` may be an absolute URL (a Location header). A file ``body`` is streamed
        (give its Content-Length in ``headers``). Returns (status, lower-cased headers, body)."""
        if path.startswith("http://") or path.startswith("https://"):
            split = urllib.parse.urlsplit(path)
            path = split.path + (f"?{split.query}" if split.query else "")
        start = body.tell() if body is not None and not isinstance(body, bytes) else None
        for attempt in range(2):  # one retry for a keep-alive connection the registry closed
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout,
                                                   blocksize=1 << 20)
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
                if start is not None:
                    body.seek(start)  # type: ignore[union-attr]
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

    def _found(self, method: str, path: str, ok: int, **kw: Any) -> tuple[dict[str, str], bytes] | None:
        """The answer when the status is ``ok``, None for 404, RegistryError otherwise."""
        status, headers, data = self.request(method, path, **kw)
        if status == 404:
            return None
        if status != ok:
            raise RegistryError(method, path, status, data)
        return headers, data

    def manifest(self, name: str, ref: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """Raw GET (or HEAD) of a manifest by tag or digest, accepting every manifest and index type."""
        return self.request(method, f"/v2/{name}/manifests/{ref}", headers={"Accept": ACCEPT_MANIFESTS})

    # -- reading -----------------------------------------------------------------------------

    def tags(self, name: str) -> list[str] | None:
        """All tags of a repository (following Link pagination), or None when the registry has no such repository."""
        path: str | None = f"/v2/{name}/tags/list"
        tags: list[str] = []
        for _ in range(10_000):
            if path is None:
                break
            got = self._found("GET", path, 200)
            if got is None:
                return None
            headers, data = got
            tags.extend(json.loads(data).get("tags") or [])  # distribution says "tags": null when empty
            match = re.search(r"<([^>]+)>;\s*rel=\"?next\"?", headers.get("link", ""))
            path = match.group(1) if match else None
        return tags

    def descriptor(self, name: str, ref: str) -> dict[str, Any] | None:
        """The OCI descriptor (mediaType, digest, size) of a tag or digest, from a HEAD; None if it is not there."""
        status, headers, data = self.manifest(name, ref, method="HEAD")
        if status == 404:
            return None
        if status != 200:
            raise RegistryError("HEAD", f"/v2/{name}/manifests/{ref}", status, data)
        digest, size = headers.get("docker-content-digest"), headers.get("content-length")
        if not digest or size is None:  # cannot happen with distribution, but a HEAD without them needs a GET
            manifest = self.get_manifest(name, ref)
            if manifest is None:
                return None
            return {"mediaType": manifest.media_type, "digest": manifest.digest, "size": len(manifest.body)}
        return {"mediaType": _media_type(headers), "digest": digest, "size": int(size)}

    def head_manifest(self, name: str, ref: str) -> tuple[str, str] | None:
        """(digest, media type) of a tag or digest, or None if it is not there."""
        desc = self.descriptor(name, ref)
        return None if desc is None else (desc["digest"], desc["mediaType"])

    def get_manifest(self, name: str, ref: str) -> Manifest | None:
        got = self._found("GET", f"/v2/{name}/manifests/{ref}", 200, headers={"Accept": ACCEPT_MANIFESTS})
        if got is None:
            return None
        headers, data = got
        media_type = _media_type(headers)
        try:
            media_type = json.loads(data).get("mediaType") or media_type
        except ValueError:
            pass
        return Manifest(headers.get("docker-content-digest") or sha256_digest(data), media_type, data)

    def get_blob(self, name: str, digest: str) -> bytes | None:
        got = self._found("GET", f"/v2/{name}/blobs/{digest}", 200)
        return None if got is None else got[1]

    def blob_json(self, name: str, digest: str) -> Any:
        """A JSON blob (an image config), checked against its digest; AssertionError when missing or altered."""
        body = self.get_blob(name, digest)
        assert body is not None, f"GET blob {name}@{digest}: not found"
        assert sha256_digest(body) == digest, "blob content does not match its digest"
        return json.loads(body)

    def blob_exists(self, name: str, digest: str) -> bool:
        return self._found("HEAD", f"/v2/{name}/blobs/{digest}", 200) is not None

    # -- writing -----------------------------------------------------------------------------

    def put_manifest(self, name: str, ref: str, body: bytes, media_type: str) -> str:
        headers, _ = self._check("PUT", f"/v2/{name}/manifests/{ref}", (201,), body=body,
                                 headers={"Content-Type": media_type})
        return headers.get("docker-content-digest") or sha256_digest(body)

    def delete_manifest(self, name: str, digest: str) -> bool:
        """Delete a manifest by digest (distribution cannot delete by tag); False if it was not there.

        Distribution also removes every tag that points at the digest."""
        return self._found("DELETE", f"/v2/{name}/manifests/{digest}", 202) is not None

    def delete_blob(self, name: str, digest: str) -> bool:
        """Unlink a blob from a repository; False if it was not there."""
        return self._found("DELETE", f"/v2/{name}/blobs/{digest}", 202) is not None

    def delete_repository_manifests(self, name: str) -> None:
        """Best effort, for teardowns: delete every tagged manifest of a repository (and so its tags)."""
        digests = set()
        for tag in self.tags(name) or []:
            status, headers, _ = self.manifest(name, tag, method="HEAD")
            if status == 200 and headers.get("docker-content-digest"):
                digests.add(headers["docker-content-digest"])
        for digest in digests:
            self.request("DELETE", f"/v2/{name}/manifests/{digest}")

    def upload_url(self, name: str) -> str:
        """Open a blob upload session; returns its absolute URL (PUT ``?digest=`` to it finishes it)."""
        path = f"/v2/{name}/blobs/uploads/"
        headers, _ = self._check("POST", path, (202,), body=b"", headers={"Content-Length": "0"})
        return urllib.parse.urljoin(self.url + path, headers["location"])

    def upload_blob(self, name: str, digest: str, body: bytes | IO[bytes], size: int) -> str:
        """Upload a blob (bytes, or a file streamed from its current position) unless the repository has it."""
        if self.blob_exists(name, digest):
            return digest
        location = self.upload_url(name)
        location += ("&" if "?" in location else "?") + "digest=" + urllib.parse.quote(digest)
        self._check("PUT", location, (201,), body=body,
                    headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
        return digest

    def push_blob(self, name: str, data: bytes) -> str:
        return self.upload_blob(name, sha256_digest(data), data, len(data))

    def mount_blob(self, name: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount; True when mounted (201). A 202 (not mounted) closes the session it opened."""
        status, headers, _ = self.request(
            "POST",
            f"/v2/{name}/blobs/uploads/?mount={urllib.parse.quote(digest)}&from={urllib.parse.quote(from_repo)}",
            body=b"", headers={"Content-Length": "0"})
        if status == 202 and headers.get("location"):
            self.request("DELETE", headers["location"])
        return status == 201

    def push_image(self, name: str, tag: str | None = None, *, architecture: str = "amd64", os: str = "linux",
                   variant: str | None = None, payload: bytes = b"",
                   media_type: str = MT_OCI_MANIFEST) -> dict[str, Any]:
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


def push_dated(reg: RegistryClient, repo: str, arch: str, created: datetime, payload: bytes) -> dict:
    """An image whose config has a real `created` time (what the plain-registry prune ranks commits by)."""
    layer = gzip.compress(payload, mtime=0)
    config = json.dumps({"architecture": arch, "os": "linux", "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "rootfs": {"type": "layers", "diff_ids": [sha256_digest(payload)]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                           "config": {"mediaType": MT_OCI_CONFIG,
                                      "digest": reg.push_blob(repo, config), "size": len(config)},
                           "layers": [{"mediaType": MT_OCI_LAYER,
                                       "digest": reg.push_blob(repo, layer), "size": len(layer)}]}).encode()
    digest = reg.put_manifest(repo, sha256_digest(manifest), manifest, MT_OCI_MANIFEST)
    return {"mediaType": MT_OCI_MANIFEST, "digest": digest, "size": len(manifest),
            "platform": {"architecture": arch, "os": "linux"}}
