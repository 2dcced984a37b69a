"""ghbuild.publish.early_lease: the publish lease is taken as the copies near their end (its settle time passes
beside the last bytes), not at their start (a long copy would keep other publishes waiting) and not after
them; a lease held too long is taken anew, and one being taken when the copies fail is given back."""

from __future__ import annotations

import threading
import time

import pytest

from ghbuild.errors import RegistryError
from ghbuild.publish import early_lease, lease
from ghbuild.registry.client import Descriptor, Manifest, Meter, sha256_digest

GB = 1 << 30


class MemoryRegistry:
    """The lease tag in memory, shared by its clones (one registry, several clients)."""

    def __init__(self, fail: bool = False):
        self.tags: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.fail = fail

    def clone(self):
        return self

    def resolve(self, repo, ref):
        with self.lock:
            raw = self.tags.get(ref)
        return Descriptor(lease.INDEX_TYPE, sha256_digest(raw), len(raw)) if raw is not None else None

    def get_manifest(self, repo, ref):
        with self.lock:
            raw = self.tags[ref]
        return Manifest(raw, lease.INDEX_TYPE, sha256_digest(raw))

    def put_manifest(self, repo, ref, raw, media_type):
        if self.fail:
            raise RegistryError("PUT manifest: 503 Service Unavailable")
        with self.lock:
            self.tags[ref] = raw
        return sha256_digest(raw)

    def holder(self) -> str:
        return lease.LeaseState.parse(self.tags[lease.LEASE_TAG]).holder if lease.LEASE_TAG in self.tags else ""


def taker(reg, expected, meter, **options):
    options = {"settle": 0.5, "max_write": 0.4, **options}
    target = early_lease.LeaseTarget("hub/app", reg, "app")
    return early_lease.EarlyLeases([target], "nightly of abc", expected, meter, options).start()


def copy(meter: Meter, total: int, seconds: float, steps: int = 20) -> None:
    for _ in range(steps):
        time.sleep(seconds / steps)
        meter.add(total // steps)


@pytest.fixture(autouse=True)
def quick_measure(monkeypatch):
    monkeypatch.setattr(early_lease, "MEASURE_AFTER", 0.2)
    monkeypatch.setattr(early_lease, "POLL", 0.02)


def test_the_settle_time_passes_beside_the_copys_last_seconds():
    reg, meter = MemoryRegistry(), Meter()
    leases = taker(reg, 4 * GB, meter)
    copy(meter, 4 * GB, 1.0)                    # 1 s of copying; the lease's lead is 0.5 + 1.5 s
    ended = time.monotonic()
    assert reg.holder() == "nightly of abc", "the lease was not asked for while the copy ran"
    held = leases.leases_for_the_tag_phase()
    assert [h.repository for h in held] == ["hub/app"] and leases.started_at < ended - 0.3
    held[0].check()                             # held, with its time to live ahead
    held[0].release()


def test_a_long_copy_does_not_hold_the_lease_from_its_start():
    reg, meter = MemoryRegistry(), Meter()
    leases = taker(reg, 100 * GB, meter)
    copy(meter, 1 * GB, 0.6, steps=6)           # 1 % of it in 0.6 s: minutes left
    assert lease.LEASE_TAG not in reg.tags and leases.started_at is None
    ended = time.monotonic()
    held = leases.leases_for_the_tag_phase()    # the copy is over (the rest was present): taken now
    assert held and leases.started_at >= ended
    held[0].release()


@pytest.mark.parametrize("expected, present, sent, elapsed, near", [
    (10 * 1024 * 1024, 0, 0, 0.0, True),          # too small to time: at once
    (4 * GB, 0, 0, 0.5, False),                   # nothing measured yet
    (4 * GB, 0, GB, 1.0, False),                  # 3 s left at 1 GB/s, the lead is 2 s
    (4 * GB, 0, 3 * GB, 3.0, True),               # 1 s left
    (4 * GB, 0, 5 * GB, 3.0, True),               # more than expected (a blob sent again): the end
    # 3 GB found present at once, 1 GB to send at 10 MB/s: the present bytes are no speed (100 s left).
    (4 * GB, 3 * GB, 20 * 1024 * 1024, 2.0, False),
    (4 * GB, 4 * GB, 0, 0.0, True),               # everything present
])
def test_near_the_end_is_the_time_left_at_the_rate_sent(expected, present, sent, elapsed, near):
    now = [0.0]
    meter = Meter(clock=lambda: now[0])
    leases = early_lease.EarlyLeases([], "h", expected, meter, {"settle": 0.5}, clock=lambda: now[0])
    leases._base = 0
    meter.add(present, sent=False)
    if sent:
        meter.add(1)                              # the first byte, at 0 s
        now[0] = elapsed
        meter.add(sent - 1)
    assert leases.near_the_end() is near


def test_the_expected_bytes_are_what_the_copies_count_per_arch():
    """A layer two arches share is copied (or found present) by each arch's copy, and counted by each."""
    from ghbuild.publish import copy as publish_copy

    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "a" * 64,
             "size": 1000}
    config = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "c" * 64, "size": 10}
    raw = ('{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", '
           f'"config": {__import__("json").dumps(config)}, "layers": [{__import__("json").dumps(layer)}]}}').encode()
    image = Manifest(raw, "application/vnd.oci.image.manifest.v1+json", sha256_digest(raw))
    verified = {arch: publish_copy._Verified(image, {}, None) for arch in ("amd64", "arm64")}
    assert publish_copy._expected_bytes(verified) == 2 * 1010


