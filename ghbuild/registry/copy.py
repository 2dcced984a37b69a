"""Copies between registries: blobs (skipped when present, mounted across repositories of one host, else
streamed source to target), whole images and indexes (children first, by digest), then their tags.

The copy talks to both ends through `Endpoint`, the part of ghbuild.registry.client.Registry it needs, so this
module does not import the client (the client re-exports these names for the modules that used to find them
there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Protocol, Self, TypeVar

from ghbuild.errors import DigestMismatch, RegistryError, TransientError
from ghbuild.http.response import Response
from ghbuild.registry.manifest import Descriptor, Manifest

CHUNK = 1 << 20                # bytes read from the source per iteration while streaming a blob
PROGRESS_EVERY = 5.0           # seconds between progress lines while one blob streams

Log = Callable[[str], None]
T = TypeVar("T")


class Endpoint(Protocol):
    """One side of a copy: what copy_blob and copy_image ask of a registry client."""

    host: str
    log: Log

    def clone(self) -> Self: ...
    def retry(self, fn: Callable[[], T], what: str) -> T: ...
    def blob_exists(self, repo: str, digest: str) -> bool: ...
    def mount_blob(self, repo: str, digest: str, from_repo: str) -> str | None: ...
    def open_blob(self, repo: str, digest: str, offset: int = 0) -> Response: ...
    def upload_stream(self, repo: str, desc: Descriptor, chunks: Iterable[bytes], location: str | None = None,
                      reopen: Callable[[int], Iterable[bytes]] | None = None) -> int: ...
    def cancel_upload(self, repo: str, location: str) -> None: ...
    def get_manifest(self, repo: str, ref: str) -> Manifest: ...
    def resolve(self, repo: str, ref: str) -> Descriptor | None: ...
    def put_manifest(self, repo: str, ref: str, raw: bytes, media_type: str) -> str: ...


class Meter:
    """Bytes a copy has dealt with so far, across its threads, while it runs: sent, and found present or
    mounted (dealt with at once, so no measure of the rate). What a caller needs to tell how far a long copy
    is (ghbuild.publish.early_lease)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.sent = 0
        self.instant = 0
        self.first_sent_at: float | None = None

    def add(self, count: int, sent: bool = True) -> None:
        with self._lock:
            if not sent:
                self.instant += count
                return
            if self.first_sent_at is None:
                self.first_sent_at = self.clock()
            self.sent += count

    @property
    def bytes(self) -> int:
        with self._lock:
            return self.sent + self.instant


@dataclass
class CopyStats:
    """Counters of a copy; the threads of one copy each count their own part and add it up at the end."""

    copied_bytes: int = 0
    copied_blobs: int = 0
    skipped_bytes: int = 0
    skipped_blobs: int = 0
    mounted_bytes: int = 0
    mounted_blobs: int = 0
    manifests: int = 0            # pushed
    manifests_present: int = 0    # already on the target, not pushed
    tags_moved: int = 0           # tags created or pointed at a new digest
    sent_bytes: int = 0           # blob bytes put on the wire to the target, every attempt counted
    resumed_blobs: int = 0        # uploads cut short and resumed where the target said it held the bytes
    resent_blobs: int = 0         # uploads cut short and sent again whole (the target could not resume)
    meter: Meter | None = field(default=None, repr=False, compare=False)   # live, shared with every part

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "meter"}

    def part(self) -> CopyStats:
        """Counters for one thread of this copy, added up at the end (add), metered live with it."""
        return CopyStats(meter=self.meter)

    def moved(self, count: int, sent: bool = True) -> None:
        if self.meter is not None:
            self.meter.add(count, sent)

    def add(self, part: CopyStats) -> None:
        self.copied_bytes += part.copied_bytes
        self.copied_blobs += part.copied_blobs
        self.skipped_bytes += part.skipped_bytes
        self.skipped_blobs += part.skipped_blobs
        self.mounted_bytes += part.mounted_bytes
        self.mounted_blobs += part.mounted_blobs
        self.manifests += part.manifests
        self.manifests_present += part.manifests_present
        self.tags_moved += part.tags_moved
        self.sent_bytes += part.sent_bytes
        self.resumed_blobs += part.resumed_blobs
        self.resent_blobs += part.resent_blobs

    def skipped(self, desc: Descriptor) -> None:
        self.skipped_bytes += desc.size
        self.skipped_blobs += 1
        self.moved(desc.size, sent=False)

    def mounted(self, desc: Descriptor) -> None:
        self.mounted_bytes += desc.size
        self.mounted_blobs += 1
        self.moved(desc.size, sent=False)

    def copied(self, desc: Descriptor) -> None:
        self.copied_bytes += desc.size
        self.copied_blobs += 1


