"""Big blobs (issue: images of vLLM's size): a 1 GiB layer, generated, copied registry to registry with its
upload cut at 60 %. Against the local registry (distribution 2.8.2, which refuses a session whose stored size is
not the client's last offset, and keeps its bytes) the copy sends the blob again whole, once, and says so;
against a registry that answers the upload's status (distribution 3's protocol, tests/fakes/resumable_registry.py)
it resumes from what the registry holds and sends almost nothing twice. Memory stays bounded either way."""

from __future__ import annotations

import hashlib
import os
import resource
import uuid

import pytest
from fakes.faultproxy import FaultProxy, in_flight_limit
from fakes.oci import RegistryClient
from fakes.resumable_registry import ResumableRegistry

from ghbuild.registry.client import Registry
from ghbuild.registry.copy import CHUNK, CopyStats, copy_blob
from ghbuild.registry.manifest import Descriptor

GIB = 1 << 30
CUT = 0.6


def generated_blob(reg: RegistryClient, repo: str, size: int, tmp_path) -> Descriptor:
    """`size` incompressible bytes pushed to `repo` (through a file, deleted again: nothing stored)."""
    path, hasher = tmp_path / "blob", hashlib.sha256()
    with path.open("wb") as out:
        for _ in range(size >> 20):
            data = os.urandom(1 << 20)
            hasher.update(data)
            out.write(data)
    digest = "sha256:" + hasher.hexdigest()
    with path.open("rb") as body:
        reg.upload_blob(repo, digest, body, size)
    path.unlink()
    return Descriptor("application/vnd.oci.image.layer.v1.tar", digest, size)


@pytest.fixture(scope="module")
def big(registry_url, tmp_path_factory):
    reg = RegistryClient(registry_url.removeprefix("http://"), timeout=300)
    repo = f"t/big-{uuid.uuid4().hex[:8]}"
    yield repo, generated_blob(reg, repo, GIB, tmp_path_factory.mktemp("big"))
    reg.close()


@pytest.fixture(scope="module")
def slack() -> int:
    """Bytes the client may have handed its socket past the cut. On a host whose loopback buffers could hold a
    good part of the blob, these tests could not tell a resumed upload from one sent again: they say so."""
    bound = in_flight_limit(CHUNK)
    assert bound < GIB * (1 - CUT) / 4, f"loopback buffers up to {bound >> 20} MiB: too large for a 1 GiB blob"
    return bound


def client(host: str, logs: list[str]) -> Registry:
    return Registry(host, attempts=3, delay=0.1, sleep=lambda seconds: None, log=logs.append)


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_a_gib_layer_cut_at_60_percent_is_sent_again_whole_once_where_the_registry_cannot_resume(
        big, registry_url, reg, slack):
    repo, desc = big
    logs: list[str] = []
    with FaultProxy(registry_url) as proxy:
        proxy.reset("PATCH", r"/blobs/uploads/", after=int(desc.size * CUT))
        stats, before = CopyStats(), peak_rss()
        dst_repo = f"t/big-copy-{uuid.uuid4().hex[:8]}"
        copy_blob(client(registry_url.removeprefix("http://"), logs), repo, client(proxy.host, logs), dst_repo,
                  desc, stats)
        grown = peak_rss() - before
        patches = [(e.action, e.status) for e in proxy.requests("PATCH")]
    assert not proxy.errors, proxy.errors
    assert reg.blob_exists(dst_repo, desc.digest)
    assert (stats.copied_blobs, stats.resumed_blobs, stats.resent_blobs) == (1, 0, 1)
    assert patches == [("reset", None), ("forward", 202)]
    assert desc.size * (1 + CUT) <= stats.sent_bytes <= desc.size * (1 + CUT) + slack
    resend = [line for line in logs if line.startswith(f"  resend {desc.digest[:19]} whole: {proxy.host} cannot "
                                                       "resume the cut upload (")]
    assert len(resend) == 1, logs
    assert grown < 100 << 20, f"peak RSS grew by {grown / 1e6:.0f} MB copying a {desc.size >> 20} MiB blob"


def test_a_cut_upload_resumes_from_what_the_registry_holds(big, registry_url, tmp_path, slack):
    repo, desc = big
    logs: list[str] = []
    with ResumableRegistry(tmp_path / "store") as target, FaultProxy(target.url) as proxy:
        proxy.reset("PATCH", r"/blobs/uploads/", after=int(desc.size * CUT))
        stats = CopyStats()
        copy_blob(client(registry_url.removeprefix("http://"), logs), repo, client(proxy.host, logs), "t/copy",
                  desc, stats)
        calls = [(method, status) for method, _, status, _ in target.settled()]
        held = [received for method, _, _, received in target.settled() if method == "PATCH"]
    assert not proxy.errors and not target.errors, (proxy.errors, target.errors)
    assert target.blob(desc.digest).stat().st_size == desc.size       # the PUT checked the digest
    assert calls == [("HEAD", 404), ("POST", 202), ("PATCH", 0), ("GET", 204), ("PATCH", 202), ("PUT", 201)]
    assert sum(held) == desc.size and abs(held[0] - desc.size * CUT) <= slack
    assert (stats.copied_blobs, stats.resumed_blobs, stats.resent_blobs) == (1, 1, 0)
    assert stats.sent_bytes - desc.size <= slack           # re-sent: only what was in flight at the cut
    assert any(line.startswith(f"  resume {desc.digest[:19]} at {held[0]:,} of {desc.size:,} B") for line in logs), logs
