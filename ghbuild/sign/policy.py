"""Pure: how this run signs and how it verifies, decided from the environment alone.

Signing is key-based when GHBUILD_SIGN_KEY names a cosign key (a file or `env://VAR`, its password in
COSIGN_PASSWORD, cosign's own conventions); keyless in GitHub Actions when the job may ask for an OIDC token
(`id-token: write`: the runner then sets ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN), through Fulcio and Rekor; else
none, with the reason. Verification mirrors it: GHBUILD_VERIFY_KEY (or `--key`), else, in Actions, the keyless
identity of a workflow of the canonical repository at the commit being checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ghbuild.errors import ConfigError

GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com"
# A repository variable (never the checkout's ghbuild.toml): `false` lets a publish in GitHub Actions go on
# without verifying or signing, for a repository that does not sign at all; said in the job summary.
REQUIRE_SIGNATURE = "GHBUILD_REQUIRE_SIGNATURE"
LABEL_SOURCE = "org.opencontainers.image.source"
LABEL_REVISION = "org.opencontainers.image.revision"


class Signer(NamedTuple):
    mode: str                 # "key" | "keyless" | "none"
    key: str | None           # the cosign key reference (a path or env://VAR; never the key itself)
    reason: str               # one line: why this mode

    @property
    def signs(self) -> bool:
        return self.mode != "none"


class Verifier(NamedTuple):
    mode: str                 # "key" | "keyless" | "none"
    key: str | None           # the public key's path
    repository: str | None    # keyless: the canonical owner/name the signing workflow must run in
    reason: str

    @property
    def verifies(self) -> bool:
        return self.mode != "none"


def oidc_available(env: Mapping[str, str]) -> bool:
    """The job may ask GitHub for an OIDC token: only a job granted `id-token: write` gets these two."""
    return (env.get("GITHUB_ACTIONS") == "true" and bool(env.get("ACTIONS_ID_TOKEN_REQUEST_URL"))
            and bool(env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")))


def signer(env: Mapping[str, str]) -> Signer:
    key = (env.get("GHBUILD_SIGN_KEY") or "").strip()
    if key:
        return Signer("key", key, f"cosign key {key}")
    if oidc_available(env):
        return Signer("keyless", None, "keyless: this job's GitHub OIDC token, a Fulcio certificate, Rekor")
    return Signer("none", None, "not signed: GHBUILD_SIGN_KEY is unset and this job has no GitHub OIDC token "
                                "(id-token: write)")


def verifier(env: Mapping[str, str], canonical_repository: str | None, key: str | None = None, *,
             keyless: bool | None = None) -> Verifier:
    """The public key when one is given (`key`, else GHBUILD_VERIFY_KEY); else keyless when `keyless` (None: when
    this job could sign keyless itself, as a publishing job granted `id-token: write` can); else none."""
    key = (key or env.get("GHBUILD_VERIFY_KEY") or "").strip()
    if key:
        return Verifier("key", key, canonical_repository, f"cosign public key {key}")
    if (oidc_available(env) if keyless is None else keyless) and canonical_repository:
        return Verifier("keyless", None, canonical_repository,
                        f"keyless: a workflow of {canonical_repository} signed through GitHub's OIDC issuer")
    return Verifier("none", None, canonical_repository,
                    "not verified: GHBUILD_VERIFY_KEY is unset and this job has no GitHub OIDC token to "
                    "sign or verify keyless with")


def in_github_actions(env: Mapping[str, str]) -> bool:
    """A job on GitHub's runners. act (ACT=true) runs the same workflows on a laptop: local use, not this."""
    return env.get("GITHUB_ACTIONS") == "true" and env.get("ACT") != "true"


class Unchecked(NamedTuple):
    """A publish that cannot verify (or sign): refused, or let through with a warning the summary shows."""

    refuse: bool
    message: str              # one line