def _with_progress(chunks: Iterable[bytes], desc: Descriptor, log: Log,
                   every: float = PROGRESS_EVERY, start: int = 0) -> Iterator[bytes]:
    """Pass chunks through, saying how far a long blob copy is (at most one line per `every` seconds); `start`:
    the offset the chunks begin at (a resumed upload)."""
    sent, begun = start, time.monotonic()
    last = begun
    for chunk in chunks:
        sent += len(chunk)
        yield chunk
        now = time.monotonic()
        if now - last >= every:
            rate = (sent - start) / max(now - begun, 1e-9) / 1e6
            log(f"  ...    {desc.digest[:19]} {sent / 1e6:,.1f} of {desc.size / 1e6:,.1f} MB ({rate:,.1f} MB/s)")
            last = now


def _length_mismatch(resp: Response, desc: Descriptor) -> DigestMismatch | None:
    """A source whose Content-Length is not the descriptor's size cannot serve these bytes: fail before uploading."""
    length = (resp.headers.get("Content-Length") or "").strip()
    if length.isdigit() and int(length) != desc.size:
        return DigestMismatch(f"{desc.digest}: the source serves {int(length)} bytes, the manifest says {desc.size}")
    return None


def copy_blob(src: Endpoint, src_repo: str, dst: Endpoint, dst_repo: str, desc: Descriptor,
              stats: CopyStats, log: Log | None = None) -> None:
    """Copy one blob unless the target has it; mount when both repos are on one registry host."""
    say = log or dst.log
    if dst.blob_exists(dst_repo, desc.digest):
        stats.skipped(desc)
        say(f"  skip   {desc.digest[:19]} {desc.size:>12,} B (present)")
        return
    location = None
    if src.host == dst.host and src_repo != dst_repo:
        location = dst.retry(lambda: dst.mount_blob(dst_repo, desc.digest, src_repo), f"mount {desc.digest[:19]}")
        if location is None:
            stats.mounted(desc)
            say(f"  mount  {desc.digest[:19]} {desc.size:>12,} B (from {src_repo})")
            return

    sent = 0      # of this blob, every attempt

    def counted(chunks: Iterable[bytes]) -> Iterator[bytes]:
        nonlocal sent
        for chunk in chunks:
            sent += len(chunk)
            stats.sent_bytes += len(chunk)
            stats.moved(len(chunk))
            yield chunk

    def reopen(offset: int) -> Iterator[bytes]:
        return counted(_with_progress(_source_from(src, src_repo, desc, offset), desc, say, start=offset))

    def once() -> None:
        nonlocal location
        if sent:
            stats.resent_blobs += 1     # an attempt that sent bytes failed: this one sends the blob whole
        resp = src.open_blob(src_repo, desc.digest)
        try:
            mismatch = _length_mismatch(resp, desc)
            if mismatch:
                if location:
                    dst.cancel_upload(dst_repo, location)   # the session a refused mount opened
                raise mismatch
            # raw.stream: the bytes as stored, never gunzipped (only identity encoding is accepted).
            chunks = counted(_with_progress(resp.raw.stream(CHUNK, decode_content=False), desc, say))
            stats.resumed_blobs += dst.upload_stream(dst_repo, desc, chunks, location, reopen)
        except RegistryError:
            location = None  # a failed session is not reused: the retry starts a fresh upload
            raise
        finally:
            resp.close()

    dst.retry(once, f"copy blob {desc.digest[:19]}")
    stats.copied(desc)
    say(f"  copy   {desc.digest[:19]} {desc.size:>12,} B")


