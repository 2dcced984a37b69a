"""A blob store speaking distribution 3's upload protocol, for the resume path of ghbuild's uploads: the local
registry (distribution 2.8.2) refuses, and drops, a session whose stored size is not the client's last offset,
so against it a cut upload can only start again; distribution 3 (registry:3, what Docker Hub's and many
self-hosted registries' code moved to) answers what it holds. Behaviour follows registry/handlers/blobupload.go
of distribution v3.1:

- ``POST /v2/<name>/blobs/uploads/`` -> 202, ``Location: /v2/<name>/blobs/uploads/<uuid>?_state=<token>``,
  ``Range: 0-0``, ``Docker-Upload-UUID``. The token carries the offset the client is at.
- ``GET|HEAD`` on a session -> 204 with ``Range: 0-<last byte held>`` (``0-0`` when empty) and a fresh
  Location; the token is NOT checked (v3 serves the status to a client that lost track).
- ``PATCH`` on a session: the token's offset must be the stored size, else 416 RANGE_INVALID; with
  ``Content-Range: <start>-<end>`` and ``Content-Length`` the start must be the stored size (416) and the
  length match (416 SIZE_INVALID). The body is appended as it arrives: a client cut mid-body leaves what
  arrived, as distribution's file writer does. -> 202 with Range and a new Location.
- ``PUT ...&digest=<d>``: the token checked like PATCH; the stored bytes must hash to ``d`` (else 400
  DIGEST_INVALID, the session dropped) -> 201, ``Docker-Content-Digest``.
- ``DELETE`` on a session -> 204 (404 BLOB_UPLOAD_UNKNOWN when gone). ``HEAD|GET /v2/<name>/blobs/<d>``.

Bodies stream to files under ``root``; nothing is held in memory. ``requests`` logs [method, path, status,
body bytes received] in the order the requests arrived (``settled()``: once every one has been answered).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from .httpserver import LoopbackService, QuietHandler, reply, reply_json

CHUNK = 1 << 20
_SESSION = re.compile(r"^/v2/(?P<name>.+)/blobs/uploads/(?P<id>[0-9a-f-]+)$")
_BLOB = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")
_START = re.compile(r"^/v2/(?P<name>.+)/blobs/uploads/?$")


class ResumableRegistry(LoopbackService):
    handler = QuietHandler

    def __init__(self, root: Path):
        super().__init__()
        self.root = root
        self.lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._in_flight = 0
        self.requests: list[list[Any]] = []        # [method, path, status (0: no answer), body bytes received]
        (root / "uploads").mkdir(parents=True, exist_ok=True)
        (root / "blobs").mkdir(parents=True, exist_ok=True)

    def _session_lock(self, upload_id: str) -> threading.Lock:
        """One request of a session at a time: a status asked right after a cut waits for the cut PATCH to
        have stored what arrived (distribution 3 does not wait; ghbuild copes either way: a resume at a stale
        offset gets 416 and asks again), which keeps the tests' request sequence exact."""
        with self.lock:
            return self._locks.setdefault(upload_id, threading.Lock())

    # ----- storage

    def _upload(self, upload_id: str) -> Path:
        return self.root / "uploads" / upload_id

    def blob(self, digest: str) -> Path:
        return self.root / "blobs" / digest.replace(":", "_")

    @staticmethod
    def _token(offset: int) -> str:
        return base64.urlsafe_b64encode(json.dumps({"Offset": offset}).encode()).decode()

    @staticmethod
    def _offset(token: str | None) -> int | None:
        try:
            return int(json.loads(base64.urlsafe_b64decode((token or "").encode()))["Offset"])
        except (ValueError, KeyError, TypeError):
            return None

    def _session_headers(self, name: str, upload_id: str) -> dict[str, str]:
        size = self._upload(upload_id).stat().st_size
        return {"Location": f"/v2/{name}/blobs/uploads/{upload_id}?_state={self._token(size)}",
                "Range": f"0-{max(size - 1, 0)}", "Docker-Upload-UUID": upload_id}

    # ----- requests

    def handle(self, h: Any) -> None:
        split = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(split.query))
        entry = [h.command, split.path, 0, 0]
        with self.lock:
            self.requests.append(entry)       # in the order they arrived; status and bytes when done
            self._in_flight += 1
        try:
            entry[2], entry[3] = self._route(h, split.path, query)
        finally:
            with self.lock:
                self._in_flight -= 1

    def settled(self, timeout: float = 10.0) -> list[list[Any]]:
        """`requests` once no request is being handled (a client may read its answer before the handler has
        logged it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self._in_flight:
                    return list(self.requests)
            time.sleep(0.01)
        raise AssertionError("requests still in flight")

    def _error(self, h: Any, status: int, code: str) -> tuple[int, int]:
        self._drain(h)
        reply_json(h, status, {"errors": [{"code": code, "message": code.lower().replace("_", " ")}]})
        return status, 0

    @staticmethod
    def _drain(h: Any) -> None:
        left = int(h.headers.get("Content-Length") or 0)
        while left > 0:
            data = h.rfile.read(min(CHUNK, left))
            if not data:
                return
            left -= len(data)

    def _route(self, h: Any, path: str, query: dict[str, str]) -> tuple[int, int]:
        if path == "/v2/" and h.command in ("GET", "HEAD"):
            reply(h, 200, b"{}")
            return 200, 0
        if (m := _START.match(path)) and h.command == "POST":
            upload_id = str(uuid.uuid4())
            self._upload(upload_id).touch()
            reply(h, 202, headers=self._session_headers(m["name"], upload_id))
            return 202, 0
        if m := _SESSION.match(path):
            with self._session_lock(m["id"]):
                return self._session(h, m["name"], m["id"], query)
        if (m := _BLOB.match(path)) and h.command in ("GET", "HEAD"):
            blob = self.blob(m["digest"])
            if not blob.exists():
                return self._error(h, 404, "BLOB_UNKNOWN")
            h.send_response_only(200)
            for key, value in (("Docker-Content-Digest", m["digest"]), ("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(blob.stat().st_size))):
                h.send_header(key, value)
            h.end_headers()
            if h.command == "GET":
                with blob.open("rb") as src:
                    while data := src.read(CHUNK):
                        h.wfile.write(data)
            return 200, 0
        return self._error(h, 404, "UNSUPPORTED")

    def _session(self, h: Any, name: str, upload_id: str, query: dict[str, str]) -> tuple[int, int]:
        upload = self._upload(upload_id)
        if not upload.exists():
            return self._error(h, 404, "BLOB_UPLOAD_UNKNOWN")
        if h.command in ("GET", "HEAD"):
            reply(h, 204, headers=self._session_headers(name, upload_id))
            return 204, 0
        if self._offset(query.get("_state")) != upload.stat().st_size:
            return self._error(h, 416, "RANGE_INVALID")
        if h.command == "DELETE":
            upload.unlink()
            reply(h, 204, headers={"Docker-Upload-UUID": upload_id})
            return 204, 0
        if h.command == "PATCH":
            return self._patch(h, name, upload_id)
        if h.command == "PUT":
            return self._put(h, name, upload_id, query.get("digest") or "")
        return self._error(h, 405, "UNSUPPORTED")

    def _patch(self, h: Any, name: str, upload_id: str) -> tuple[int, int]:
        upload = self._upload(upload_id)
        length = int(h.headers.get("Content-Length") or 0)
        content_range = h.headers.get("Content-Range")
        if content_range:
            start, _, end = content_range.partition("-")
            if not (start.isdigit() and end.isdigit()) or int(start) > int(end) \
                    or int(start) != upload.stat().st_size:
                return self._error(h, 416, "RANGE_INVALID")
            if length != int(end) - int(start) + 1:
                return self._error(h, 416, "SIZE_INVALID")
        received = self._append(h, upload, length)
        if received < length:            # the client went away: what arrived stays, no answer
            h.close_connection = True
            return 0, received
        reply(h, 202, headers=self._session_headers(name, upload_id))
        return 202, received

    @staticmethod
    def _append(h: Any, upload: Path, length: int) -> int:
        received = 0
        with upload.open("ab") as out:
            while received < length:
                try:
                    data = h.rfile.read(min(CHUNK, length - received))
                except OSError:
                    break
                if not data:
                    break
                out.write(data)
                received += len(data)
            out.flush()
            os.fsync(out.fileno())
        return received

    def _put(self, h: Any, name: str, upload_id: str, digest: str) -> tuple[int, int]:
        upload = self._upload(upload_id)
        received = self._append(h, upload, int(h.headers.get("Content-Length") or 0))
        hasher = hashlib.sha256()
        with upload.open("rb") as src:
            while data := src.read(CHUNK):
                hasher.update(data)
        if digest != "sha256:" + hasher.hexdigest():
            upload.unlink()
            return self._error(h, 400, "DIGEST_INVALID")
        upload.replace(self.blob(digest))
        reply(h, 201, headers={"Location": f"/v2/{name}/blobs/{digest}", "Docker-Content-Digest": digest})
        return 201, received
