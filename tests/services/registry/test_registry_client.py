"""ghbuild.registry.client against a real, throwaway distribution registry, with faults from tests/fakes/faultproxy.py.

No Docker engine: `docker-registry` (distribution 2.8) runs on a free loopback port with its storage in a
temporary folder, test images are pushed with tests/fakes/oci.py's RegistryClient, and the fault proxy
sits between ghbuild's client and the registry where a test needs 5xx, 429, resets or a request log. The
client's `sleep` is injected (the waits are recorded, not slept) except where a test measures real timing.
Without the binary these tests skip, except under CI=true where they fail.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import socket
import time
import uuid

import pytest
from fakes.faultproxy import FaultProxy
from fakes.httpserver import free_port
from fakes.oci import MT_DOCKER_LIST, MT_OCI_INDEX, RegistryClient

from ghbuild.errors import AuthError, DigestMismatch, TransientError
from ghbuild.registry import copy as registry_copy
from ghbuild.registry.client import Registry
from ghbuild.registry.copy import CopyStats
from ghbuild.registry.manifest import Descriptor

# --------------------------------------------------------------------------- the registry and the proxy


@pytest.fixture
def proxy(registry_url: str):
    with FaultProxy(registry_url) as fault_proxy:
        yield fault_proxy
    assert not fault_proxy.errors, "\n".join(fault_proxy.errors)


@pytest.fixture
def direct_host(registry_url: str) -> str:
    return registry_url.removeprefix("http://")


class Client:
    """ghbuild's Registry with recorded (not slept) waits and log lines."""

    def __init__(self, host: str, attempts: int = 3, delay: float = 0.5, real_sleep: bool = False):
        self.sleeps: list[float] = []
        self.logs: list[str] = []

        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            if real_sleep:
                time.sleep(seconds)

        self.reg = Registry(host, attempts=attempts, delay=delay, sleep=sleep, log=self.logs.append,
                            timeout=(5.0, 30.0))


def name() -> str:
    return f"t/{uuid.uuid4().hex[:12]}"


def big_payload(size: int = 400_000) -> bytes:
    """Incompressible: the gzipped layer stays about `size` bytes."""
    return os.urandom(size)


def blob_sizes(reg: RegistryClient, repo: str, digest: str) -> dict[str, int]:
    m = reg.get_manifest(repo, digest).json()
    return {b["digest"]: b["size"] for b in [m["config"], *m["layers"]]}


# --------------------------------------------------------------------------- resolve: found / missing / failed


def test_resolve_found_and_confirmed_missing(reg, direct_host):
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"resolve")
    c = Client(direct_host)
    desc = c.reg.resolve(repo, "v1")
    assert desc == Descriptor(image["mediaType"], image["digest"], image["size"])
    assert c.reg.resolve(repo, image["digest"]).digest == image["digest"]
    assert c.reg.resolve(repo, "no-such-tag") is None                 # MANIFEST_UNKNOWN
    assert c.reg.resolve(name(), "v1") is None                         # NAME_UNKNOWN
    assert c.sleeps == []


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_resolve_raises_transient_after_retries_never_none(reg, proxy, status):
    repo = name()
    reg.push_image(repo, "v1", payload=b"5xx")
    proxy.respond("HEAD", r"/manifests/v1$", status, count=None)
    c = Client(proxy.host, attempts=3, delay=0.5)
    with pytest.raises(TransientError, match=rf"failed after 3 attempts: .*HTTP {status}"):
        c.reg.resolve(repo, "v1")
    assert [e.status for e in proxy.requests("HEAD")] == [status] * 3
    assert c.sleeps == [0.5, 0.5]


def test_resolve_succeeds_after_transient_errors(reg, proxy):
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"flaky")
    proxy.respond("HEAD", r"/manifests/v1$", 503, count=2)
    c = Client(proxy.host, attempts=3, delay=0.5)
    assert c.reg.resolve(repo, "v1").digest == image["digest"]
    assert [e.status for e in proxy.requests("HEAD")] == [503, 503, 200]
    assert len(c.logs) == 2 and all(line.startswith("retry ") for line in c.logs)


