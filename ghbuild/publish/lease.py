"""The publish lease: one publishing run at a time moves the tags of a repository.

A registry has no compare-and-swap on tags, so concurrent publishes of one repository could interleave
their tag moves (`nightly` from one run, `nightly-x86_64` from the other). The lease is a tag of that
repository, `ghbuild-publish-lease`, on a small OCI index with no children whose annotations say who holds
it and until when (and which commit the moving tags last went to). It is taken with Fischer's timed
mutual-exclusion protocol, which needs nothing but reads and writes:

1. read the lease; wait while another run holds it and it has not expired;
2. write our own token, and give up this attempt if the read-to-write took longer than `max_write`;
3. wait `settle` (> `max_write`), read again: the lease is ours only if our token is still there.

Any run that saw the lease free wrote within `max_write` of that read, so after `settle` every competing
write has landed: of two runs, the later writer wins, the other sees its token and waits. The holder
checks the lease again before each moving-tag write (`check`), and gives it back when done (`release`,
only while it still holds it). A run that died keeps the lease until it expires (`ttl`, two minutes:
far longer than a tag phase, which checks it has not run out).

This assumes a registry that returns a completed write on the next read (the distribution registry
does; Docker Hub and GHCR are read-after-write consistent for a manifest by tag as far as we know) and
clocks within minutes of each other (only `ttl` uses wall-clock time).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ghbuild.errors import PublishError, RegistryError
from ghbuild.registry import client as registry

LEASE_TAG = "ghbuild-publish-lease"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
_PREFIX = "dev.ghbuild.lease."


@dataclass(frozen=True)
class LeaseState:
    """What the lease tag says. `token` empty: free. `published_*`: where the moving tags last went."""

    token: str = ""
    holder: str = ""                     # who holds it, for messages ("nightly of <sha>")
    expires: datetime | None = None
    published_sha: str = ""
    published_time: int | None = None    # commit time (Unix seconds) of published_sha

    def held_by_other(self, mine: set[str], now: datetime) -> bool:
        return bool(self.token) and self.token not in mine and (self.expires is None or self.expires > now)

    def body(self) -> bytes:
        annotations = {f"{_PREFIX}token": self.token, f"{_PREFIX}holder": self.holder,
                       f"{_PREFIX}expires": self.expires.strftime("%Y-%m-%dT%H:%M:%SZ") if self.expires else "",
                       f"{_PREFIX}published-sha": self.published_sha,
                       f"{_PREFIX}published-time": "" if self.published_time is None else str(self.published_time)}
        return json.dumps({"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [],
                           "annotations": annotations}, sort_keys=True).encode()

    @classmethod
    def parse(cls, raw: bytes) -> LeaseState:
        try:
            annotations = json.loads(raw).get("annotations") or {}
        except (ValueError, AttributeError):
            annotations = {}
        get = lambda key: str(annotations.get(_PREFIX + key) or "")   # noqa: E731
        expires = None
        if get("expires"):
            try:
                expires = datetime.strptime(get("expires"), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            except ValueError:
                expires = None
        published_time = int(get("published-time")) if get("published-time").isdigit() else None
        return cls(get("token"), get("holder"), expires, get("published-sha"), published_time)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Lease:
    """The lease of one repository (`repo` on `reg`; `repository` names it in messages)."""

    def __init__(self, reg: registry.Registry, repo: str, repository: str, holder: str, *, ttl: float = 120.0,
                 wait: float = 600.0, max_write: float = 3.0, settle: float = 4.0, poll: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = _utcnow, log: Callable[[str], None] = lambda m: None):
        if settle <= max_write:
            raise ValueError("settle must exceed max_write")
        self.reg, self.repo, self.repository, self.holder = reg, repo, repository, holder
        self.ttl, self.wait, self.max_write, self.settle, self.poll = ttl, wait, max_write, settle, poll
        self.sleep, self.clock, self.now, self.log = sleep, clock, now, log
        self.token = ""
        self._written: set[str] = set()   # every token this run wrote (a slow attempt's may still be there)
        self.found = LeaseState()         # the lease as it was when we took it (its published_* fields)
        self._taken_at = 0.0

    def read(self) -> LeaseState:
        if self.reg.resolve(self.repo, LEASE_TAG) is None:
            return LeaseState()
        return LeaseState.parse(self.reg.get_manifest(self.repo, LEASE_TAG).raw)

    def _write(self, state: LeaseState) -> None:
        self.reg.put_manifest(self.repo, LEASE_TAG, state.body(), INDEX_TYPE)

    def acquire(self) -> LeaseState:
        """Take the lease (waiting up to `wait` seconds for another holder); returns the state found."""
        deadline = self.clock() + self.wait
        waited_for = ""
        while True:
            started = self.clock()
            current = self.read()
            if current.held_by_other(self._written, self.now()):
                if self.clock() >= deadline:
                    raise PublishError(f"{self.repository}: another publish ({current.holder or 'unknown'}) holds "
                                       f"the lease {LEASE_TAG} until {current.expires:%Y-%m-%d %H:%M:%S} UTC; "
                                       f"waited {self.wait:.0f} s. Tags moved by nobody; rerun later")
                if waited_for != current.token:
                    self.log(f"{self.repository}: waiting for another publish ({current.holder or 'unknown'})")
                    waited_for = current.token
                self.sleep(self.poll)
                continue
            token = f"{uuid.uuid4()}"
            mine = LeaseState(token, self.holder, self.now() + timedelta(seconds=self.ttl), current.published_sha,
                              current.published_time)
            self._written.add(token)
            try:
                self._write(mine)
            except RegistryError:
                self._free_own()     # the write may have landed although its reply did not
                raise
            if self.clock() - started > self.max_write:
                if self.clock() >= deadline:
                    self._free_own()
                    raise PublishError(f"{self.repository}: could not take the lease {LEASE_TAG}: reading and "
                                       f"writing it took over {self.max_write:.0f} s every time for "
                                       f"{self.wait:.0f} s (a slow registry). Tags moved by nobody; rerun later")
                # Too slow (a retried write): a run that read "free" before our write landed may have taken the
                # lease since. Start over; finding only our own token again then means nobody else wrote, and
                # a run our late write overwrote stops at its next `check`.
                self.log(f"{self.repository}: taking the lease took over {self.max_write:.0f} s; trying again")
                self.sleep(self.settle)
                continue
            self.sleep(self.settle)
            if self.read().token == token:
                self.token, self.found, self._taken_at = token, current, self.clock()
                return current
            # Another run wrote after us: it holds the lease; wait for it.

    def check(self) -> None:
        """Before a moving-tag write: the lease is still ours and not about to expire."""
        if not self.token:
            raise PublishError(f"{self.repository}: the publish lease is not held")
        if self.clock() - self._taken_at > self.ttl * 0.8:
            raise PublishError(f"{self.repository}: the publish lease is about to expire; stopping")
        current = self.read()
        if current.token != self.token:
            raise PublishError(f"{self.repository}: another publish ({current.holder or 'unknown'}) took the lease "
                               f"{LEASE_TAG}; stopping")

    def release(self, published_sha: str | None = None, published_time: int | None = None) -> None:
        """Give the lease back (only while ours), recording where the moving tags went (or keeping the
        record found when nothing moved). Never raises: an unreleased lease expires by itself."""
        if not self.token:
            return
        if self.clock() - self._taken_at >= self.ttl * 0.9:
            # It may have expired and been taken by another run since: writing "free" could free theirs.
            self.log(f"{self.repository}: the publish lease ran out while held; left to expire, not written")
            self.token = ""
            return
        if published_sha is None:
            published_sha, published_time = self.found.published_sha, self.found.published_time
        self._free_own(published_sha, published_time)
        self.token = ""

    def _free_own(self, published_sha: str | None = None, published_time: int | None = None) -> None:
        """Write the lease free if it holds a token of this run's; never raises (it expires by itself)."""
        try:
            current = self.read()
            if current.token not in self._written:
                return
            if published_sha is None:
                published_sha, published_time = current.published_sha, current.published_time
            self._write(LeaseState("", "", None, published_sha, published_time))
        except RegistryError as exc:
            self.log(f"{self.repository}: could not give the lease back ({exc}); it expires by itself")
