"""Descriptors and manifests as the registry layer holds them: the exact bytes, their digest and media type."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ghbuild.registry.mediatypes import INDEX_TYPES, MT_DOCKER_LIST, MT_DOCKER_MANIFEST, MT_OCI_INDEX, NON_DISTRIBUTABLE


class Descriptor(NamedTuple):
    media_type: str
    digest: str
    size: int
    platform: dict | None = None
    annotations: Mapping[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.platform:
            d["platform"] = self.platform
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        return d


class Manifest(NamedTuple):
    raw: bytes                 # the exact bytes: re-serialising JSON changes the digest
    media_type: str
    digest: str

    @property
    def data(self) -> dict:
        return json.loads(self.raw)

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def children(self) -> list[Descriptor]:
        """Index entries with platforms; attestation entries (platform unknown/unknown) are kept too."""
        return [Descriptor(m["mediaType"], m["digest"], m["size"], m.get("platform"),
                           m["annotations"] if isinstance(m.get("annotations"), dict) else None)
                for m in self.data.get("manifests", [])]

    def platforms(self) -> dict[str, Descriptor]:
        """'linux/arm64/v8' -> child descriptor, skipping BuildKit attestation manifests (unknown/unknown)."""
        out = {}
        for c in self.children():
            p = c.platform or {}
            if p.get("os") == "unknown" or p.get("architecture") == "unknown":
                continue
            key = "/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x)
            out[key] = c
        return out

    def blobs(self) -> list[Descriptor]:
        d = self.data
        return [Descriptor(b["mediaType"], b["digest"], b["size"])
                for b in [d["config"], *d.get("layers", [])]
                if b.get("mediaType") not in NON_DISTRIBUTABLE and not b.get("urls")]


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_index(children: list[Descriptor]) -> tuple[bytes, str]:
    """A manifest list for Docker schema2 children, an OCI index otherwise (never mixed). Entry annotations go
    only into an OCI index: Docker's manifest list has no such field."""
    if not children or any(not c.platform for c in children):
        raise ValueError("every index entry needs a platform")
    docker = all(c.media_type == MT_DOCKER_MANIFEST for c in children)
    mt = MT_DOCKER_LIST if docker else MT_OCI_INDEX
    entries = [(c._replace(annotations=None) if docker else c).as_json() for c in children]
    doc = {"schemaVersion": 2, "mediaType": mt, "manifests": entries}
    return json.dumps(doc, indent=3).encode(), mt
