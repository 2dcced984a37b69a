"""ghbuild.publish.lease against an in-memory registry and an injected clock: waits are bounded, an expired lease
is taken over, a slow registry fails the run instead of looping, release writes the lease free."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ghbuild.errors import PublishError
from ghbuild.publish import lease
from ghbuild.registry.client import Descriptor, Manifest, sha256_digest


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds

    def now(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.t)


class MemoryRegistry:
    """resolve / get_manifest / put_manifest on one tag; each write costs `write_cost` seconds of the clock."""

    def __init__(self, clock: Clock, write_cost: float = 0.0):
        self.tags: dict[str, bytes] = {}
        self.clock, self.write_cost = clock, write_cost

    def resolve(self, repo, ref):
        raw = self.tags.get(ref)
        return Descriptor(lease.INDEX_TYPE, sha256_digest(raw), len(raw)) if raw is not None else None

    def get_manifest(self, repo, ref):
        raw = self.tags[ref]
        return Manifest(raw, lease.INDEX_TYPE, sha256_digest(raw))

    def put_manifest(self, repo, ref, raw, media_type):
        self.clock.sleep(self.write_cost)
        self.tags[ref] = raw
        return sha256_digest(raw)


def make(reg, clock, holder="run", **kw):
    return lease.Lease(reg, "hub/app", "hub/app", holder, sleep=clock.sleep, clock=clock, now=clock.now, **kw)


def state(reg) -> lease.LeaseState:
    return lease.LeaseState.parse(reg.tags[lease.LEASE_TAG])


def test_take_release_and_the_published_record_survives():
    clock = Clock()
    reg = MemoryRegistry(clock)
    first = make(reg, clock)
    assert first.acquire() == lease.LeaseState()
    assert state(reg).token == first.token and state(reg).holder == "run"
    first.release("a" * 40, 1000)
    assert state(reg).token == "" and state(reg).published_sha == "a" * 40
    second = make(reg, clock)
    assert second.acquire().published_time == 1000
    second.release()              # nothing published: the record found stays
    assert state(reg).published_time == 1000


def test_a_held_lease_is_waited_for_then_refused_and_an_expired_one_taken_over():
    clock = Clock()
    reg = MemoryRegistry(clock)
    make(reg, clock, "stuck run", ttl=120).acquire()
    with pytest.raises(PublishError, match=r"another publish \(stuck run\) holds the lease"):
        make(reg, clock, wait=30).acquire()
    assert clock.t < 60
    clock.sleep(120)             # past its expiry
    late = make(reg, clock, wait=30)
    late.acquire()
    assert state(reg).token == late.token


def test_a_registry_too_slow_for_the_protocol_fails_the_run_instead_of_looping():
    clock = Clock()
    reg = MemoryRegistry(clock, write_cost=5.0)      # every write takes longer than max_write
    with pytest.raises(PublishError, match=r"could not take the lease .* \(a slow registry\)"):
        make(reg, clock, wait=60).acquire()
    assert clock.t < 200
    assert state(reg).token == ""     # its own token written free again


def test_the_later_writer_wins_and_the_other_waits():
    clock = Clock()
    reg = MemoryRegistry(clock)
    a, b = make(reg, clock, "A", wait=5), make(reg, clock, "B")
    # B writes its token while A is settling: A must see B's token and not take the lease
    real_sleep = clock.sleep
    def a_sleeps(seconds):
        if reg.tags.get(lease.LEASE_TAG) and state(reg).holder == "A" and not b.token:
            b.acquire()
        real_sleep(seconds)
    a.sleep = a_sleeps
    with pytest.raises(PublishError, match=r"another publish \(B\)"):
        a.acquire()
    assert b.token and state(reg).token == b.token and not a.token
    with pytest.raises(PublishError, match=r"not held"):
        a.check()


def test_a_lease_that_ran_out_while_held_is_not_written_free():
    """Past its time another run may hold it: writing "free" then would free theirs."""
    clock = Clock()
    reg = MemoryRegistry(clock)
    mine = make(reg, clock, "slow", ttl=120.0)
    mine.acquire()
    clock.sleep(115.0)
    other_token = "someone-else"
    read = reg.get_manifest

    def read_then_taken(repo, ref):     # our token read back, then the other run's write lands
        found = read(repo, ref)
        reg.tags[lease.LEASE_TAG] = lease.LeaseState(other_token, "other",
                                                     clock.now() + timedelta(seconds=120)).body()
        return found

    reg.get_manifest = read_then_taken
    writes = []
    put = reg.put_manifest
    reg.put_manifest = lambda *a: (writes.append(a), put(*a))[1]
    mine.release()
    assert writes == [] and mine.token == ""        # nothing written: the lease expires by itself
