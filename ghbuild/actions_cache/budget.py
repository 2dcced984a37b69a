"""The build job's look at the repository's GitHub Actions cache: the usage endpoint against `cache.budget`.

Over `cache.warn-share` of the budget, the build's report gets a warning (an annotation and a line in the job
summary); under it, a row in the summary. Never an error: no token means no check, and an API that cannot be
read (no `actions: read`, a network failure, a rate limit) is one note. Asked once, briefly: two tries at most,
no long waits, so a slow API costs the build seconds at most.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ghbuild.actions_cache.client import ActionsCacheClient
from ghbuild.actions_cache.result import entries
from ghbuild.errors import GhbuildError
from ghbuild.sizes import format_size

_QUICK = {"error_attempts": 2, "rate_attempts": 2, "max_wait": 5.0, "backoff": 1.0, "timeout": (5.0, 10.0)}


class BudgetCheck(NamedTuple):
    repository: str
    budget: int
    warn_share: float
    size: int | None = None        # active_caches_size_in_bytes
    entries: int | None = None     # active_caches_count
    note: str | None = None        # why the usage could not be read

    @property
    def share(self) -> float | None:
        return None if self.size is None or self.budget <= 0 else round(self.size / self.budget, 4)

    @property
    def over(self) -> bool:
        return self.share is not None and self.share >= self.warn_share

    @property
    def warning(self) -> str | None:
        if not self.over:
            return None
        return (f"GitHub Actions cache of {self.repository}: {self.describe()}, over cache.warn-share "
                f"({self.warn_share * 100:g}%): beyond the budget GitHub evicts the oldest entries, the trusted "
                "branch's layer cache too; `ghbuild cache` shows what each scope holds, `ghbuild cache --apply` "
                "deletes the entries of closed pull requests and deleted branches")

    def describe(self) -> str:
        """"8.20 GB of 10.00 GB (82%), 340 entries", or the note."""
        if self.size is None:
            return f"not read: {self.note}"
        return (f"{format_size(self.size)} of {format_size(self.budget)} ({(self.share or 0) * 100:.0f}%), "
                f"{entries(self.entries or 0)}")

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "share": self.share, "over": self.over}


def check(options: Any, repository: str, env: Mapping[str, str], *, log: Callable[[str], None] | None = None,
          **client_kwargs: Any) -> BudgetCheck:
    """The repository's cache usage against the configured budget (GITHUB_TOKEN, GITHUB_API_URL)."""
    found = BudgetCheck(repository, options.cache.budget, options.cache.warn_share)
    try:
        client = ActionsCacheClient(repository, env.get("GITHUB_TOKEN"), env.get("GITHUB_API_URL"), log=log,
                                    **{**_QUICK, **client_kwargs})
        size, entries = client.usage()
    except (GhbuildError, OSError, ValueError) as exc:
        return found._replace(note=str(exc).removeprefix("cache: "))
    return found._replace(size=size, entries=entries)
