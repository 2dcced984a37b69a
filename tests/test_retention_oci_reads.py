"""How the plain-registry retention backend (ghbuild.retention.oci.OciBackend) reads a repository of many tags:
side by side on clients of their own, at most `readers` at once, each digest once, and never a partial list.
The registry is an in-memory stand-in for ghbuild.registry.client.Registry (the same methods and errors); the
real registry runs in tests/services/registry/test_retention_backends.py."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from ghbuild.errors import PruneError, RegistryError
from ghbuild.registry.manifest import Manifest
from ghbuild.registry.mediatypes import MT_OCI_INDEX, MT_OCI_MANIFEST
from ghbuild.retention import PruneResult, prune
from ghbuild.retention.oci import OciBackend
from ghbuild.retention.plan import nightly_pattern

BASE = datetime(2025, 1, 1, tzinfo=UTC)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class MemoryRegistry:
    """Tags, manifests and blobs in dicts; every read counted, and how many ran at once."""

    def __init__(self, delay: float = 0.0):
        self.tags: dict[str, str] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.blobs: dict[str, bytes] = {}
        self.reads: Counter[str] = Counter()
        self.delay, self.running, self.most, self.clones = delay, 0, 0, 0
        self.fail: set[str] = set()
        self.lock = threading.Lock()

    def clone(self) -> MemoryRegistry:
        with self.lock:
            self.clones += 1
        return self

    def _read(self, key: str) -> None:
        with self.lock:
            self.reads[key] += 1
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.delay)
        with self.lock:
            self.running -= 1
        if key in self.fail:
            raise RegistryError(f"GET manifest {key}: HTTP 500")

    def put(self, data: dict, media_type: str, tag: str | None = None) -> str:
        raw = json.dumps(data).encode()
        digest = digest_of(raw)
        self.manifests[digest] = (raw, media_type)
        if tag:
            self.tags[tag] = digest
        return digest

    def list_tags(self, repo: str) -> list[str]:
        return list(self.tags)

    def get_manifest(self, repo: str, ref: str) -> Manifest:
        self._read(ref)
        digest = self.tags.get(ref, ref)
        if digest not in self.manifests:
            raise RegistryError(f"GET manifest {repo}:{ref}: HTTP 404 MANIFEST_UNKNOWN")
        raw, media_type = self.manifests[digest]
        return Manifest(raw, media_type, digest)

    def read_blob(self, repo: str, digest: str) -> bytes:
        self._read(digest)
        return self.blobs[digest]

    def delete_manifest(self, repo: str, digest: str) -> bool:
        return self.manifests.pop(digest, None) is not None


def push_commit(reg: MemoryRegistry, n: int) -> str:
    sha = f"{n:040x}"
    children = []
    for arch in ("amd64", "arm64"):
        config = json.dumps({"created": (BASE + timedelta(hours=n)).isoformat(), "architecture": arch}).encode()
        reg.blobs[digest_of(config)] = config
        image = {"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                 "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest_of(config),
                            "size": len(config)}, "layers": []}
        suffix = "x86_64" if arch == "amd64" else "arm64"
        digest = reg.put(image, MT_OCI_MANIFEST, f"nightly-{sha}-{suffix}")
        children.append({"mediaType": MT_OCI_MANIFEST, "digest": digest, "size": 1,
                         "platform": {"os": "linux", "architecture": arch}})
    return reg.put({"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": children}, MT_OCI_INDEX,
                   f"nightly-{sha}")


def backend(reg: MemoryRegistry, readers: int) -> OciBackend:
    return OciBackend(reg, "127.0.0.1:5000/acme/app", "acme/app", nightly_pattern("nightly", ("x86_64", "arm64")),
                      readers=readers)


def repository(commits: int, delay: float = 0.0) -> MemoryRegistry:
    reg = MemoryRegistry(delay)
    for n in range(commits):
        push_commit(reg, n)
    return reg


def test_side_by_side_reads_list_the_same_tags_as_one_at_a_time():
    one, many = backend(repository(20), readers=1), backend(repository(20), readers=8)
    serial, parallel = one.list_tags(), many.list_tags()
    assert len(serial) == 60 and sorted(parallel, key=str) == sorted(serial, key=str)
    assert sum(t.pushed is not None for t in parallel) == 60 and sum(bool(t.children) for t in parallel) == 20


def test_reads_are_bounded_and_each_digest_is_read_once():
    reg = repository(30, delay=0.002)
    listed = backend(reg, readers=4).list_tags()
    assert len(listed) == 90
    assert 1 < reg.most <= 4            # side by side, never more than asked
    assert reg.clones <= 4
    by_digest = [key for key in reg.reads if key.startswith("sha256:")]
    assert by_digest and all(reg.reads[key] == 1 for key in by_digest)     # configs: content-addressed, once
    assert all(reg.reads[tag] == 1 for tag in reg.tags)                     # each tag's manifest once


def test_one_failed_read_fails_the_listing_rather_than_give_a_partial_one():
    reg = repository(10)
    reg.fail.add(f"nightly-{5:040x}-arm64")
    with pytest.raises(PruneError, match=r"listing failed: GET manifest .*HTTP 500; refusing to prune from a partial"):
        backend(reg, readers=4).list_tags()


def test_the_listing_before_each_delete_reads_only_the_tags_again():
    reg = repository(6)
    oci = backend(reg, readers=4)
    result = prune(oci, PruneResult("app", oci.repository, oci.name, None, False, 3), apply=True, pace=0,
                   log=lambda message: None, sleep=lambda seconds: None)
    assert result.ok and len(result.deleted) == 9      # 3 commits: an index and its two images each
    assert all(reg.reads[key] == 1 for key in reg.reads if key.startswith("sha256:"))


def test_ghcr_reads_what_its_indexes_refer_to_side_by_side_each_once():
    from ghbuild.retention.ghcr import GhcrClient

    reg = repository(12, delay=0.002)
    indexes = [reg.tags[f"nightly-{n:040x}"] for n in range(12)]
    serial = GhcrClient("https://api.github.com", token="t", owner="acme", package="app", registry=reg, readers=1)
    parallel = GhcrClient("https://api.github.com", token="t", owner="acme", package="app", registry=reg, readers=4)
    parallel.read_children(indexes)
    assert 1 < reg.most <= 4
    reads = Counter(reg.reads)
    assert all(count == 1 for count in reads.values()) and len(reads) == 12 * 3    # indexes and their images
    assert [parallel.children(d) for d in indexes] == [serial.children(d) for d in indexes]
    assert all(len(parallel.children(d)) == 2 for d in indexes)


def annotate(reg: MemoryRegistry, index_tag: str, times: dict[str, str | None]) -> None:
    """Re-push the index tagged `index_tag` with each entry's `created` annotation, as ghbuild publish writes it
    (arch -> its time; None: no annotation on that entry)."""
    raw, media_type = reg.manifests[reg.tags[index_tag]]
    doc = json.loads(raw)
    for entry in doc["manifests"]:
        when = times.get(entry["platform"]["architecture"])
        if when is not None:
            entry["annotations"] = {"org.opencontainers.image.created": when}
    reg.put(doc, media_type, index_tag)


def config_reads(reg: MemoryRegistry) -> int:
    return sum(n for key, n in reg.reads.items() if key in reg.blobs)


def test_times_in_the_index_entries_save_every_config_read():
    plain, annotated = repository(10), repository(10)
    for n in range(10):
        when = (BASE + timedelta(hours=n)).isoformat()
        annotate(annotated, f"nightly-{n:040x}", {"amd64": when, "arm64": when})
    from_configs, from_entries = backend(plain, readers=4).list_tags(), backend(annotated, readers=4).list_tags()
    assert config_reads(plain) == 20 and config_reads(annotated) == 0
    times = {t.name: t.pushed for t in from_configs}
    assert {t.name: t.pushed for t in from_entries} == times and None not in times.values()


def test_an_entry_without_a_usable_time_falls_back_to_its_config():
    reg = repository(3)
    real = (BASE + timedelta(hours=0)).isoformat()
    annotate(reg, f"nightly-{0:040x}", {"amd64": real, "arm64": None})                  # one entry unannotated
    annotate(reg, f"nightly-{1:040x}", {"amd64": "yesterday", "arm64": "1970-01-01T00:00:00Z"})   # unusable
    listed = {t.name: t.pushed for t in backend(reg, readers=1).list_tags()}
    assert config_reads(reg) == 1 + 2 + 2      # commit 0's arm64, commit 1's both, commit 2's both
    assert all(listed[f"nightly-{n:040x}"] == BASE + timedelta(hours=n) for n in range(3))