def test_resolve_network_error_is_transient_not_missing():
    port = free_port()  # bound and closed: nobody listens
    c = Client(f"127.0.0.1:{port}", attempts=2, delay=0.25)
    with pytest.raises(TransientError, match=r"failed after 2 attempts: HEAD .*ConnectionError"):
        c.reg.resolve("t/x", "v1")
    assert c.sleeps == [0.25]


@pytest.mark.parametrize("status,headers", [
    (401, {}),
    (401, {"WWW-Authenticate": 'Basic realm="registry"'}),
    (403, {}),
])
def test_auth_errors_fail_at_once(reg, proxy, status, headers):
    repo = name()
    reg.push_image(repo, "v1", payload=b"auth")
    proxy.respond("HEAD", r"/manifests/", status, headers, count=None)
    c = Client(proxy.host, attempts=4)
    with pytest.raises(AuthError, match=f"HTTP {status}"):
        c.reg.resolve(repo, "v1")
    assert len(proxy.requests("HEAD")) == 1 and c.sleeps == []


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize("retry_after,expected", [("3", 3.0), ("0", 0.5), ("1000", 120.0)])
def test_retry_after_seconds_is_honoured(reg, proxy, retry_after, expected):
    """The wait is Retry-After when longer than the delay, the delay otherwise, capped at 120 s."""
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"429")
    proxy.respond("HEAD", r"/manifests/v1$", 429, {"Retry-After": retry_after})
    c = Client(proxy.host, attempts=3, delay=0.5)
    assert c.reg.resolve(repo, "v1").digest == image["digest"]
    assert c.sleeps == [expected]


def test_retry_after_http_date_is_honoured(reg, proxy):
    """RFC 9110 10.2.3: Retry-After is delay-seconds OR an HTTP-date; both must be honoured."""
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"429 date")
    when = email.utils.formatdate(time.time() + 6, usegmt=True)
    proxy.respond("HEAD", r"/manifests/v1$", 429, {"Retry-After": when})
    c = Client(proxy.host, attempts=3, delay=0.5)
    assert c.reg.resolve(repo, "v1").digest == image["digest"]
    assert len(c.sleeps) == 1 and 3.5 <= c.sleeps[0] <= 6.5, c.sleeps


def test_retry_after_real_timing_from_proxy_log(reg, proxy):
    """Really slept: the retried request reaches the registry no earlier than Retry-After allows."""
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"429 timing")
    proxy.respond("HEAD", r"/manifests/v1$", 429, {"Retry-After": "1"})
    c = Client(proxy.host, attempts=3, delay=0.05, real_sleep=True)
    assert c.reg.resolve(repo, "v1").digest == image["digest"]
    first, second = proxy.requests("HEAD")
    assert (first.status, second.status) == (429, 200)
    assert second.start - first.end >= 0.95, second.start - first.end


# --------------------------------------------------------------------------- manifests


def test_get_and_put_manifest_retry_5xx(reg, proxy):
    repo = name()
    image = reg.push_image(repo, "v1", payload=b"manifest")
    proxy.respond("GET", r"/manifests/v1$", 502)
    proxy.respond("PUT", r"/manifests/v2$", 503)
    c = Client(proxy.host)
    m = c.reg.get_manifest(repo, "v1")
    assert m.digest == image["digest"]
    assert c.reg.put_manifest(repo, "v2", m.raw, m.media_type) == image["digest"]
    assert reg.head_manifest(repo, "v2")[0] == image["digest"]
    assert [e.status for e in proxy.requests("PUT")] == [503, 201]


def test_get_manifest_persistent_5xx_raises(reg, proxy):
    repo = name()
    reg.push_image(repo, "v1", payload=b"manifest down")
    proxy.respond("GET", r"/manifests/", 500, count=None)
    c = Client(proxy.host, attempts=2)
    with pytest.raises(TransientError, match="failed after 2 attempts"):
        c.reg.get_manifest(repo, "v1")


