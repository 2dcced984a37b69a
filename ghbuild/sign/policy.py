"""Pure: how this run signs and how it verifies, decided from the environment alone.

Signing is key-based when GHBUILD_SIGN_KEY names a cosign key (a file or `env://VAR`, its password in
COSIGN_PASSWORD, cosign's own conventions); keyless in GitHub Actions when the job may ask for an OIDC token
(`id-token: write`: the runner then sets ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN), through Fulcio and Rekor; else
none, with the reason. Verification mirrors it: GHBUILD_VERIFY_KEY (or `--key`) and, in Actions (or for
`ghbuild verify`), the keyless identity `KeylessIdentity` describes; either one verifying is enough.

A keyless certificate of a GitHub Actions job (Fulcio) carries the job's `job_workflow_ref` as its identity (the
SAN: for a job of a reusable workflow, the *called* workflow, e.g. ghbuild's build-images.yml) and, as extensions,
the caller run's `repository`, `ref`, `sha` and `event_name`. So the identity pins the repository, the stable
branch's ref and the trigger (push, schedule, workflow_dispatch: never a pull request or a run that may execute
one's code), and the SAN to the repository's own workflows on that branch or to ghbuild's signing workflows. The
certificate's commit is not pinned: a release of an older commit is signed by a run at the branch head; the
signed revision annotation and the provenance name the commit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ghbuild.errors import ConfigError

GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com"
# A repository variable (never the checkout's ghbuild.toml): `false` lets a publish in GitHub Actions go on
# without verifying or signing, for a repository that does not sign at all; said in the job summary.
REQUIRE_SIGNATURE = "GHBUILD_REQUIRE_SIGNATURE"
LABEL_SOURCE = "org.opencontainers.image.source"
LABEL_REVISION = "org.opencontainers.image.revision"
# The runs whose keyless signatures count: what runs the stable branch's own code, never a pull request's.
TRUSTED_TRIGGERS = ("push", "schedule", "workflow_dispatch")
DEFAULT_STABLE_BRANCH = "main"          # ghbuild.plan.planner.FALLBACK_STABLE_BRANCH, without importing it
# The repository whose reusable workflows sign for adopters (their Fulcio SAN); a fork of ghbuild sets its own.
WORKFLOWS_REPOSITORY_VAR = "GHBUILD_WORKFLOWS_REPOSITORY"
DEFAULT_WORKFLOWS_REPOSITORY = "ghbuild/ghbuild"
SIGNING_WORKFLOWS = ("build-images.yml", "nightly.yml", "release.yml")
# cosign verify --output json: the certificate's GitHub workflow trigger (OID 1.3.6.1.4.1.57264.1.2), by name and OID.
_TRIGGER_KEYS = ("githubWorkflowTrigger", "1.3.6.1.4.1.57264.1.2")


class Signer(NamedTuple):
    mode: str                 # "key" | "keyless" | "none"
    key: str | None           # the cosign key reference (a path or env://VAR; never the key itself)
    reason: str               # one line: why this mode

    @property
    def signs(self) -> bool:
        return self.mode != "none"


def _go_quote(text: str) -> str:
    """`text` literally in a Go (RE2) regular expression, as cosign reads --certificate-identity-regexp."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


class KeylessIdentity(NamedTuple):
    """Who may sign keyless for `repository`: a push, schedule or dispatch run of its stable branch, in one of
    its own workflows or one of ghbuild's reusable signing workflows (module docstring)."""

    repository: str                     # canonical OWNER/NAME: the caller run's repository
    branch: str                         # the stable branch: the caller run's ref is refs/heads/<branch>
    workflows_repository: str = DEFAULT_WORKFLOWS_REPOSITORY
    server_url: str = "https://github.com"

    @property
    def ref(self) -> str:
        return f"refs/heads/{self.branch}"

    def san_regexp(self) -> str:
        """The certificate's SAN (the job's job_workflow_ref as a URL): a workflow of the repository on the stable
        branch, or ghbuild's signing workflow at whatever ref the caller's stable branch pinned."""
        own = f"(?i:{_go_quote(self.repository)})/\\.github/workflows/[^/@]+@{_go_quote(self.ref)}"
        called = "|".join(_go_quote(name) for name in SIGNING_WORKFLOWS)
        toolkit = f"(?i:{_go_quote(self.workflows_repository)})/\\.github/workflows/(?:{called})@[^@]+"
        return f"^{_go_quote(self.server_url.rstrip('/'))}/(?:{own}|{toolkit})$"

    def describe(self) -> str:
        return (f"keyless: a {'/'.join(TRUSTED_TRIGGERS)} run of {self.repository} on {self.ref} ({self.repository}'s "
                f"workflows, or {self.workflows_repository}'s {', '.join(SIGNING_WORKFLOWS)}), GitHub's OIDC issuer")


