"""The publish leases taken while the copies finish, so that the lease's settle time (seconds of waiting that
Fischer's protocol needs, ghbuild.publish.lease) passes beside the last bytes of the copies, not after them.

Taken too early, a lease would keep every other publish of the repository waiting through a long copy (a
nightly of multi-GB layers to Docker Hub takes minutes); taken after the copies, its settle time is pure
wait. So a thread watches the copies' progress (ghbuild.registry.copy.Meter against the bytes the plans
list) and starts taking the leases once the copies' time left, at the rate seen so far, is within `lead`
seconds (the settle time and a margin), or at once for a copy too small to time. A lease that ends up
held longer than `max_early` before the tag phase (the estimate was wrong: a cut upload sent again) is
given back and taken anew by the tag phase, so the tag phase always starts with most of the lease's time
to live left. When the copies fail, a lease being taken or held is given back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ghbuild.publish import lease
from ghbuild.registry import client as registry

SMALL = 64 * 1024 * 1024     # bytes: a copy this small is not timed; its leases are taken at once
MEASURE_AFTER = 1.0          # seconds of copying before the rate seen is trusted
POLL = 0.25                  # seconds between looks at the copies' progress


class LeaseTarget(NamedTuple):
    """One publish repository whose lease the tag phase needs."""

    repository: str
    reg: registry.Registry
    repo: str


class _Abandoned(Exception):
    """The copies failed while a lease was being taken: stop and give it back."""


class EarlyLeases:
    """Takes the leases of `targets` (in name order, as the tag phase would) on a thread of its own once the
    copies near their end. `expected`: the bytes the copies deal with at most (sent, present or mounted),
    counted live by `meter`. `lease_options`: as for lease.Lease (tests shorten its times)."""

    def __init__(self, targets: Sequence[LeaseTarget], holder: str, expected: int, meter: registry.Meter,
                 lease_options: Mapping[str, Any], log: Callable[[str], None] = lambda m: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.targets = sorted(targets)
        self.holder, self.expected, self.meter, self.log, self.clock = holder, expected, meter, log, clock
        self.lease_options = dict(lease_options)
        settle = float(self.lease_options.get("settle", 4.0))
        self.lead = settle + 1.5          # the settle, a read and a write, and the estimate's slack
        self.max_early = float(self.lease_options.get("ttl", 120.0)) * 0.25
        self.leases: list[lease.Lease] = []
        self.taking: lease.Lease | None = None
        self.error: BaseException | None = None
        self.started_at: float | None = None      # when the first lease was asked for (for the report)
        self._lock = threading.Lock()
        self._copies_over = threading.Event()
        self._abandoned = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ghbuild-lease", daemon=True)

    def start(self) -> EarlyLeases:
        self._base = self.meter.bytes
        self._thread.start()
        return self

    def near_the_end(self) -> bool:
        """Whether the copies' time left is within `lead` (or too small to time). The rate is the bytes sent
        since the first one: bytes found present or mounted count as done, not as speed."""
        left = self.expected - (self.meter.bytes - self._base)
        if left <= 0 or self.expected <= SMALL:
            return True
        first = self.meter.first_sent_at
        if first is None:
            return False
        elapsed = self.meter.clock() - first
        if elapsed < MEASURE_AFTER or self.meter.sent <= 0:
            return False
        return left / (self.meter.sent / elapsed) <= self.lead

    def _sleep(self, seconds: float) -> None:
        if self._abandoned.wait(seconds):
            raise _Abandoned

    def _run(self) -> None:
        try:
            while not self._copies_over.is_set() and not self.near_the_end():
                self._copies_over.wait(POLL)
            if self._abandoned.is_set():
                return
            self.started_at = self.clock()
            for target in self.targets:
                # A client of its own: the copies use theirs on other threads meanwhile.
                self.taking = lease.Lease(target.reg.clone(), target.repo, target.repository, self.holder, log=self.log,
                                          **{**self.lease_options, "sleep": self._sleep})
                self.taking.acquire()
                self.leases.append(self.taking)
                self.taking = None
        except _Abandoned:
            pass
        except BaseException as exc:     # re-raised on the caller's thread (leases)
            self.error = exc
        finally:
            if self.taking is not None:
                self.taking._free_own()     # a token written before the stop is given back, not left to expire
                self.taking = None
            if self._abandoned.is_set():    # the caller may have stopped waiting: what is held goes back here
                self._give_back()

    def leases_for_the_tag_phase(self) -> list[lease.Lease]:
        """Once the copies are over: the leases, held (waiting for them if need be). Empty when one was held
        too long already: the tag phase then takes them itself. Raises what taking them raised."""
        self._copies_over.set()
        self._thread.join()
        if self.error is not None:
            self._give_back()
            raise self.error
        if any(held.clock() - held._taken_at > self.max_early for held in self.leases):
            self.log(f"publish lease: held {self.max_early:.0f} s before the copies ended; taking it again")
            self._give_back()
        return self.leases

    def abandon(self, wait: float | None = None) -> None:
        """The copies failed (or the tag phase is over): stop taking the leases and give back any held. Waits
        at most `wait` seconds (default: the settle time and 2 s) for a lease request in flight (a registry
        retrying with back-off); the thread then gives back what it holds when that request ends, and an
        interrupted run's lease expires by itself. Never raises."""
        self._abandoned.set()
        self._copies_over.set()
        if self._thread.ident is not None:
            self._thread.join(self.lead + 0.5 if wait is None else wait)
        if not self._thread.is_alive():
            self._give_back()

    def _give_back(self) -> None:
        with self._lock:
            leases, self.leases = self.leases, []
        for held in leases:
            held.release()