def test_put_manifest_keeps_the_exact_bytes(reg, proxy):
    """Odd whitespace and key order survive: the registry stores (and digests) exactly what was sent."""
    repo = name()
    image = reg.push_image(repo, None, payload=b"exact bytes")
    original = reg.get_manifest(repo, image["digest"]).json()
    odd = (json.dumps({"layers": original["layers"], "schemaVersion": 2, "config": original["config"],
                       "mediaType": original["mediaType"]}, indent=7, separators=(" ,", " :  ")) + "\n\n").encode()
    c = Client(proxy.host)
    digest = c.reg.put_manifest(repo, "odd", odd, original["mediaType"])
    assert digest == "sha256:" + hashlib.sha256(odd).hexdigest() != image["digest"]
    stored = reg.get_manifest(repo, "odd")
    assert stored.body == odd and stored.digest == digest
    assert c.reg.get_manifest(repo, "odd").raw == odd

    # a Docker manifest list keeps its media type (and bytes), by digest
    plat = dict(image)
    index = json.dumps({"schemaVersion": 2, "mediaType": MT_DOCKER_LIST, "manifests": [plat]}, indent=1).encode()
    idx_digest = "sha256:" + hashlib.sha256(index).hexdigest()
    assert c.reg.put_manifest(repo, idx_digest, index, MT_DOCKER_LIST) == idx_digest
    got = c.reg.get_manifest(repo, idx_digest)
    assert (got.raw, got.media_type, got.is_index) == (index, MT_DOCKER_LIST, True)

    # refusing to push bytes under a digest they do not hash to: nothing is sent
    before = len(proxy.log)
    with pytest.raises(DigestMismatch):
        c.reg.put_manifest(repo, image["digest"], odd, original["mediaType"])
    assert len(proxy.log) == before


# --------------------------------------------------------------------------- tags


def paginate(proxy: FaultProxy, repo: str, tags: list[str], n: int, link_style: str = "relative") -> None:
    """Serve GET tags/list in pages of `n` with `Link: <...>; rel="next"` (OCI distribution spec).

    distribution 2.8 ignores `n` on tags/list (pagination came with distribution 3), so the pages are
    scripted in the proxy, shaped as distribution 3 / Docker Hub / GHCR send them.
    """
    for i in range(0, len(tags), n):
        page = tags[i:i + n]
        query = rf"^n={n}$" if i == 0 else rf"^last={tags[i - 1]}&n={n}$"
        headers = {"Content-Type": "application/json"}
        if i + n < len(tags):
            target = f"/v2/{repo}/tags/list?last={page[-1]}&n={n}"
            url = target if link_style == "relative" else proxy.url + target
            headers["Link"] = f'<{url}>; rel="next"'
        proxy.respond("GET", rf"^/v2/{repo}/tags/list$", 200, headers,
                      json.dumps({"name": repo, "tags": page}).encode(), query=query, count=None)


@pytest.mark.parametrize("link_style", ["relative", "absolute"])
def test_list_tags_follows_pagination_to_the_end(proxy, link_style):
    repo = name()
    wanted = [f"t{i:02d}" for i in range(9)]
    paginate(proxy, repo, wanted, 2, link_style)
    c = Client(proxy.host)
    assert c.reg.list_tags(repo, page_size=2) == wanted
    pages = proxy.requests("GET", r"/tags/list")
    assert [e.path.split("?")[1] for e in pages] == ["n=2"] + [f"last={t}&n=2" for t in wanted[1:-1:2]]


def test_list_tags_does_not_stop_early_on_a_failed_page(proxy):
    repo = name()
    wanted = [f"t{i:02d}" for i in range(7)]
    proxy.respond("GET", r"/tags/list$", 503, nth=2)       # the second page, once (added first: wins)
    paginate(proxy, repo, wanted, 3)
    c = Client(proxy.host)
    assert c.reg.list_tags(repo, page_size=3) == wanted
    assert [e.status for e in proxy.requests("GET", r"/tags/list")] == [200, 503, 200, 200]
    assert c.sleeps == [0.5]


