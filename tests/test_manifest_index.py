"""The indexes publishing writes (ghbuild.registry.manifest.make_index): bytes, entry annotations, reading back."""

from __future__ import annotations

import json

from ghbuild.registry.manifest import Descriptor, Manifest, make_index, sha256_digest
from ghbuild.registry.mediatypes import MT_DOCKER_LIST, MT_DOCKER_MANIFEST, MT_OCI_INDEX, MT_OCI_MANIFEST

CREATED = {"org.opencontainers.image.created": "2026-12-04T21:00:00.123456789Z"}


def entry(media_type: str, arch: str, annotations=None) -> Descriptor:
    return Descriptor(media_type, "sha256:" + arch[0] * 64, 500, {"os": "linux", "architecture": arch}, annotations)


def test_an_oci_index_carries_each_entry_s_created_time_and_reads_it_back():
    raw, media_type = make_index([entry(MT_OCI_MANIFEST, "amd64", CREATED), entry(MT_OCI_MANIFEST, "arm64")])
    assert media_type == MT_OCI_INDEX
    entries = json.loads(raw)["manifests"]
    assert entries[0]["annotations"] == CREATED and "annotations" not in entries[1]
    children = Manifest(raw, media_type, sha256_digest(raw)).platforms()
    assert children["linux/amd64"].annotations == CREATED and children["linux/arm64"].annotations is None


def test_a_docker_manifest_list_has_no_annotations_it_could_not_carry():
    raw, media_type = make_index([entry(MT_DOCKER_MANIFEST, "amd64", CREATED), entry(MT_DOCKER_MANIFEST, "arm64")])
    assert media_type == MT_DOCKER_LIST
    assert all("annotations" not in e for e in json.loads(raw)["manifests"])


def test_the_same_children_and_times_make_the_same_index_bytes():
    """The index is content-addressed: a rerun of a publish must push the digest it pushed before."""
    children = [entry(MT_OCI_MANIFEST, "amd64", dict(CREATED)), entry(MT_OCI_MANIFEST, "arm64", dict(CREATED))]
    assert make_index(children) == make_index(list(children))
