"""Resuming a cut blob upload (ghbuild.registry.upload) against a store speaking distribution 3's upload
protocol (tests/fakes/resumable_registry.py) behind the fault proxy, in-process, with small blobs; the 1 GiB
cases against the real registry are in tests/services/registry/test_big_blobs.py."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from fakes.faultproxy import FaultProxy
from fakes.resumable_registry import ResumableRegistry

from ghbuild.errors import TransientError
from ghbuild.registry.client import Registry
from ghbuild.registry.manifest import Descriptor

SIZE = 4 << 20
DATA = os.urandom(SIZE)
DESC = Descriptor("application/octet-stream", "sha256:" + hashlib.sha256(DATA).hexdigest(), SIZE)


def pieces(offset: int = 0, size: int = 256 << 10) -> list[bytes]:
    return [DATA[i:i + size] for i in range(offset, SIZE, size)]


class Reopens:
    def __init__(self) -> None:
        self.offsets: list[int] = []

    def __call__(self, offset: int) -> list[bytes]:
        self.offsets.append(offset)
        return pieces(offset)


@pytest.fixture
def store(tmp_path):
    with ResumableRegistry(tmp_path) as target, FaultProxy(target.url) as proxy:
        yield target, proxy
    assert not target.errors and not proxy.errors


def client(proxy: FaultProxy, logs: list[str]) -> Registry:
    return Registry(proxy.host, attempts=3, delay=0, sleep=lambda seconds: None, log=logs.append)


def methods(target: ResumableRegistry) -> list[tuple[str, int]]:
    return [(method, status) for method, _, status, _ in target.settled()]


def test_a_cut_patch_resumes_where_the_store_says_it_holds_the_bytes(store):
    target, proxy = store
    proxy.reset("PATCH", r"/blobs/uploads/", after=SIZE // 2)
    logs: list[str] = []
    reopen = Reopens()
    assert client(proxy, logs).upload_stream("t/a", DESC, pieces(), reopen=reopen) == 1
    held = target.settled()[1][3]
    assert reopen.offsets == [held] and 0 < held <= SIZE // 2
    assert methods(target) == [("POST", 202), ("PATCH", 0), ("GET", 204), ("PATCH", 202), ("PUT", 201)]
    assert target.blob(DESC.digest).read_bytes() == DATA
    assert [line.split(" (")[0] for line in logs] == [f"  resume {DESC.digest[:19]} at {held:,} of {SIZE:,} B"]


def test_without_a_way_to_reopen_the_source_a_cut_is_raised_and_the_session_dropped(store):
    target, proxy = store
    proxy.reset("PATCH", r"/blobs/uploads/", after=SIZE // 2)
    with pytest.raises(TransientError):
        client(proxy, []).upload_stream("t/a", DESC, pieces())
    seen = methods(target)
    if seen[1][0] == "PATCH":
        # the cut PATCH stored what arrived first: the Location's offset is stale, so the DELETE it refuses is sent
        # again with the status's
        assert seen == [("POST", 202), ("PATCH", 0), ("DELETE", 416), ("GET", 204), ("DELETE", 204)]
    else:
        # the proxy's upstream PATCH reached the store after the DELETE (a thread scheduled late): the session was
        # dropped at once, and the late PATCH finds none
        assert seen[:2] == [("POST", 202), ("DELETE", 204)] and [m for m, _ in seen[2:]] == ["PATCH"], seen
    assert not target.blob(DESC.digest).exists()


def test_a_store_that_cannot_say_what_it_holds_gets_the_blob_again_whole(store):
    """distribution 2.x answers the status of a session whose size moved on with BLOB_UPLOAD_INVALID."""
    _, proxy = store
    proxy.reset("PATCH", r"/blobs/uploads/", after=SIZE // 2)
    proxy.respond("GET", r"/blobs/uploads/", 404, body=json.dumps(
        {"errors": [{"code": "BLOB_UPLOAD_INVALID", "message": "blob upload invalid"}]}).encode())
    logs: list[str] = []
    reopen = Reopens()
    with pytest.raises(TransientError):
        client(proxy, logs).upload_stream("t/a", DESC, pieces(), reopen=reopen)
    assert reopen.offsets == []
    assert logs == [f"  resend {DESC.digest[:19]} whole: {proxy.host} cannot resume the cut upload (GET upload "
                    "status: HTTP 404 BLOB_UPLOAD_INVALID: blob upload invalid)"]


def test_a_resume_at_a_stale_offset_is_refused_and_asked_again(store):
    """The store's status lagged behind what it then held: the resume gets 416, ghbuild asks again."""
    target, proxy = store
    proxy.reset("PATCH", r"/blobs/uploads/", after=SIZE // 2)
    real = target._session_headers
    lies = [1 << 20]

    def lagging(name: str, upload_id: str) -> dict[str, str]:
        headers = real(name, upload_id)
        if lies and target.requests[-1][0] == "GET":
            held = int(headers["Range"].split("-")[1]) + 1 - lies.pop()
            headers["Range"] = f"0-{held - 1}"
            headers["Location"] = headers["Location"].split("?")[0] + "?_state=" + target._token(held)
        return headers

    target._session_headers = lagging
    reopen = Reopens()
    assert client(proxy, []).upload_stream("t/a", DESC, pieces(), reopen=reopen) == 2
    assert [m for m, _ in methods(target)] == ["POST", "PATCH", "GET", "PATCH", "GET", "PATCH", "PUT"]
    assert methods(target)[3] == ("PATCH", 416) and reopen.offsets[1] == reopen.offsets[0] + (1 << 20)
    assert target.blob(DESC.digest).read_bytes() == DATA
