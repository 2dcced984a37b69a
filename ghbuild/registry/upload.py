"""Blob uploads: one session, one streamed PATCH, PUT ?digest=, resumed where the registry says what it holds.

The PATCH has Content-Length (size known from the descriptor) and no Content-Range: the form docker, crane and
containerd use, accepted by Docker Hub, GHCR and ECR (multi-PATCH "chunked" uploads are where registries
differ: ECR drops later chunks, GHCR caps chunk size).

A PATCH cut short (connection lost, timeout, 5xx) is resumed in the same session when the caller can reopen
the blob at an offset and the registry says what it holds (GET on the session: 204 with `Range: 0-<last
byte>`, as distribution 3 answers) and holds more than before that PATCH: the rest goes in one PATCH with
Content-Range, up to `attempts - 1` times. Where it cannot say (distribution 2.x answers BLOB_UPLOAD_INVALID,
to the status GET and to the DELETE alike, for a session whose stored size is not the client's last offset,
and keeps its bytes until its upload purging), the session's cancel is tried and the error raised: the
caller sends the blob again, whole, in a new session. Either way the log says which.

Memory stays bounded whatever the blob's size: bytes go from the source's stream to the socket a chunk at a
time. A registry may hash or move a big blob before answering its PATCH or PUT, so those wait longer the
larger the blob (COMMIT_RATE), where a fixed read timeout would cut a slow healthy upload.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ghbuild.errors import DigestMismatch, RegistryError, TransientError
from ghbuild.http.response import Response
from ghbuild.registry.answers import answer_error, distribution_errors, location
from ghbuild.registry.auth import RegistryAuth, push_scope
from ghbuild.registry.manifest import Descriptor

# The slowest a healthy registry hashes or stores a received blob, in bytes per second (see blob_timeout).
COMMIT_RATE = 20 << 20

Reopen = Callable[[int], Iterable[bytes]]


class UploadTarget(Protocol):
    """What an upload asks of the registry client (ghbuild.registry.client.Registry)."""

    host: str
    scheme: str
    auth: RegistryAuth
    timeout: tuple[float, float]
    attempts: int
    log: Callable[[str], None]

    def url(self, path: str) -> str: ...


def start(reg: UploadTarget, repo: str) -> str:
    """POST a new upload session; its Location."""
    r = reg.auth.send("POST", reg.url(f"{repo}/blobs/uploads/"), push_scope(repo), headers={"Content-Length": "0"})
    r.close()
    if r.status_code != 202:
        raise answer_error(r, f"POST upload {repo}")
    return location(r, reg.host, reg.scheme)


def stream(reg: UploadTarget, repo: str, desc: Descriptor, chunks: Iterable[bytes], session_url: str | None = None,
           reopen: Reopen | None = None) -> int:
    """The blob's bytes (`chunks`) into a session (`session_url`, which a refused mount opened, else a new one),
    committed; returns how many times it was resumed. `reopen(offset)`: the blob's bytes from `offset` on, for
    a resume (without it, a cut upload is never resumed). On any failure the session is cancelled."""
    session = [session_url or start(reg, repo)]
    try:
        return patch_and_commit(reg, repo, desc, chunks, session, reopen)
    except BaseException:
        cancel(reg, repo, session[0])  # registries purge abandoned sessions late or never
        raise


def patch_and_commit(reg: UploadTarget, repo: str, desc: Descriptor, chunks: Iterable[bytes], session: list[str],
                     reopen: Reopen | None = None) -> int:
    """PATCH (resuming where allowed; `session[0]` kept current) then PUT ?digest=; the resumes it took."""
    resumes = _patch_resuming(reg, repo, desc, chunks, session, reopen)
    _commit(reg, repo, desc, session[0])
    return resumes


def _patch_resuming(reg: UploadTarget, repo: str, desc: Descriptor, chunks: Iterable[bytes], session: list[str],
                    reopen: Reopen | None) -> int:
    offset = resumes = 0
    while True:
        try:
            session[0] = _patch(reg, repo, desc, chunks, session[0], offset)
            return resumes
        except TransientError as exc:
            if reopen is None or resumes >= reg.attempts - 1:
                raise
            held = status(reg, repo, session[0])
            if isinstance(held, str):
                reg.log(f"  resend {desc.digest[:19]} whole: {reg.host} cannot resume the cut upload ({held})")
                raise
            if held[0] > desc.size:
                raise RegistryError(f"{desc.digest}: {reg.host} holds {held[0]} bytes of a {desc.size}-byte "
                                    "upload") from exc
            if held[0] <= offset:        # nothing more arrived (a 5xx before the body): no progress to keep
                session[0] = held[1]
                raise
            offset, session[0] = held
            resumes += 1
            reg.log(f"  resume {desc.digest[:19]} at {offset:,} of {desc.size:,} B ({reg.host} holds them; "
                    f"cut by {exc})")
            if offset == desc.size:
                return resumes           # every byte arrived, only the answer was lost
            chunks = _first_read(reopen(offset), desc)


def status(reg: UploadTarget, repo: str, session_url: str) -> tuple[int, str] | str:
    """How many bytes an upload session holds and its Location from now on, or why the registry cannot say.
    Distribution answers `Range: 0-0` for 0 bytes and for 1: read as 0 (a resume from 0 re-sends all)."""
    try:
        r = reg.auth.send("GET", session_url, push_scope(repo))
    except RegistryError as exc:
        return str(exc)
    r.close()
    if r.status_code not in (200, 204):
        return str(answer_error(r, "GET upload status"))
    held = (r.headers.get("Range") or "").strip().removeprefix("bytes=")
    first, _, last = held.partition("-")
    if first != "0" or not last.isdigit():
        return f"GET upload status: HTTP {r.status_code} with Range {held!r}"
    now = location(r, reg.host, reg.scheme) if r.headers.get("Location") else session_url
    return (int(last) + 1 if int(last) > 0 else 0), now


def blob_timeout(reg: UploadTarget, size: int) -> tuple[float, float]:
    """The client's timeouts, the read one longer by a second per COMMIT_RATE bytes (a 7 GB layer: +350 s)."""
    connect, read = reg.timeout
    return connect, read + size / COMMIT_RATE


