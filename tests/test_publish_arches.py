"""The per-architecture staging reads of a publish run side by side (publish._per_arch)."""

from __future__ import annotations

import threading
import time

import pytest

from ghbuild import publish

SOURCES = (publish.ArchSource("amd64", "x86_64", "t-x86_64"), publish.ArchSource("arm64", "arm64", "t-arm64"))


class Client:
    def __init__(self, name: str):
        self.name = name

    def clone(self) -> "Client":
        return Client(self.name + "+clone")


def test_each_arch_is_read_on_its_own_client_at_the_same_time():
    started = threading.Barrier(2, timeout=5)     # both reads must be in flight together to pass it

    def read(source, client):
        started.wait()
        return source.arch, client.name, threading.current_thread().name

    out = publish._per_arch(read, SOURCES, Client("main"))
    assert out["amd64"] == ("amd64", "main", threading.main_thread().name)
    assert out["arm64"][:2] == ("arm64", "main+clone") and out["arm64"][2] != threading.main_thread().name


def test_a_failure_is_handed_back_per_arch_in_source_order():
    def read(source, client):
        if source.arch == "arm64":
            raise ValueError("arm64 broken")
        return "ok"

    out = publish._per_arch(read, SOURCES, Client("main"))
    assert out["amd64"] == "ok" and isinstance(out["arm64"], ValueError) and list(out) == ["amd64", "arm64"]


def test_an_interrupt_is_raised_at_once_not_after_the_other_reads_and_never_as_a_missing_image():
    """Ctrl-C (SIGTERM becomes KeyboardInterrupt in the CLI) in the main thread's read must end the run at
    once with exit 130, not wait for the other arch's retries or turn into `staging image(s) missing`."""
    def read(source, client):
        if source.arch == "amd64":
            raise KeyboardInterrupt
        time.sleep(3)
        return None                  # "missing": would have won over the interrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        publish._per_arch(read, SOURCES, Client("main"))
    assert time.monotonic() - start < 2