def test_list_tags_real_registry(reg, proxy):
    """Against distribution itself (which answers in one page whatever `n` says)."""
    repo = name()
    image = reg.push_image(repo, "t00", payload=b"tags")
    wanted = [f"t{i:02d}" for i in range(5)]
    for tag in wanted[1:]:
        reg.tag(repo, image["digest"], tag)
    assert sorted(Client(proxy.host).reg.list_tags(repo, page_size=2)) == wanted


def test_list_tags_of_a_missing_repository_is_empty(direct_host):
    assert Client(direct_host).reg.list_tags(name()) == []


# --------------------------------------------------------------------------- copy


def test_copy_image_moves_only_missing_blobs(reg, proxy, direct_host):
    """Two hosts (the registry direct, and through the proxy): a real copy, no mount. A second copy moves
    0 bytes; an image sharing its layer moves only its config."""
    src_repo, dst_repo = name(), name()
    payload = big_payload(200_000)
    image = reg.push_image(src_repo, "v1", architecture="amd64", payload=payload)
    sizes = blob_sizes(reg, src_repo, image["digest"])
    src, dst = Client(direct_host), Client(proxy.host)

    m, stats = registry_copy.copy_image(src.reg, src_repo, "v1", dst.reg, dst_repo, tags=("v1",))
    assert m.digest == image["digest"]
    assert (stats.copied_blobs, stats.copied_bytes) == (2, sum(sizes.values()))
    assert (stats.manifests, stats.tags_moved, stats.mounted_blobs) == (1, 1, 0)
    assert len(proxy.requests("PATCH")) == 2
    for digest in sizes:
        assert hashlib.sha256(reg.get_blob(dst_repo, digest)).hexdigest() == digest.split(":")[1]
    assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]

    proxy.clear_log()
    _, again = registry_copy.copy_image(src.reg, src_repo, "v1", dst.reg, dst_repo, tags=("v1",))
    assert (again.copied_bytes, again.copied_blobs, again.manifests, again.tags_moved) == (0, 0, 0, 0)
    assert again.manifests_present == 1
    assert {e.method for e in proxy.log} == {"HEAD"}                     # nothing written

    # same layer (same payload), another architecture: only the new config blob travels
    proxy.clear_log()
    arm = reg.push_image(src_repo, "v1-arm64", architecture="arm64", payload=payload)
    arm_sizes = blob_sizes(reg, src_repo, arm["digest"])
    _, third = registry_copy.copy_image(src.reg, src_repo, "v1-arm64", dst.reg, dst_repo)
    (config,) = set(arm_sizes) - set(sizes)
    assert (third.copied_blobs, third.copied_bytes) == (1, arm_sizes[config])
    assert (third.skipped_blobs, third.skipped_bytes) == (1, arm_sizes[image_layer(reg, src_repo, arm)])
    assert [e.content_length for e in proxy.requests("PATCH")] == [arm_sizes[config]]


def image_layer(reg: RegistryClient, repo: str, image: dict) -> str:
    return reg.get_manifest(repo, image["digest"]).json()["layers"][0]["digest"]


def test_copy_index_children_first_then_index_then_tag(reg, proxy, direct_host):
    src_repo, dst_repo = name(), name()
    amd = reg.push_image(src_repo, None, architecture="amd64", payload=b"idx amd64")
    arm = reg.push_image(src_repo, None, architecture="arm64", variant="v8", payload=b"idx arm64")
    index = reg.push_index(src_repo, [amd, arm], "multi", media_type=MT_OCI_INDEX)
    m, stats = registry_copy.copy_image(Client(direct_host).reg, src_repo, "multi", Client(proxy.host).reg, dst_repo,
                                   tags=("multi",))
    assert m.digest == index["digest"] and stats.manifests == 3 and stats.tags_moved == 1
    puts = [e.path.rsplit("/", 1)[1] for e in proxy.requests("PUT", r"/manifests/")]
    assert puts == [amd["digest"], arm["digest"], index["digest"], "multi"]