def _patch(reg: UploadTarget, repo: str, desc: Descriptor, chunks: Iterable[bytes], session_url: str,
           offset: int) -> str:
    """One PATCH of the bytes from `offset` to the end; the Location the answer gives."""
    body = _SizedStream(chunks, desc.size - offset)
    headers = {"Content-Type": "application/octet-stream"}
    if offset:
        headers["Content-Range"] = f"{offset}-{desc.size - 1}"
    # The body cannot be replayed: make sure the token outlives the request's start.
    r = reg.auth.send("PATCH", session_url, push_scope(repo), data=body, headers=headers, replayable=False,
                      fresh_for=60, timeout=blob_timeout(reg, desc.size - offset))
    r.close()
    if r.status_code == 416 and offset:     # the registry refuses the offset it gave: start the blob again
        raise TransientError(f"PATCH blob {desc.digest[:19]} to {repo} from {offset}: HTTP 416")
    if r.status_code not in (202, 204, 201):  # spec says 202; ECR has answered 201
        raise answer_error(r, f"PATCH blob {desc.digest[:19]} to {repo}")
    if body.overflow:
        raise DigestMismatch(f"{desc.digest}: the source sent more than the {desc.size} bytes the manifest says")
    if body.sent != desc.size - offset:   # source ended early without an error: retry the whole blob
        raise TransientError(f"{desc.digest}: streamed {offset + body.sent} of {desc.size} bytes")
    # The PATCH answer carries a NEW Location (distribution's _state encodes the offset): use it.
    return location(r, reg.host, reg.scheme)


def _commit(reg: UploadTarget, repo: str, desc: Descriptor, session_url: str) -> None:
    # No local hash: the target hashes what it received and refuses a PUT whose ?digest= differs
    # (DIGEST_INVALID, a MUST of the distribution spec), so a second sha256 here only cost CPU that the
    # registries on the same runner were short of (0.4 CPU s per 630 MB on the 2-core benchmark machine).
    r = reg.auth.send("PUT", _with_query(session_url, digest=desc.digest), push_scope(repo),
                      timeout=blob_timeout(reg, desc.size),
                      headers={"Content-Length": "0", "Content-Type": "application/octet-stream"})
    r.close()
    if r.status_code not in (201, 204):
        raise _commit_error(r, desc, repo)


def _commit_error(r: Response, desc: Descriptor, repo: str) -> RegistryError:
    """The PUT ?digest= failed: DIGEST_INVALID means the bytes we streamed do not hash to the digest."""
    err = answer_error(r, f"PUT blob {desc.digest[:19]} to {repo}")
    if r.status_code == 400 and any(e.get("code") == "DIGEST_INVALID" for e in distribution_errors(r)):
        return DigestMismatch(f"{desc.digest}: {repo} refused the streamed bytes ({err})")
    return err


def cancel(reg: UploadTarget, repo: str, session_url: str) -> None:
    """Best effort DELETE of an upload session. After a cut the Location's offset is stale, which distribution
    3 refuses (416): the session's status gives a current one to delete with."""
    try:
        r = reg.auth.send("DELETE", session_url, push_scope(repo))
        r.close()
        if r.status_code == 416:
            held = status(reg, repo, session_url)
            if not isinstance(held, str):
                reg.auth.send("DELETE", held[1], push_scope(repo)).close()
    except RegistryError:
        pass


def _with_query(url: str, **params: str) -> str:
    u = urlsplit(url)  # keep distribution's `_state` and friends, add ours
    return urlunsplit(u._replace(query=urlencode(parse_qsl(u.query, keep_blank_values=True) + list(params.items()))))


def _first_read(chunks: Iterable[bytes], desc: Descriptor) -> Iterator[bytes]:
    """`chunks` with its first one read now: a source that cannot be reopened fails before the PATCH starts."""
    it = iter(chunks)
    try:
        first = next(it, b"")
    except OSError as exc:
        raise TransientError(f"reopen {desc.digest[:19]}: {type(exc).__name__}: {exc}") from exc
    return itertools.chain([first], it)


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
