"""Publishing's trust step: every recorded staging digest verified before the first write (its signature, the
commit and repository it was signed for, its provenance), and every digest published signed before a tag moves
to it (per-arch images and the indexes, in the publish repository, so `cosign verify` answers there)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ghbuild.errors import VerificationError
from ghbuild.sign import check, policy
from ghbuild.sign.cosign import Cosign

if TYPE_CHECKING:   # annotations only
    from ghbuild.publish.copy import _Prepared


class Signing(NamedTuple):
    verifier: policy.Verifier
    signer: policy.Signer
    source_url: str
    env: Mapping[str, str]
    unattested: frozenset[str] = frozenset()   # images configured without provenance (attest.provenance = off)

    @property
    def cosign(self) -> Cosign:
        return Cosign(self.env)


def for_publish(env: Mapping[str, str], canonical_repository: str | None, source_url: str | None,
                unattested: Collection[str] = (), stable_branch: str | None = None) -> Signing | None:
    """How this publish verifies and signs; None without a canonical source (a dry run without records). A keyless
    signature counts only from a push, schedule or dispatch run of `stable_branch` (ghbuild.sign.policy)."""
    if not source_url:
        return None
    server_url = source_url.rstrip("/").rsplit("/", 2)[0]
    return Signing(policy.verifier(env, canonical_repository, branch=stable_branch, server_url=server_url),
                   policy.signer(env), source_url, env, frozenset(unattested))


def gate(signing: Signing, what: str, dry_run: bool) -> str | None:
    """Before any registry request: a publish that cannot verify or sign is refused in GitHub Actions
    (VerificationError, exit 13), else goes on; returns the warning to show (log and job summary), if any."""
    unchecked = policy.unchecked_publish(signing.env, signing.verifier, signing.signer, what, dry_run)
    if unchecked is None:
        return None
    if unchecked.refuse:
        raise VerificationError(unchecked.message)
    return unchecked.message


def verify_staging(signing: Signing, prepared: list[_Prepared], log: Callable[[str], None]) -> None:
    """Before anything is written: each recorded digest's signature and provenance, else VerificationError; a
    source without a recorded digest is refused (it could only be read from a movable tag). A publish that
    cannot verify has passed `gate` already (and said so)."""
    if not signing.verifier.verifies:
        return
    cosign = signing.cosign
    for prep in prepared:
        for source in prep.plan.sources:
            if not source.digest:
                raise VerificationError(f"{prep.plan.image}: {source.ref}: no recorded digest to verify; only "
                                        "what the trusted build recorded is published")
            done = check.verify_image(prep.src, prep.s_repo, source.digest, signing.verifier, signing.source_url,
                                      prep.plan.sha, cosign, prep.plan.image not in signing.unattested)
            log(f"verified {done.ref}: signed by {done.signer} for {done.revision} of {done.source}"
                + (f", provenance of {', '.join(done.platforms)}" if done.platforms else ""))


def sign_published(signing: Signing, prep: _Prepared, log: Callable[[str], None]) -> None:
    """Sign every digest this image publishes (per-arch, index) where no valid signature of ours is yet (a
    publish that cannot sign has passed `gate` already, and said so)."""
    if not signing.signer.signs:
        return
    cosign = signing.cosign
    annotations = policy.signed_annotations(signing.source_url, prep.plan.sha)
    digests = [*prep.result.arch_digests.values(), prep.result.index_digest or ""]
    for digest in dict.fromkeys(d for d in digests if d):
        ref = f"{prep.dst.host}/{prep.p_repo}@{digest}"
        if signing.verifier.verifies and _signed(cosign, ref, signing.verifier, annotations):
            log(f"signed already: {ref}")
            continue
        cosign.sign(ref, signing.signer, annotations)
        log(f"signed {ref} ({signing.signer.mode})")


def _signed(cosign: Cosign, ref: str, verifier: policy.Verifier, annotations: Mapping[str, str]) -> bool:
    try:
        cosign.verify(ref, verifier, annotations)
    except VerificationError:
        return False
    return True
