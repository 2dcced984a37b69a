"""sccache settings that must be right before anything reaches a build.

Pure checks, the mode a dry run would get (`planned`), the S3 preflight that picks the mode
before a real build (`preflight`, ghbuild.build.s3probe), and what reaches the build: every setting (mode, bucket,
region, endpoint, key prefix, credentials) as KEY=VALUE lines in the BuildKit secret `ghbuild_sccache`,
never as a build arg, so a mode change never invalidates a layer; and the helper image, digest-pinned,
as the build arg GHBUILD_SCCACHE_IMAGE (docker/sccache-helper reads the secret inside each RUN step).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ghbuild import naming
from ghbuild.build import helper_pin
from ghbuild.config.options import DEFAULT_SCCACHE_HELPER_IMAGE
from ghbuild.errors import AuthError, ConfigError, GhbuildError
from ghbuild.plan import dockerfile as dockerfile_text
from ghbuild.registry.credentials import Sealed

# --------------------------------------------------------------------------- preflight

MODES = ("read-write", "read-only", "anonymous", "local", "off")
SECRET_ID = "ghbuild_sccache"
HELPER_BUILD_ARG = "GHBUILD_SCCACHE_IMAGE"
_CRED_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
ROLE_VAR = "GHBUILD_AWS_ROLE_ARN"       # a role to assume with the job's OIDC token: ghbuild.build.aws_role's


class SccacheDecision(Sealed):
    """What the build gets: a mode, why, the settings (not secret themselves) and the credential lines."""

    __slots__ = ("mode", "reason", "settings", "secret")
    mode: str
    reason: str
    settings: dict[str, str]
    secret: str | None                 # credential lines (env-file text); never logged

    def __init__(self, mode: str, reason: str, settings: dict[str, str], secret: str | None = None) -> None:
        for name, value in zip(self.__slots__, (mode, reason, settings, secret), strict=True):
            object.__setattr__(self, name, value)

    @property
    def degraded(self) -> bool:
        return self.mode not in ("read-write", "off")

    def secret_text(self, with_credentials: bool) -> str:
        """The `ghbuild_sccache` secret: the settings, then the credentials when this run may have them."""
        text = "".join(f"{k}={v}\n" for k, v in self.settings.items())
        return text + (self.secret or "" if with_credentials else "")

    @property
    def secret_values(self) -> tuple[str, ...]:
        """The secret key and session token among the credential lines: what the build log must never show."""
        lines = (self.secret or "").splitlines() if self.secret != "(masked)" else []
        return tuple(value for key, _, value in (line.partition("=") for line in lines)
                     if key in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN") and value)

    def __repr__(self) -> str:  # never print a secret
        return (f"SccacheDecision(mode={self.mode!r}, reason={self.reason!r}, settings={self.settings!r}, "
                f"secret={'***' if self.secret else None})")


def settings_for(options, mode: str) -> dict[str, str]:
    """The settings for one mode, as the wrapper reads them. SCCACHE_* only when non-empty (an empty
    SCCACHE_ENDPOINT crashes sccache at start)."""
    args = {"GHBUILD_SCCACHE_MODE": mode}
    if mode in ("read-write", "read-only", "anonymous"):
        values = {
            "SCCACHE_BUCKET": options.bucket,
            "SCCACHE_REGION": options.region,
            "SCCACHE_ENDPOINT": options.endpoint,
            "SCCACHE_S3_KEY_PREFIX": options.key_prefix,
        }
        if options.endpoint:
            values["SCCACHE_S3_USE_SSL"] = "true" if options.endpoint.startswith("https://") else "false"
        args.update({k: v for k, v in values.items() if v})
    return args


def planned(options, refusal: str | None, env: Mapping[str, str]) -> SccacheDecision:
    """The mode a build would get, without talking to S3 (`--dry-run`); the secret is never read."""
    creds = bool((env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
                 or env.get(ROLE_VAR, "").strip()) and refusal is None
    mode = "off" if not options.enabled else ("local" if not options.bucket else
                                              ("read-write" if creds else "anonymous"))
    reason = "dry run: S3 not probed" + (f"; {_refused(refusal, env)}" if refusal and mode == "anonymous" else "")
    if creds and env.get(ROLE_VAR, "").strip():
        reason += f"; the role in {ROLE_VAR} not assumed"
    return SccacheDecision(mode, reason, settings_for(options, mode),
                           "(masked)" if creds and mode == "read-write" else None)


def preflight(options, refusal: str | None, env: Mapping[str, str], timeout: float = 5.0) -> SccacheDecision:
    """Pick the sccache mode before the build: read-write, read-only, anonymous read, local disk or off.

    `refusal`: why this run may not use the AWS credentials in its environment (None: it may). Credentials
    inside a build can write whatever its RUN steps like, so only the trusted run gets them.

    Talks to S3 (ghbuild.build.s3probe: bucket reachable, then a write probe). Never raises for S3 trouble:
    the build always proceeds, and a degraded mode carries the cause in `reason`.
    """
    if not options.enabled:
        return SccacheDecision("off", "sccache disabled in the config", settings_for(options, "off"))
    if not options.bucket:
        return SccacheDecision("local", "no sccache bucket configured: local disk cache (lost with the builder)",
                               settings_for(options, "local"))
    # The HTTP stack: loaded only for a real build with a bucket.
    from ghbuild.build import aws_role, s3probe

    creds = {k: env.get(k, "") for k in _CRED_VARS}
    if refusal is None:
        # A role to assume (the job's OIDC token exchanged with STS) gives short-lived keys instead of static ones.
        creds = aws_role.credentials(env, options.region) or creds
    have_creds = bool(creds["AWS_ACCESS_KEY_ID"] and creds["AWS_SECRET_ACCESS_KEY"])
    if refusal is not None:
        have_creds = False
        why_no_creds = _refused(refusal, env)
    else:
        why_no_creds = "no AWS credentials in the environment"

    mode, reason = s3probe.probe(options, creds if have_creds else None, why_no_creds, timeout)
    secret = "".join(f"{k}={v}\n" for k, v in creds.items() if v) if mode in ("read-only", "read-write") else None
    return SccacheDecision(mode, reason, settings_for(options, mode), secret)


def _refused(refusal: str, env: Mapping[str, str]) -> str:
    """Why no credentials: the refusal, and that a configured role is not assumed either (no exchange)."""
    return refusal + (f" (the role in {ROLE_VAR} is not assumed)" if env.get(ROLE_VAR, "").strip() else "")


# --------------------------------------------------------------------------- the helper image

def helper_reference(image: str, resolve) -> str:
    """The helper image as `name@sha256:<digest>`: a digest-pinned reference as written, a tag resolved
    now (`resolve(ref)` -> digest, raising when the registry cannot tell), so every stage of one build, and
    a rebuild of the same commit, mounts the same helper."""

    if naming.is_digest_ref(image):
        return image
    return naming.pinned(image, resolve(image))


# A Dockerfile that follows the sccache contract declares the helper's build arg before its first FROM.
_HELPER_ARG_RE = re.compile(rf"^\s*ARG\s+{HELPER_BUILD_ARG}(?:=|\s|$)", re.IGNORECASE | re.MULTILINE)


def helper_image(options, dockerfile: Path, lookup: Callable[[str], str | None], *,
                 dry_run: bool = False) -> tuple[str | None, str | None]:
    """GHBUILD_SCCACHE_IMAGE for a Dockerfile that declares it, and a note: the configured
    sccache.helper-image (never the Dockerfile's own default) pinned to its digest. `lookup(ref)` -> digest,
    None when the registry confirms it missing; it raises when it cannot tell. A dry run that cannot ask the
    registry shows it as configured and says so. (None, None) for a Dockerfile without the contract.
    `ghbuild build` and the content identity of a base (ensure-base) both take it from here."""

    preamble, _ = dockerfile_text.parse(dockerfile)
    if not _HELPER_ARG_RE.search(preamble):
        return None, None
    ref = options.sccache.helper_image

    def resolve(image: str) -> str:
        try:
            digest = lookup(image)
        except AuthError as exc:    # ghcr.io's answer to an anonymous pull of what nobody published
            raise ConfigError(f"sccache.helper-image: cannot read {image} ({exc}); "
                              + _helper_hint(options)) from None
        if digest is None:
            raise ConfigError(f"sccache.helper-image: {image} does not exist in its registry; "
                              + _helper_hint(options))
        return digest


    pin = helper_pin.read()
    note = None
    if ref == pin.image == DEFAULT_SCCACHE_HELPER_IMAGE:
        if pin.digest:
            # The release's pin, never the tag: the registry must still have it (BuildKit checks the bytes).
            pinned = naming.pinned(ref, pin.digest)
            try:
                resolve(pinned)
            except GhbuildError as exc:
                if not dry_run:
                    raise
                return pinned, f"dry run: the pinned sccache helper was not looked up ({exc})"
            return pinned, None
        note = (f"sccache helper {ref}: this ghbuild is not a release (no digest pinned in "
                "ghbuild/resources/sccache-helper.json), so its moving tag was resolved now; pin a released "
                "ghbuild, or set sccache.helper-image to name@sha256:...")
    try:
        return helper_reference(ref, resolve), note
    except GhbuildError as exc:
        if not dry_run:
            raise
        return ref, f"dry run: sccache.helper-image not pinned to a digest ({exc}); shown as configured"


def _helper_hint(options) -> str:
    """What to set when the helper cannot be read: where the current value came from, and every way to set it."""
    source = options.sources.get("sccache.helper-image")
    origin = f" (now set by {source})" if source else (
        " (now the default)" if options.sccache.helper_image == DEFAULT_SCCACHE_HELPER_IMAGE else "")
    return (f"set sccache.helper-image{origin} to a helper image that is published, e.g. "
            f"{DEFAULT_SCCACHE_HELPER_IMAGE.rsplit(':', 1)[0]}:nightly: in ghbuild.toml "
            "`[sccache] helper-image = \"...\"`, "
            "or the variable GHBUILD_SCCACHE_HELPER_IMAGE, or a reusable workflow's `overrides` input "
            "`sccache.helper-image=...`; or publish your own from docker/sccache-helper")