class Verifier(NamedTuple):
    mode: str                 # "key" | "keyless" | "key or keyless" | "none"
    key: str | None           # the public key's path
    identity: KeylessIdentity | None
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
             keyless: bool | None = None, branch: str | None = None,
             server_url: str = "https://github.com") -> Verifier:
    """The public key (`key`, else GHBUILD_VERIFY_KEY) and the keyless identity of `canonical_repository`'s stable
    `branch` when `keyless` (None: when this job could sign keyless itself, as a publishing job granted
    `id-token: write` can); a signature by either verifies, so a build signing keyless and a publish holding the
    public key agree. An explicit `key` (`ghbuild verify --key`) is the only one asked for."""
    explicit = bool((key or "").strip())
    key = (key or env.get("GHBUILD_VERIFY_KEY") or "").strip() or None
    identity = None
    if not explicit and (oidc_available(env) if keyless is None else keyless) and canonical_repository:
        identity = KeylessIdentity(canonical_repository, branch or DEFAULT_STABLE_BRANCH,
                                   (env.get(WORKFLOWS_REPOSITORY_VAR) or "").strip() or DEFAULT_WORKFLOWS_REPOSITORY,
                                   server_url)
    if key and identity:
        return Verifier("key or keyless", key, identity, f"cosign public key {key}, or {identity.describe()}")
    if key:
        return Verifier("key", key, None, f"cosign public key {key}")
    if identity:
        return Verifier("keyless", None, identity, identity.describe())
    return Verifier("none", None, None,
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


def verify_args(annotations: Mapping[str, str], ref: str, *, key: str | None = None,
                identity: KeylessIdentity | None = None) -> list[str]:
    """`cosign verify` for `ref` with `key`, or with the keyless `identity` (issuer, SAN, the caller run's
    repository and ref; the trigger is checked on cosign's answer, `trusted_trigger`, as cosign takes one value
    only), and the signed annotations."""
    argv = ["verify", "--output", "json"]
    if key:
        argv += ["--key", key, "--insecure-ignore-tlog=true"]
    elif identity:
        argv += ["--certificate-oidc-issuer", GITHUB_OIDC_ISSUER,
                 "--certificate-identity-regexp", identity.san_regexp(),
                 "--certificate-github-workflow-repository", identity.repository,
                 "--certificate-github-workflow-ref", identity.ref]
    else:
        raise ValueError("verify_args: a key or a keyless identity")
    for name in sorted(annotations):
        argv += ["-a", f"{name}={annotations[name]}"]
    return [*argv, ref]


def certificate_trigger(payload: dict[str, Any]) -> str:
    """The GitHub workflow trigger of the certificate behind a payload cosign verified ("" when none)."""
    optional = payload.get("optional") or {}
    return next((str(optional[k]) for k in _TRIGGER_KEYS if optional.get(k)), "")


def trusted_trigger(payloads: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The keyless signatures cosign verified whose certificate's trigger is a trusted one, and the other triggers
    seen. cosign writes the certificate's values over any annotation of the same name, so a signer cannot claim a
    trigger; a certificate without one counts as untrusted."""
    kept, others = [], []
    for payload in payloads:
        trigger = certificate_trigger(payload)
        if trigger in TRUSTED_TRIGGERS:
            kept.append(payload)
        else:
            others.append(trigger or "(no trigger)")
    return kept, others


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