def test_a_lease_request_stuck_in_a_slow_registry_does_not_hold_up_the_failure():
    """abandon() waits a bounded time; the thread gives back what it took when its request ends."""
    reg, meter = MemoryRegistry(), Meter()
    gate = threading.Event()
    put = reg.put_manifest
    reg.put_manifest = lambda *a: (gate.wait(10), put(*a))[1]      # a write stuck in retries
    leases = taker(reg, 1024, meter)
    time.sleep(0.1)
    start = time.monotonic()
    leases.abandon(wait=0.2)
    assert time.monotonic() - start < 1
    gate.set()
    leases._thread.join(5)
    assert not leases._thread.is_alive() and reg.holder() == ""


def test_copies_that_fail_while_the_lease_settles_give_it_back():
    reg, meter = MemoryRegistry(), Meter()
    leases = taker(reg, 1024, meter, settle=30.0, max_write=20.0)
    deadline = time.monotonic() + 5
    while lease.LEASE_TAG not in reg.tags and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reg.holder() == "nightly of abc"     # our token written; settling for 30 s
    start = time.monotonic()
    leases.abandon()
    assert time.monotonic() - start < 2 and reg.holder() == ""


def test_a_lease_held_too_long_before_the_tag_phase_is_given_back_to_be_taken_anew():
    reg, meter = MemoryRegistry(), Meter()
    leases = taker(reg, 1024, meter, settle=0.05, max_write=0.04, ttl=1.0)     # held at most 0.25 s early
    time.sleep(0.6)
    assert leases.leases_for_the_tag_phase() == [] and reg.holder() == ""


def test_a_registry_error_while_taking_it_is_the_publishs_error():
    leases = taker(MemoryRegistry(fail=True), 1024, Meter())
    with pytest.raises(RegistryError, match="503"):
        leases.leases_for_the_tag_phase()


def test_the_meter_counts_every_threads_part_live_and_stays_out_of_the_report():
    from ghbuild.registry.client import CopyStats

    meter = Meter()
    stats = CopyStats(meter=meter)
    part = stats.part()
    part.skipped(Descriptor("application/octet-stream", "sha256:" + "a" * 64, 300))
    part.mounted(Descriptor("application/octet-stream", "sha256:" + "b" * 64, 200))
    part.moved(50)                              # bytes put on the wire
    assert meter.bytes == 550 and stats.skipped_bytes == 0      # live, before the part is added up
    stats.add(part)
    assert "meter" not in stats.as_dict() and stats.as_dict()["skipped_bytes"] == 300
