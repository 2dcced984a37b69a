"""Whether a build can use the GitHub Actions layer cache (`type=gha`), and why not. Pure: no I/O.

Two cache services speak to BuildKit's `gha` backend:
- the legacy cache API at ACTIONS_CACHE_URL (act's own cache server, GitHub Enterprise Server): any BuildKit
  with the gha backend speaks it;
- the v2 cache service at ACTIONS_RESULTS_URL, the only one on github.com since 2025-04-15: BuildKit >= 0.20
  and buildx >= 0.21 (which passes `url_v2`). An older builder there fails at export or caches nothing.

Both need ACTIONS_RUNTIME_TOKEN; buildx drops a `type=gha` entry silently when its url or token is missing,
so ghbuild skips it itself, and says why, instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

MIN_BUILDKIT_V2 = (0, 20)
MIN_BUILDX_V2 = (0, 21)
RUNTIME_VARS = ("ACTIONS_RUNTIME_TOKEN", "ACTIONS_RESULTS_URL", "ACTIONS_CACHE_URL")


class BuilderInfo(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def buildkit(self) -> str | None: ...


def version_tuple(text: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of "v0.13.2", "0.21.1+ds1-3" or "github.com/docker/buildx v0.21.0 abc";
    None for an unknown version (Debian's BuildKit reports "v0.0.0+unknown")."""
    match = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    found = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    return None if found == (0, 0, 0) else found


def service(env: Mapping[str, str]) -> str | None:
    """The cache service this environment offers: "v2" (ACTIONS_RESULTS_URL, github.com; BuildKit picks it when
    ACTIONS_CACHE_SERVICE_V2 is set or no legacy URL is given), "v1" (ACTIONS_CACHE_URL alone), or None."""
    if env.get("ACTIONS_RESULTS_URL") and (_truthy(env.get("ACTIONS_CACHE_SERVICE_V2"))
                                           or not env.get("ACTIONS_CACHE_URL")):
        return "v2"
    if env.get("ACTIONS_CACHE_URL"):
        return "v1"
    return None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def needs_buildkit_version(env: Mapping[str, str]) -> bool:
    """Whether `problem` reads the builder's BuildKit version here (the v2 service needs a current one)."""
    return bool(env.get("ACTIONS_RUNTIME_TOKEN")) and service(env) == "v2"


def problem(env: Mapping[str, str], builder: BuilderInfo, buildx_version: str = "") -> str | None:
    """Why `type=gha` cannot be used by this builder in this environment (None: it can)."""
    if not env.get("ACTIONS_RUNTIME_TOKEN"):
        return ("ACTIONS_RUNTIME_TOKEN is not in the environment (buildx would drop the cache silently; "
                "run the build through ghbuild's build-image action)")
    kind = service(env)
    if kind is None:
        return ("neither ACTIONS_RESULTS_URL nor ACTIONS_CACHE_URL is in the environment (buildx would drop the "
                "cache silently; run the build through ghbuild's build-image action)")
    if kind == "v1":
        return None
    found = version_tuple(builder.buildkit)
    if found is None or found[:2] < MIN_BUILDKIT_V2:
        shown = builder.buildkit or "unknown"
        return (f"the GitHub Actions cache service (ACTIONS_RESULTS_URL) needs BuildKit >= "
                f"{'.'.join(map(str, MIN_BUILDKIT_V2))}, and builder {builder.name!r} runs BuildKit {shown}"
                f"{' (a version that cannot be checked is not taken as new enough)' if found is None else ''}: "
                "set build.builder to a builder with a current BuildKit, e.g. the docker-container builder "
                "ghbuild creates on GitHub-hosted runners")
    buildx = version_tuple(buildx_version) if buildx_version else None
    if buildx_version and (buildx is None or buildx[:2] < MIN_BUILDX_V2):
        return (f"the GitHub Actions cache service (ACTIONS_RESULTS_URL) needs buildx >= "
                f"{'.'.join(map(str, MIN_BUILDX_V2))} to pass it to BuildKit; this client's buildx is "
                f"{buildx_version}: install a current buildx plugin")
    return None
