"""Pure: what BuildKit's provenance attestation says about an image, and whether it names the right build.

buildx stores, beside each platform image, an attestation manifest (platform `unknown/unknown`, annotated
`vnd.docker.reference.type=attestation-manifest` and `vnd.docker.reference.digest=<the image>`) whose layers
are in-toto statements. The provenance statement's subject is the image; the source repository and commit are
the build's source and revision labels as BuildKit recorded its parameters (mode=max), else BuildKit's VCS
metadata (from the build context's git checkout).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ghbuild.sign.policy import LABEL_REVISION, LABEL_SOURCE

PROVENANCE_TYPES = ("https://slsa.dev/provenance/v0.2", "https://slsa.dev/provenance/v1")
IN_TOTO_LAYER = "application/vnd.in-toto+json"
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
REFERENCE_DIGEST = "vnd.docker.reference.digest"
REFERENCE_TYPE = "vnd.docker.reference.type"
ATTESTATION_MANIFEST = "attestation-manifest"
BUILDKIT_METADATA = "https://mobyproject.org/buildkit@v1#metadata"


class Claims(NamedTuple):
    """What one provenance statement claims."""

    subjects: frozenset[str]       # the image digests it is about
    source: str | None             # the source repository's URL
    revision: str | None           # the commit


def attestations(index: Mapping[str, Any]) -> dict[str, str]:
    """image digest -> its attestation manifest's digest, from an index's entries."""
    found = {}
    for entry in index.get("manifests") or []:
        notes = entry.get("annotations") or {}
        if notes.get(REFERENCE_TYPE) == ATTESTATION_MANIFEST and notes.get(REFERENCE_DIGEST):
            found[str(notes[REFERENCE_DIGEST])] = str(entry.get("digest"))
    return found


def provenance_layers(attestation: Mapping[str, Any]) -> list[str]:
    """The digests of an attestation manifest's provenance statements."""
    return [str(layer.get("digest")) for layer in attestation.get("layers") or []
            if layer.get("mediaType") == IN_TOTO_LAYER
            and (layer.get("annotations") or {}).get(PREDICATE_ANNOTATION) in PROVENANCE_TYPES]


def claims(statement: Mapping[str, Any]) -> Claims:
    predicate = statement.get("predicate") or {}
    subjects = frozenset(f"sha256:{s['digest']['sha256']}" for s in statement.get("subject") or []
                         if isinstance((s.get("digest") or {}).get("sha256"), str))
    if statement.get("predicateType") == PROVENANCE_TYPES[1]:
        metadata = ((predicate.get("runDetails") or {}).get("metadata") or {}).get(BUILDKIT_METADATA) or {}
        args = (((predicate.get("buildDefinition") or {}).get("externalParameters") or {}).get("request")
                or {}).get("args") or {}
    else:
        metadata = (predicate.get("metadata") or {}).get(BUILDKIT_METADATA) or {}
        args = ((predicate.get("invocation") or {}).get("parameters") or {}).get("args") or {}
    # The source and revision labels ghbuild asked BuildKit to stamp, as BuildKit recorded the request (mode=max);
    # else (mode=min) buildx's VCS metadata of the checkout (which a dirty tree marks `-dirty`).
    vcs = metadata.get("vcs") or {}
    source = args.get(f"label:{LABEL_SOURCE}") or vcs.get("source")
    revision = args.get(f"label:{LABEL_REVISION}") or vcs.get("revision")
    return Claims(subjects, str(source) if source else None, str(revision) if revision else None)


def same_repository(a: str, b: str) -> bool:
    """Two spellings of one repository URL (a `.git` suffix, a trailing slash, case, scp-like git@host:path)."""
    def norm(url: str) -> str:
        url = re.sub(r"^git@([^:]+):", r"https://\1/", url.strip())
        url = re.sub(r"^(ssh|git)://(git@)?", "https://", url)
        return url.rstrip("/").removesuffix(".git").lower()
    return norm(a) == norm(b)


def problem(found: Claims, image: str, source_url: str, sha: str) -> str | None:
    """Why this provenance does not name `image` as built from `sha` of `source_url`; None when it does."""
    if image not in found.subjects:
        return f"its provenance is about {', '.join(sorted(found.subjects)) or 'no image'}, not {image}"
    if not found.source or not same_repository(found.source, source_url):
        return f"its provenance names the source {found.source or '(none)'}, not {source_url}"
    if found.revision != sha:
        return f"its provenance names the commit {found.revision or '(none)'}, not {sha}"
    return None