def test_mount_within_one_registry(reg, proxy):
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=b"mount me")
    sizes = blob_sizes(reg, src_repo, image["digest"])
    c = Client(proxy.host)
    _, stats = registry_copy.copy_image(c.reg, src_repo, "v1", c.reg, dst_repo, tags=("v1",))
    assert (stats.mounted_blobs, stats.mounted_bytes) == (2, sum(sizes.values()))
    assert (stats.copied_blobs, stats.copied_bytes) == (0, 0)
    mounts = proxy.requests("POST", r"/blobs/uploads/")
    assert len(mounts) == 2 and all("mount=" in e.path and e.status == 201 for e in mounts)
    assert proxy.requests("PATCH") == [] and proxy.requests("GET", r"/blobs/") == []
    assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]


def test_refused_mount_uploads_through_the_session_it_opened(reg, proxy):
    """A 202 to a mount (the blob is not in `from`) opened an upload session: it is used, not leaked."""
    src_repo, dst_repo = name(), name()
    data = b"not mountable from an empty repository"
    digest = reg.push_blob(src_repo, data)
    c = Client(proxy.host)
    location = c.reg.mount_blob(dst_repo, digest, from_repo=name())
    assert location and location.startswith(proxy.url)                   # Location rewritten to the proxy
    c.reg.upload_stream(dst_repo, Descriptor("application/octet-stream", digest, len(data)), [data], location)
    assert reg.get_blob(dst_repo, digest) == data
    assert [e.method for e in proxy.log] == ["POST", "PATCH", "PUT"]
    assert [e.status for e in proxy.log] == [202, 202, 201]


def test_reset_mid_blob_upload_is_retried(reg, proxy, direct_host):
    """The connection is reset after 64 KiB of the layer's PATCH: the registry cannot say what the session holds,
    so the session is cancelled, the blob uploaded again from the start, and the copy completes with the right
    bytes."""
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=big_payload())
    sizes = blob_sizes(reg, src_repo, image["digest"])
    layer = image_layer(reg, src_repo, image)
    proxy.reset("PATCH", r"/blobs/uploads/", after=64 * 1024, content_length=sizes[layer])
    dst = Client(proxy.host)
    # one blob at a time, so the proxy log has one order to check (parallel copies: see below)
    _, stats = registry_copy.copy_image(Client(direct_host).reg, src_repo, "v1", dst.reg, dst_repo, tags=("v1",),
                                   parallel=1)
    assert stats.copied_blobs == 2 and stats.copied_bytes == sum(sizes.values())
    layer_patches = proxy.requests("PATCH")
    resets = [e for e in layer_patches if e.action == "reset"]
    assert len(resets) == 1 and resets[0].request_bytes == 64 * 1024
    assert [e.status for e in layer_patches if e.content_length == sizes[layer]] == [None, 202]
    # by start time: the proxy logs the reset when its handler ends, which under load can be after the
    # client, seeing the RST, already sent its DELETE (one blob at a time: nothing else goes through it)
    after_reset = sorted((e for e in proxy.log if e.start > resets[0].start), key=lambda e: e.start)
    # the session's status asked (distribution 2.8 cannot say what a cut session holds), then cancelled
    assert [(e.method, "/blobs/uploads/" in e.path) for e in after_reset[:2]] == [("GET", True), ("DELETE", True)]
    assert after_reset[0].status in (400, 404)
    assert len(dst.sleeps) == 1
    assert hashlib.sha256(reg.get_blob(dst_repo, layer)).hexdigest() == layer.split(":")[1]
    assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]


