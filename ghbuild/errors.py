"""The typed error hierarchy. Every error the user can cause maps to one exit code.

The CLI catches `GhbuildError`, prints its one-line message and exits with `exit_code`;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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


class UsageError(GhbuildError):
    """Bad command-line flags (argparse uses exit code 2 for the same)."""

    exit_code = 2
    kind = "usage error"


class ConfigError(GhbuildError):
    """Missing, unreadable or invalid configuration (file, key or GHBUILD_* variable)."""

    exit_code = 3
    kind = "config error"


class ContextError(GhbuildError):
    """The GitHub context cannot be understood: unknown event, malformed payload, missing variable."""

    exit_code = 4
    kind = "context error"


class InvalidReferenceError(GhbuildError):
    """An image, repository or registry name that is not valid."""

    exit_code = 5
    kind = "invalid name"


class TrustError(GhbuildError):
    """A request that would give untrusted code write access or secrets."""

    exit_code = 6
    kind = "refused"


class RunnerCheckError(GhbuildError):
    """A self-hosted runner is not fit for the job: GPUs, /dev/kfd, render group, disk, leftover containers."""

    exit_code = 15
    kind = "runner check failed"
