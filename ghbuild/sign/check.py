"""The one check publish (before its first write) and `ghbuild verify` share: an image's signature, the
repository and commit it was signed for, and its provenance, read from the registry that holds it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.errors import InvalidReferenceError, RegistryError, TransientError, UsageError, VerificationError
from ghbuild.registry.client import Registry, client_factory
from ghbuild.sign import policy, provenance
from ghbuild.sign.cosign import Cosign
from ghbuild.sign.policy import LABEL_REVISION, LABEL_SOURCE, Verifier, signed_annotations


class Verified(NamedTuple):
    ref: str                       # host/repository@digest
    source: str
    revision: str
    platforms: tuple[str, ...]     # the platform images whose provenance was checked
    signer: str = ""               # who signed: the key, or the keyless certificate's identity


def signed_commit(payloads: list[dict[str, Any]], source_url: str) -> str | None:
    """The commit a verified signature of `source_url` was made for (its signed annotations)."""
    for payload in payloads:
        optional = payload.get("optional") or {}
        if provenance.same_repository(str(optional.get(LABEL_SOURCE) or ""), source_url):
            revision = optional.get(LABEL_REVISION)
            if isinstance(revision, str) and revision:
                return revision
    return None


def _statement(reg: Registry, repo: str, digest: str) -> dict[str, Any]:
    try:
        data = json.loads(reg.read_blob(repo, digest))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise VerificationError(f"{reg.host}/{repo}@{digest}: not an in-toto statement")
    return data


def check_provenance(reg: Registry, repo: str, digest: str, source_url: str, sha: str) -> tuple[str, ...]:
    """Every platform image of the index `digest` has BuildKit provenance naming `sha` of `source_url`; returns
    the platforms checked. A plain image manifest carries none: refused, as an index without attestations."""
    where = f"{reg.host}/{repo}@{digest}"
    manifest = reg.get_manifest(repo, digest)
    if not manifest.is_index:
        raise VerificationError(f"{where}: no provenance (a single image manifest, built without attestations)")
    attested = provenance.attestations(manifest.data)
    checked = []
    for platform, child in sorted(manifest.platforms().items()):
        attestation = attested.get(child.digest)
        if attestation is None:
            raise VerificationError(f"{where}: {platform} ({child.digest}) has no provenance attestation")
        layers = provenance.provenance_layers(reg.get_manifest(repo, attestation).data)
        if not layers:
            raise VerificationError(f"{where}: {platform}'s attestation {attestation} holds no provenance")
        for layer in layers:
            why = provenance.problem(provenance.claims(_statement(reg, repo, layer)), child.digest, source_url, sha)
            if why:
                raise VerificationError(f"{where}: {platform}: {why}")
        checked.append(platform)
    if not checked:
        raise VerificationError(f"{where}: an index without platform images")
    return tuple(checked)


def verify_image(reg: Registry, repo: str, digest: str, verifier: Verifier, source_url: str, sha: str | None,
                 cosign: Cosign, provenance_required: bool = True) -> Verified:
    """The signature of `repo@digest` on `reg` verifies (made for `source_url`, and `sha` when given: else the
    commit it was signed for is taken), and its provenance names that commit of `source_url`. `sha` is the
    signed revision annotation, not the keyless certificate's commit (a release of an older commit is signed by
    a run at the branch head)."""
    ref = f"{reg.host}/{repo}@{digest}"
    wanted: Mapping[str, str] = (signed_annotations(source_url, sha) if sha
                                 else {LABEL_SOURCE: source_url.rstrip("/")})
    signature = cosign.verify(ref, verifier, wanted)
    revision = sha or signed_commit(signature.payloads, source_url)
    if not revision:
        raise VerificationError(f"{ref}: its signature names no commit of {source_url}")
    try:
        platforms = (check_provenance(reg, repo, digest, source_url, revision) if provenance_required
                     else ())
    except RegistryError as exc:
        raise VerificationError(f"{ref}: provenance unreadable: {exc}") from None
    return Verified(ref, source_url, revision, platforms, signature.signer)


def sign_image(ref: str, source_url: str, sha: str, env: Mapping[str, str], cosign: Cosign | None = None) -> str:
    """Sign `ref` (host/repository@digest) for commit `sha` of `source_url` as this run may (ghbuild.sign.policy);
    returns the signing mode (`none` when this run has no way to sign)."""
    signer = policy.signer(env)
    if signer.signs:
        (cosign or Cosign(env)).sign(ref, signer, signed_annotations(source_url, sha))
    return signer.mode


def checked_reference(reference: str) -> tuple[str, str, str]:
    """(host, repository, tag or digest) of an image reference `ghbuild verify` was given, else UsageError:
    nothing malformed reaches the network."""
    host, repo, ref = naming.split_reference(reference)
    name = reference.partition("@")[0]
    problem = None
    try:
        naming.validate_repository(name[: name.rfind(":")] if name.rfind(":") > name.rfind("/") else name, "")
    except InvalidReferenceError as exc:
        problem = str(exc)
    if not problem and not (naming.DIGEST_RE.match(ref) if "@" in reference else naming.TAG_RE.match(ref)):
        problem = f"{ref!r} is not a valid {'digest (sha256:<64 hex>)' if '@' in reference else 'tag'}"
    if problem:
        raise UsageError(f"verify: {reference!r} is not an image reference (host/repository:tag or "
                         f"host/repository@sha256:<64 hex>): {problem}")
    return host, repo, ref


def verify_reference(reference: str, repository: str, env: Mapping[str, str], key: str | None = None,
                     sha: str | None = None, server_url: str = "https://github.com",
                     branch: str | None = None) -> Verified:
    """`ghbuild verify`: a published image (a tag or a digest) signed for `repository`'s canonical URL, by
    `key` (else GHBUILD_VERIFY_KEY or keyless: a push, schedule or dispatch run of its stable `branch`), with
    provenance naming the commit it was signed for (`sha`, when given, must be that commit)."""
    host, repo, ref = checked_reference(reference)
    reg = client_factory(env, lambda m: None)(host)
    try:
        found = reg.resolve(repo, ref)
    except TransientError as exc:
        raise VerificationError(f"{reference}: not verified: the registry {host} could not be reached: {exc}") \
            from None
    except RegistryError as exc:
        raise VerificationError(f"{reference}: {exc}") from None
    if found is None:
        raise VerificationError(f"{reference}: no such image")
    verifier = policy.verifier(env, repository, key, keyless=True, branch=branch, server_url=server_url)
    return verify_image(reg, repo, found.digest, verifier, policy.source_url(server_url, repository), sha,
                        Cosign(env))