def test_reset_mid_blob_download_is_retried(reg, proxy, direct_host):
    """The source connection is reset mid-GET of the layer: the short stream is never committed."""
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=big_payload())
    layer = image_layer(reg, src_repo, image)
    proxy.reset("GET", rf"/blobs/{layer}$", after=100_000, on="response")
    src = Client(proxy.host)
    _, stats = registry_copy.copy_image(src.reg, src_repo, "v1", Client(direct_host).reg, dst_repo, tags=("v1",),
                                   parallel=1)
    assert stats.copied_blobs == 2
    gets = proxy.requests("GET", rf"/blobs/{layer}$")
    assert [(e.action, e.status) for e in gets] == [("reset", None), ("forward", 200)]
    assert gets[0].response_bytes == 100_000
    assert hashlib.sha256(reg.get_blob(dst_repo, layer)).hexdigest() == layer.split(":")[1]
    assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]


def test_persistent_upload_failure_raises_and_pushes_no_manifest(reg, proxy, direct_host):
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=b"never arrives")
    proxy.respond("PATCH", r"/blobs/uploads/", 500, count=None)
    dst = Client(proxy.host, attempts=3)
    stats = CopyStats()
    with pytest.raises(TransientError, match=r"copy blob sha256:\S+: failed after 3 attempts: PATCH blob .*HTTP 500"):
        registry_copy.copy_image(Client(direct_host).reg, src_repo, "v1", dst.reg, dst_repo, tags=("v1",), stats=stats,
                            parallel=1)
    assert len(proxy.requests("PATCH")) == 3
    assert len(proxy.requests("DELETE", r"/blobs/uploads/")) == 3      # every failed session cancelled
    assert proxy.requests("PUT") == []                                  # no blob commit, no manifest, no tag
    assert reg.head_manifest(dst_repo, image["digest"]) is None and reg.tags(dst_repo) in (None, [])
    assert stats.copied_blobs == 0


# --------------------------------------------------------------------------- the proxy itself


def test_proxy_stop_joins_its_threads(registry_url):
    import threading

    before = {t for t in threading.enumerate() if t.name.startswith("FaultProxy")}
    with FaultProxy(registry_url) as p:
        p.delay("GET", r"^/v2/$", 0.2)
        c = Client(p.host)
        c.reg.session.get(p.url + "/v2/", timeout=5).raise_for_status()   # a kept-alive connection stays open
        host, port = p.host.split(":")
        assert host == "127.0.0.1"
        assert [(e.action, e.status) for e in p.log] == [("delay", 200)] and p.log[0].end - p.log[0].start >= 0.2
    assert not p.errors
    left = {t for t in threading.enumerate() if t.name.startswith("FaultProxy")} - before
    assert not left, left
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()


# --------------------------------------------------------------------------- small blobs (image configs)


def test_read_blob_retries_5xx(reg, proxy):
    """`read_blob` reads image configs (publish verifies each staging image's architecture with it): a
    transient 503 is retried like every other read, not a failed publish."""
    repo = name()
    data = b'{"architecture": "arm64", "os": "linux"}'
    digest = reg.push_blob(repo, data)
    proxy.respond("GET", rf"/blobs/{digest}$", 503)
    c = Client(proxy.host)
    assert c.reg.read_blob(repo, digest) == data
    assert [e.status for e in proxy.requests("GET")] == [503, 200] and c.sleeps == [0.5]


def test_read_blob_reset_mid_body_is_a_transient_registry_error(reg, proxy):
    """A connection reset in the middle of a config blob is retried; were it not, it must at least be a
    RegistryError (one line, exit 12), never an unhandled urllib3 exception (a traceback)."""
    repo = name()
    data = json.dumps({"architecture": "amd64", "os": "linux", "pad": "x" * 200_000}).encode()
    digest = reg.push_blob(repo, data)
    proxy.reset("GET", rf"/blobs/{digest}$", after=100_000, on="response")
    c = Client(proxy.host)
    assert c.reg.read_blob(repo, digest) == data
    assert [(e.action, e.status) for e in proxy.requests("GET")] == [("reset", None), ("forward", 200)]


