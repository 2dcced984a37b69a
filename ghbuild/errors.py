"""The typed error hierarchy: every error the user can cause, and its exit code, in one place.

The CLI catches `GhbuildError`, prints `ghbuild: <kind>: <message>` on one line and exits with
`exit_code`; anything else is a bug and keeps its traceback. One code per meaning: subclasses that
only narrow the cause (an auth failure is a registry error) share their parent's code.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType


class GhbuildError(Exception):
    """Base class: one clear line for the user, a distinct exit code per kind."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str) -> None:
        # Collapse to one line: a message is read in a log line or an annotation.
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)

    location: Mapping[str, str | int] = MappingProxyType({})   # file / line / col of the cause, when it is in a file


class UsageError(GhbuildError):
    """flags, an --image the config does not have"""

    exit_code = 2
    kind = "usage error"


class ConfigError(GhbuildError):
    """file, key or GHBUILD_* variable, including invalid repository names in the config"""

    exit_code = 3
    kind = "config error"

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 col: int | None = None) -> None:
        super().__init__(message)
        # Where the offending key is written, for an annotation on that line (GitHub's file/line/col).
        self.location = {k: v for k, v in (("file", file), ("line", line), ("col", col)) if v is not None}


class ContextError(GhbuildError):
    """unknown event, malformed payload, missing or invalid GITHUB_*, --repository, --head-repo, not a git checkout"""

    exit_code = 4
    kind = "context error"


class GitError(ContextError):
    """git could not list the inputs (not a checkout, git missing, dubious ownership, ...)."""


class InvalidReferenceError(GhbuildError):
    """an image reference or tag computed at run time that is not valid, a base not pinned by digest"""

    exit_code = 5
    kind = "invalid name"


class TrustError(GhbuildError):
    """would give untrusted code write access or secrets, or write outside its folder"""

    exit_code = 6
    kind = "refused"


class DiagnosePathError(TrustError):
    """The diagnostics folder or a file name would put diagnostics outside their folder."""


class EngineError(GhbuildError):
    """no usable docker client, the Docker engine unreachable, build or push failed"""

    exit_code = 10
    kind = "engine error"


class BudgetError(GhbuildError):
    """image or stage larger than its budget"""

    exit_code = 11
    kind = "over budget"


class RegistryError(GhbuildError):
    """a registry failed or refused (network, 5xx, auth, wrong content); never a confirmed "missing\""""

    exit_code = 12
    kind = "registry error"


class AuthError(RegistryError):
    """401/403 after authenticating: bad credentials or no permission. Never counts as "missing"."""


class TransientError(RegistryError):
    """Network error, timeout, 429 or 5xx: worth retrying."""


class DigestMismatch(RegistryError):
    """Content did not hash to the digest the registry or the caller named."""


class BaseMismatchError(RegistryError):
    """A ref named by an identity holds an image whose labels say something else."""


class PublishError(GhbuildError):
    """staging image missing or mislabelled, bad version, partial release, failed tag move, a signature or
    provenance that does not verify"""

    exit_code = 13
    kind = "publish error"


class VerificationError(PublishError):
    """A signature, its signed commit and repository, or the image's provenance did not verify; signing failed."""

    kind = "not verified"


class PruneError(GhbuildError):
    """missing or rejected token, incomplete listing, failed deletes"""

    exit_code = 14
    kind = "prune error"


class PruneAbort(PruneError):
    """Nothing more can succeed in this run (credentials refused, rate limit not lifting): stop deleting."""


class RunnerCheckError(GhbuildError):
    """self-hosted runner: GPUs, /dev/kfd, render group, disk, leftover containers"""

    exit_code = 15
    kind = "runner check failed"


class BaseMissingError(GhbuildError):
    """ensure-base --lookup-only: the base is confirmed missing everywhere (the job meant to build it has not)"""

    exit_code = 16
    kind = "base missing"


def require(module: str, extra: str, what: str):
    """Import an optional dependency (an extra of pyproject.toml), or say in one line how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"{what} needs the Python package {module!r}, which this installation does not have: "
                         f"install 'ghbuild[{extra}]' (the setup action's `extras` input)") from None


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, kind, meaning) for every code, in order: the `--help` epilog and the README table."""
    seen: dict[int, tuple[int, str, str]] = {}
    pending = list(GhbuildError.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending += cls.__subclasses__()
        if cls.exit_code not in seen and cls.__module__ == __name__:
            seen[cls.exit_code] = (cls.exit_code, cls.kind, " ".join((cls.__doc__ or "").split()))
    return sorted(seen.values())


def help_epilog() -> str:
    lines = ["exit codes:", "  0   success"]
    lines += [f"  {code:<3} {kind}: {meaning}" for code, kind, meaning in exit_codes()]
    lines.append("  130 interrupted")
    return "\n".join(lines)
