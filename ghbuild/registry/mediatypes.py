"""The manifest and layer media types the registry layer reads, writes and refuses to copy."""

from __future__ import annotations

MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
INDEX_TYPES = (MT_DOCKER_LIST, MT_OCI_INDEX)
# An index entry's creation time (the child's config `created`, verbatim): what a plain registry, which keeps
# no push time, lets retention rank by without reading every config.
ANNOTATION_CREATED = "org.opencontainers.image.created"
IMAGE_TYPES = (MT_DOCKER_MANIFEST, MT_OCI_MANIFEST)
# Every type we understand, and never schema1: without an Accept header distribution converts a schema2
# manifest to a signed schema1 (different digest), and an Accept without the list types makes the registry
# answer a manifest list's tag with one platform's manifest (the amd64 child digest, not the list's).
ACCEPT_MANIFEST = ", ".join((MT_OCI_INDEX, MT_DOCKER_LIST, MT_OCI_MANIFEST, MT_DOCKER_MANIFEST))
# Layers that must not be copied (their blobs live elsewhere, e.g. Windows base layers).
NON_DISTRIBUTABLE = ("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                     "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd")