def test_long_blob_copies_report_progress():
    """A blob that streams for longer than a moment says how far it is (bytes of total), at most once per period."""
    lines: list[str] = []
    desc = Descriptor("application/octet-stream", "sha256:" + "a" * 64, 3_000_000)
    ticks = iter([0.0, 6.0, 7.0, 12.5])
    real = registry_copy.time.monotonic
    registry_copy.time.monotonic = lambda: next(ticks)
    try:
        out = list(registry_copy._with_progress([b"x" * 1_000_000] * 3, desc, lines.append, every=5.0))
    finally:
        registry_copy.time.monotonic = real
    assert b"".join(out) == b"x" * 3_000_000
    assert lines == ["  ...    sha256:aaaaaaaaaaaa 1.0 of 3.0 MB (0.2 MB/s)",
                     "  ...    sha256:aaaaaaaaaaaa 3.0 of 3.0 MB (0.2 MB/s)"]


def test_blobs_of_one_image_are_copied_in_parallel(reg, proxy, direct_host):
    """With every PATCH held for 1.5 s, two blobs copied at once are both in the proxy's hands at the same time,
    with the same result as one at a time; parallel=1 sends the second only after the first is done. Read from
    the proxy's log, not from the wall clock, which a loaded machine stretches."""
    src_repo = name()
    image = reg.push_image(src_repo, "v1", architecture="amd64", payload=big_payload(150_000))
    sizes = blob_sizes(reg, src_repo, image["digest"])
    # Held long enough for the second blob's HEAD and POST to come in beside the first PATCH on a loaded machine.
    proxy.delay("PATCH", r"/blobs/uploads/", 1.5, count=None)
    overlapped = {}
    for parallel in (4, 1):
        dst_repo = name()
        proxy.clear_log()
        _, stats = registry_copy.copy_image(Client(direct_host).reg, src_repo, "v1", Client(proxy.host).reg, dst_repo,
                                            tags=("v1",), parallel=parallel)
        assert (stats.copied_blobs, stats.copied_bytes) == (2, sum(sizes.values()))
        assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]
        first, second = sorted(proxy.requests("PATCH"), key=lambda entry: entry.start)
        overlapped[parallel] = second.start < first.end
    assert overlapped == {4: True, 1: False}


# --------------------------------------------------------------------------- digest checks without a local hash


def test_corrupt_bytes_are_refused_by_the_target_as_digest_mismatch(reg, proxy):
    """ghbuild does not hash what it streams: the target does (PUT ?digest=). Bytes of the right size that
    hash to something else are refused with DIGEST_INVALID, which is a DigestMismatch (a RegistryError, not
    retried); the upload session is cancelled and the target holds no blob under that digest."""
    repo = name()
    data = big_payload(300_000)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    corrupt = data[:1000] + bytes([data[1000] ^ 0xFF]) + data[1001:]
    c = Client(proxy.host)
    with pytest.raises(DigestMismatch, match="DIGEST_INVALID"):
        c.reg.upload_stream(repo, Descriptor("application/octet-stream", digest, len(data)), [corrupt])
    # distribution drops the session itself after DIGEST_INVALID, so the best-effort DELETE may find it gone
    assert [(e.method, e.status) for e in proxy.log][:3] == [("POST", 202), ("PATCH", 202), ("PUT", 400)]
    assert [e.method for e in proxy.log][3:] == ["DELETE"] and proxy.log[3].status in (204, 404)
    assert proxy.log[1].request_bytes == len(data)
    assert reg.get_blob(repo, digest) is None
    assert c.sleeps == []