def _source_from(src: Endpoint, src_repo: str, desc: Descriptor, offset: int) -> Iterator[bytes]:
    """The source blob's bytes from `offset` on: a ranged GET, or the whole blob with the first `offset` bytes
    skipped where the source ignores ranges (a 200). Closed when done or dropped."""
    resp = src.open_blob(src_repo, desc.digest, offset)
    try:
        skip = offset
        if resp.status_code == 206:
            served = (resp.headers.get("Content-Range") or "").strip()
            if not served.startswith(f"bytes {offset}-"):
                raise TransientError(f"GET blob {desc.digest[:19]} from {offset}: the source served {served!r}")
            skip = 0
        for chunk in resp.raw.stream(CHUNK, decode_content=False):
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            chunk, skip = chunk[skip:], 0
            yield chunk
    finally:
        resp.close()


def serialized(log: Log) -> Log:
    """The same log, one line at a time from several threads (print() writes a line and its newline
    separately, so two copies logging at once shared a line)."""
    lock = threading.Lock()

    def locked(message: str) -> None:
        with lock:
            log(message)

    return locked


def _copy_blobs(src: Endpoint, src_repo: str, dst: Endpoint, dst_repo: str, blobs: list[Descriptor],
                stats: CopyStats, log: Log | None, parallel: int) -> None:
    """Copy blobs, up to `parallel` at once (each worker with its own HTTP sessions): the target hashes
    and writes every byte on its own goroutine per upload, so several uploads keep its cores busy."""
    if parallel <= 1 or len(blobs) <= 1:
        for desc in blobs:
            copy_blob(src, src_repo, dst, dst_repo, desc, stats, log)
        return
    say = serialized(log or dst.log)
    local = threading.local()

    def one(desc: Descriptor) -> CopyStats:
        if not hasattr(local, "clients"):
            local.clients = (src.clone(), dst.clone())
        part = stats.part()
        copy_blob(local.clients[0], src_repo, local.clients[1], dst_repo, desc, part, say)
        return part

    # Largest first, so the long transfer starts at once and the small ones fill in around it.
    ordered = sorted(blobs, key=lambda d: -d.size)
    with ThreadPoolExecutor(max_workers=min(parallel, len(ordered)), thread_name_prefix="ghbuild-copy") as pool:
        for part in pool.map(one, ordered):
            stats.add(part)


def copy_image(src: Endpoint, src_repo: str, ref: str, dst: Endpoint, dst_repo: str,
               tags: Iterable[str] = (), stats: CopyStats | None = None, log: Log | None = None,
               parallel: int = 4, *, manifest: Manifest | None = None,
               present: bool | None = None) -> tuple[Manifest, CopyStats]:
    """Copy an image or a whole index (children first, by digest), then tag it. Manifest bytes are kept.
    `manifest` (the source's, already read) and `present` (whether the target holds it, already asked) save
    those requests when the caller has the answers."""
    stats = stats or CopyStats()
    say = log or dst.log
    m = manifest if manifest is not None else src.get_manifest(src_repo, ref)
    if present is None:
        present = dst.resolve(dst_repo, m.digest) is not None   # a stored manifest implies its blobs are there
    if m.is_index:
        for child in m.children():
            copy_image(src, src_repo, child.digest, dst, dst_repo, (), stats, say, parallel)
    elif present:
        for desc in m.blobs():
            stats.skipped(desc)
        say(f"  skip   {m.digest[:19]} manifest present: {len(m.blobs())} blobs not checked one by one")
    else:
        _copy_blobs(src, src_repo, dst, dst_repo, m.blobs(), stats, say, parallel)
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
