"""The typed options object: the config file plus GHBUILD_* overrides, validated once.

Everything downstream reads `Options`, never the raw TOML or the environment.

The option types are `typing.NamedTuple`s, not dataclasses: every command builds them before its first
output, and a frozen dataclass costs about 1.3 ms to create here (it compiles each generated method),
a NamedTuple a sixth of that (bench/startup.py). Their mapping defaults are read-only and shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple
from urllib.parse import urlsplit

from ghbuild.sizes import format_size as format_size
from ghbuild.sizes import parse_size as parse_size

ARCHES = ("amd64", "arm64")
PLATFORM_ARCH = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
DEFAULT_RUNNERS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "amd64": ("ubuntu-24.04",),
    "arm64": ("ubuntu-24.04-arm",),
})
DEFAULT_ARCH_SUFFIXES: Mapping[str, str] = MappingProxyType({"amd64": "x86_64", "arm64": "arm64"})
_EMPTY: Mapping = MappingProxyType({})
# The sccache helper image ghbuild publishes (docker/sccache-helper); its tag is the wrapper's contract version.
DEFAULT_SCCACHE_HELPER_IMAGE = "ghcr.io/ghbuild/ghbuild-sccache:1"
class IdentityOptions(NamedTuple):
    """A content-addressed base image: what its identity is made of."""

    version: str
    inputs: tuple[str, ...] = ()
    prefix: str = ""


DEFAULT_CACHE_MOUNT_SIZE = 10**9        # bytes: a cache mount's cap when it names none
# The image the cache-mount restore and save steps run in when the build has no BASE_IMAGE (sh, tar, cp).
DEFAULT_CACHE_MOUNT_IMAGE = "docker.io/library/busybox:1"


class CacheMountOptions(NamedTuple):
    """A `RUN --mount=type=cache` of the Dockerfile that ghbuild carries between runs (images.<name>.cache-mounts).
    BuildKit finds a cache mount by its id (default: its target), uid, gid and mode: these match the Dockerfile's."""

    target: str
    id: str                         # the Dockerfile's id=, else the target
    max_size: int = DEFAULT_CACHE_MOUNT_SIZE   # bytes of files saved; the oldest (mtime) left out above it
    uid: int | None = None
    gid: int | None = None
    mode: str | None = None


class AttestOptions(NamedTuple):
    """images.<name>.attest: what buildx attaches to a pushed per-arch image."""

    provenance: str = "auto"          # auto | max | min | off
    sbom: bool = False
    sbom_generator: str | None = None  # None: BuildKit's default generator image


class ImageOptions(NamedTuple):
    name: str
    dockerfile: str
    context: str = "."
    target: str | None = None
    build_args: Mapping[str, str] = _EMPTY
    platforms: tuple[str, ...] = ("linux/amd64",)
    runners: Mapping[str, tuple[str, ...]] = DEFAULT_RUNNERS
    # Repository templates ({image}, {owner}); None: the registries' role default.
    staging: str | None = None
    publish: str | None = None
    base_image: str | None = None
    size_budget: int | None = None                                   # bytes
    stage_budgets: Mapping[str, int] = _EMPTY   # bytes per stage
    identity: IdentityOptions | None = None   # set: a content-addressed base, built by ensure-base
    base: str | None = None                   # name of the content-addressed image this one builds FROM
    cache_mounts: tuple[CacheMountOptions, ...] = ()
    attest: AttestOptions = AttestOptions()

    @property
    def arches(self) -> tuple[str, ...]:
        return tuple(PLATFORM_ARCH[p] for p in self.platforms)


class BuildOptions(NamedTuple):
    builder: str | None = None
    builder_network: str = "host"
    network: str = "host"
    provenance: bool = False
    base_image: str | None = None
    cache_mount_image: str | None = None   # None: the build's BASE_IMAGE, else DEFAULT_CACHE_MOUNT_IMAGE
    sbom_generator: str | None = None      # images' default attest.sbom-generator (None: BuildKit's)


class RegistryOptions(NamedTuple):
    cache: str | None = None
    staging: str | None = None
    publish: str | None = None
    gha_cache: bool = True
    cache_mode: str = "max"


class SccacheOptions(NamedTuple):
    enabled: bool = True
    bucket: str | None = None
    region: str | None = None
    endpoint: str | None = None
    key_prefix: str = "sccache"
    helper_image: str = DEFAULT_SCCACHE_HELPER_IMAGE


class TrustOptions(NamedTuple):
    canonical_repository: str | None = None
    stable_branch: str | None = None
    self_hosted_for_forks: bool = False
    hosted_runner_labels: tuple[str, ...] = ()   # larger runners' names: GitHub-hosted, like HOSTED_LABELS


class PublishOptions(NamedTuple):
    nightly_tag: str = "nightly"
    arch_suffixes: Mapping[str, str] = DEFAULT_ARCH_SUFFIXES
    retention: int = 14


class CacheOptions(NamedTuple):
    """The GitHub Actions cache budget (`ghbuild cache`, the build job's warning)."""

    budget: int = 10 * 10**9      # bytes: GitHub's default limit per repository
    warn_share: float = 0.8       # warn when the caches hold this share of the budget; 0: no check


class Options(NamedTuple):
    config_path: Path
    images: Mapping[str, ImageOptions]
    registries: RegistryOptions = RegistryOptions()
    build: BuildOptions = BuildOptions()
    sccache: SccacheOptions = SccacheOptions()
    trust: TrustOptions = TrustOptions()
    publish: PublishOptions = PublishOptions()
    cache: CacheOptions = CacheOptions()
    # Where each effective value came from, by dotted key ("images.cpu.platforms" -> "GHBUILD_...").
    sources: Mapping[str, str] = _EMPTY
    notices: tuple[str, ...] = ()       # config file keys left out (config.CHECKOUT_IGNORED), one line each

    @property
    def project_dir(self) -> Path:
        """Relative paths in the config (dockerfile, context) are relative to this folder."""
        return self.config_path.parent


BOOL_TRUE = ("true", "on", "1")
BOOL_FALSE = ("false", "off", "0")


def parse_bool(value: str) -> bool:
    """sccache's own booleans: only true|on|1|false|off|0; anything else is an error."""
    text = value.strip().lower()
    if text in BOOL_TRUE:
        return True
    if text in BOOL_FALSE:
        return False
    raise ValueError("expected one of true, on, 1, false, off, 0")


def check_endpoint(value: str) -> str:
    """Return the endpoint if it is a plain http(s) URL, else raise ValueError.

    The message never contains the value: an endpoint with user info carries a credential.
    An empty value means "no endpoint" (AWS) and is returned as "".
    """
    if value == "":
        return ""
    if any(c in value for c in "\r\n\t "):
        raise ValueError("endpoint contains whitespace or a newline (value not shown)")
    if "?" in value or "#" in value:
        raise ValueError("endpoint contains '?' or '#' (value not shown)")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a bad port
    except ValueError:
        raise ValueError("endpoint is not a valid URL (value not shown)") from None
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise ValueError("endpoint contains user info; pass credentials as secrets (value not shown)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("endpoint must be an http:// or https:// URL with a host (value not shown)")
    del port
    return value