def test_copy_of_a_source_serving_wrong_bytes_fails_and_pushes_nothing(reg, proxy, direct_host):
    """The layer's bytes are altered in flight from the source: the copy fails with DigestMismatch at once
    (one PATCH, no retry), no manifest or tag reaches the target, and the failed session is cancelled."""
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=big_payload())
    layer = image_layer(reg, src_repo, image)
    src = Client(direct_host).reg
    real_open = src.open_blob

    def open_corrupted(repo: str, digest: str):
        resp = real_open(repo, digest)
        if digest == layer:
            stream = resp.raw.stream

            def flipped(amt, decode_content=None):
                for i, chunk in enumerate(stream(amt, decode_content=decode_content)):
                    yield bytes([chunk[0] ^ 1]) + chunk[1:] if i == 0 else chunk

            resp.raw.stream = flipped
        return resp

    src.open_blob = open_corrupted
    dst = Client(proxy.host)
    with pytest.raises(DigestMismatch, match=layer[:19]):
        registry_copy.copy_image(src, src_repo, "v1", dst.reg, dst_repo, tags=("v1",), parallel=1)
    layer_puts = [e for e in proxy.requests("PUT", r"/blobs/uploads/") if layer.split(":")[1] in e.path]
    assert [e.status for e in layer_puts] == [400] and dst.sleeps == []
    assert proxy.requests("PUT", r"/manifests/") == []
    assert proxy.requests("DELETE", r"/blobs/uploads/")
    assert reg.get_blob(dst_repo, layer) is None and reg.head_manifest(dst_repo, "v1") is None


def test_source_length_other_than_the_descriptor_fails_before_uploading(reg, proxy, direct_host):
    """A source answering with a Content-Length other than the manifest's size cannot serve that blob:
    DigestMismatch before a single byte goes to the target."""
    src_repo, dst_repo = name(), name()
    data = big_payload(50_000)
    digest = reg.push_blob(src_repo, data)
    stats = CopyStats()
    with pytest.raises(DigestMismatch, match="serves 50000 bytes, the manifest says 50001"):
        registry_copy.copy_blob(Client(direct_host).reg, src_repo, Client(proxy.host).reg, dst_repo,
                           Descriptor("application/octet-stream", digest, len(data) + 1), stats)
    assert [e.method for e in proxy.log] == ["HEAD"] and stats.copied_blobs == 0


def test_a_longer_source_never_sends_more_than_the_declared_length(reg, proxy):
    """Chunks beyond the descriptor's size are not sent (they would be read as the next request on the
    kept-alive connection): the PATCH carries exactly `size` bytes and the upload fails as DigestMismatch."""
    repo = name()
    data = big_payload(100_000)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    c = Client(proxy.host)
    with pytest.raises(DigestMismatch, match="more than the 100000 bytes"):
        c.reg.upload_stream(repo, Descriptor("application/octet-stream", digest, len(data)),
                            [data[:60_000], data[60_000:] + b"trailing junk"])
    patch = proxy.requests("PATCH")
    assert len(patch) == 1 and patch[0].request_bytes == patch[0].content_length == len(data)
    assert [e.method for e in proxy.log] == ["POST", "PATCH", "DELETE"]
    assert reg.get_blob(repo, digest) is None
    # the connection is still good for the next request
    assert c.reg.blob_exists(repo, digest) is False


def test_copy_does_not_hash_the_streamed_blob_locally(reg, proxy, direct_host, monkeypatch):
    """The target verifies the digest, so the copy spends no CPU hashing layer bytes (only the small
    manifests are hashed, to check what the source sent)."""
    src_repo, dst_repo = name(), name()
    image = reg.push_image(src_repo, "v1", payload=big_payload(400_000))
    sizes = blob_sizes(reg, src_repo, image["digest"])
    hashed = []
    real = hashlib.sha256

    def counting_sha256(data: bytes = b""):
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    _, stats = registry_copy.copy_image(Client(direct_host).reg, src_repo, "v1", Client(proxy.host).reg, dst_repo,
                                   tags=("v1",))
    assert stats.copied_bytes == sum(sizes.values()) > 400_000
    assert sum(hashed) < 10_000, hashed
    assert reg.head_manifest(dst_repo, "v1")[0] == image["digest"]