def unchecked_publish(env: Mapping[str, str], verifier: Verifier, signer: Signer, what: str,
                      dry_run: bool = False) -> Unchecked | None:
    """What a publish (`what`: "publish nightly") does when it cannot verify the staging images' signatures or
    cannot sign what it publishes; None when it can do both. In GitHub Actions it fails closed (a staging image
    any job with a write token pushed, labelled and recorded like the trusted build's, must not slip through
    because a key or `id-token: write` is missing), unless GHBUILD_REQUIRE_SIGNATURE=false; outside (a laptop,
    act) it warns that nothing was verified. A dry run writes nothing: it says what a real run would do."""
    if verifier.verifies and signer.signs:
        return None
    setting = (env.get(REQUIRE_SIGNATURE) or "").strip().lower()
    if setting not in ("", "true", "false"):
        raise ConfigError(f"{REQUIRE_SIGNATURE}={env.get(REQUIRE_SIGNATURE)!r}: expected true or false")
    gaps = []
    if not verifier.verifies:
        gaps.append("the staging images' signatures cannot be verified (GHBUILD_VERIFY_KEY is unset and this job "
                    "has no GitHub OIDC token)")
    if not signer.signs:
        gaps.append("what is published cannot be signed (GHBUILD_SIGN_KEY is unset and this job has no GitHub "
                    "OIDC token)")
    missing = "; ".join(gaps)
    outcome = " and ".join(word for word, gap in (("NOT VERIFIED", not verifier.verifies),
                                                   ("NOT SIGNED", not signer.signs)) if gap)
    if setting == "false":
        return Unchecked(False, f"{what}: {outcome}: {REQUIRE_SIGNATURE}=false, this repository opted out of "
                                f"signatures: {missing}")
    if in_github_actions(env) and not dry_run:
        cannot, key = (("verify the staging images' signatures", "GHBUILD_VERIFY_KEY (a cosign public key)")
                       if not verifier.verifies else
                       ("sign what it publishes", "GHBUILD_SIGN_KEY (its password in COSIGN_PASSWORD)"))
        return Unchecked(True, f"{what}: refused in GitHub Actions: cannot {cannot}: grant the publish job "
                               f"`id-token: write` (keyless) or set {key}; a repository that does not sign sets "
                               f"the variable {REQUIRE_SIGNATURE}=false; nothing was written")
    checked = ("only the build records and image labels were checked, which anyone with a staging write token "
               "can forge; " if not verifier.verifies else "")
    return Unchecked(False, f"{what}: {outcome}: {missing}; {checked}"
                            + ("GitHub Actions would refuse this publish" if dry_run else
                               "outside GitHub Actions publishing goes on"))


def signed_annotations(source_url: str, sha: str) -> dict[str, str]:
    """What every signature ghbuild makes carries in its signed payload, and what verification asks for: the
    canonical repository and the commit, so a signature cannot be moved to another commit's image."""
    return {LABEL_SOURCE: source_url.rstrip("/"), LABEL_REVISION: sha}


def sign_args(signer: Signer, annotations: Mapping[str, str], ref: str) -> list[str]:
    """`cosign sign` for `ref` (repository@digest). A key signs without the public transparency log (a local or
    self-hosted key needs none, and there may be no network); keyless uses GitHub's ambient OIDC token."""
    argv = ["sign", "--yes"]
    if signer.mode == "key":
        argv += ["--key", signer.key or "", "--tlog-upload=false"]
    elif signer.mode == "keyless":
        argv += ["--oidc-provider=github-actions"]
    else:
        raise ValueError(signer.reason)
    for name in sorted(annotations):
        argv += ["-a", f"{name}={annotations[name]}"]
    return [*argv, ref]


def verify_args(verifier: Verifier, annotations: Mapping[str, str], ref: str, sha: str | None) -> list[str]:
    """`cosign verify` for `ref`: the key, or the keyless identity (the canonical repository's workflow, at
    `sha` when it is known, issued by GitHub's OIDC issuer), and the signed annotations."""
    argv = ["verify", "--output", "json"]
    if verifier.mode == "key":
        argv += ["--key", verifier.key or "", "--insecure-ignore-tlog=true"]
    elif verifier.mode == "keyless":
        repository = verifier.repository or ""
        argv += ["--certificate-oidc-issuer", GITHUB_OIDC_ISSUER,
                 "--certificate-identity-regexp", r"^https://github\.com/.+/\.github/workflows/.+@refs/.+$",
                 "--certificate-github-workflow-repository", repository]
        if sha:
            argv += ["--certificate-github-workflow-sha", sha]
    else:
        raise ValueError(verifier.reason)
    for name in sorted(annotations):
        argv += ["-a", f"{name}={annotations[name]}"]
    return [*argv, ref]


def source_url(server_url: str, repository: str) -> str:
    """The canonical repository's URL, as the source label and every signature name it."""
    return f"{server_url.rstrip('/')}/{repository}"


def attest_modes(provenance: str, sbom: bool, sbom_generator: str | None, *, trusted: bool, push: bool,
                 signs: bool, legacy_provenance: bool = False) -> tuple[str, str | None]:
    """(provenance mode for buildx: off|min|max, SBOM generator: None for none, "" for BuildKit's default).

    `auto` is max for a trusted build that pushes and signs (publishing will check its provenance), off
    otherwise: an untrusted or local build's per-arch image stays a plain manifest. `build.provenance = true`
    (the older switch) keeps its meaning, min, where the image says auto. The SBOM only for trusted pushes."""
    if provenance == "auto":
        provenance = "max" if trusted and push and signs else "min" if legacy_provenance else "off"
    generator = (sbom_generator or "") if sbom and trusted and push else None
    return provenance, generator
