"""The GitHub Actions cache budget: `ghbuild cache [--apply]`, and the build job's warning.

GitHub keeps a repository's Actions caches up to a budget (10 GB unless the repository's limit was raised:
config `cache.budget`) and evicts the oldest entries beyond it, whoever they belong to: a busy repository's
pull requests push the trusted branch's layer cache out. `ghbuild cache` lists every entry (REST API), groups
them by the ref GitHub stores them under and by the ghbuild scope their BuildKit index keys name
(`scopes`), shows each group's size against the budget, and with `apply=True` deletes the entries of closed
pull requests and of deleted branches: never the trusted scope, never the default branch's, never without
`apply` (a dry run by default, as `ghbuild prune`).

- `scopes`: pure; entries in, groups and verdicts out;
- `client`: the REST calls, on ghbuild's HTTP stack and its retry policy;
- `result`: CacheResult (`to_dict()` is the JSON of `ghbuild cache --json`), `render`, `markdown`;
- `budget`: the build job's check of the usage endpoint against `cache.warn-share`;
- here: `run`, the listing, the verdicts and the delete loop.

GITHUB_API_URL redirects the API (GitHub Enterprise Server, tests).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from ghbuild.actions_cache.client import ActionsCacheClient
from ghbuild.actions_cache.result import CacheResult, entries, entry_dict, markdown, render
from ghbuild.actions_cache.scopes import (
    PULL_REQUEST,
    CacheEntry,
    Group,
    Repository,
    decide,
    group_entries,
    mismatches,
    needs_state,
)
from ghbuild.errors import PruneAbort, PruneError
from ghbuild.sizes import format_size

__all__ = ["CacheResult", "markdown", "raise_for_failures", "render", "run"]

Log = Callable[[str], None]
PACE = 1.0     # seconds between two deletes: GitHub asks for a second between writes (secondary rate limits)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def repository_facts(options: Any, repository: str, default_branch: str) -> Repository:
    canonical = options.trust.canonical_repository
    return Repository(repository, default_branch, options.trust.stable_branch or default_branch,
                      canonical is None or canonical == repository.lower(), tuple(options.images),
                      tuple(options.publish.arch_suffixes.values()))


def run(options: Any, repository: str, env: Mapping[str, str], *, apply: bool = False, log: Log = _stderr,
        sleep: Callable[[float], None] = time.sleep, pace: float | None = None, **client_kwargs: Any) -> CacheResult:
    """List, group and judge the repository's Actions caches; with `apply`, delete the closed pull requests'
    and deleted branches' entries (`pace` seconds apart, default PACE). GITHUB_TOKEN (actions: read to list,
    actions: write to delete), GITHUB_API_URL. Raises PruneError for a missing or rejected token or an
    unreadable listing before anything is deleted; failed deletes are in the result's `errors` (`ok` False). A
    listing longer than the client's max_pages is judged as far as it goes, with a note."""
    client = ActionsCacheClient(repository, env.get("GITHUB_TOKEN"), env.get("GITHUB_API_URL"), sleep=sleep,
                                log=log, **client_kwargs)
    repo = repository_facts(options, repository, client.default_branch())
    result = CacheResult(repository, client.api_url, not apply, options.cache.budget, repo.default_branch,
                         repo.stable_branch)
    entries = [e for e in map(CacheEntry.from_api, client.list_caches()) if e is not None]
    result.pages, result.total_count = client.pages, client.total_count
    unique = len({e.id for e in entries})
    if client.cut_at is not None:
        result.notes.append(f"the listing stopped after {client.pages} pages ({unique} entries, oldest first): the "
                            f"entries from {client.cut_at} on were not seen, so neither judged nor deleted")
    elif result.total_count is not None and result.total_count != unique:
        result.notes.append(f"GitHub counted {result.total_count} entries and listed {unique}: the caches changed "
                            "while they were listed")
    try:
        size, count = client.usage()
        result.usage = {"size": size, "entries": count}
    except PruneAbort:
        raise
    except PruneError as exc:
        result.notes.append(f"usage not read ({exc}); the sizes are the listing's")
    result.groups = group_entries(entries, repo)
    _judge(client, result.groups, repo.default_branch, result.notes)
    result.notes += mismatches(result.groups)
    _delete(client, result, apply=apply, log=log, sleep=sleep, pace=PACE if pace is None else pace)
    result.ok = not result.errors
    return result


def _judge(client: ActionsCacheClient, groups: list[Group], default_branch: str, notes: list[str]) -> None:
    """Each group's verdict; GitHub asked about a pull request or branch only where the verdict depends on it.
    A branch counts as deleted (404) only once the default branch reads as existing: a token that sees no
    branch at all (a private repository without contents: read) answers 404 for every one."""
    branches_visible: bool | None = None
    for group in groups:
        if not needs_state(group):
            decide(group, None)
            continue
        if group.kind != PULL_REQUEST and branches_visible is None:
            branches_visible = _lookup(client.branch_state, default_branch)[0] == "exists"
            if not branches_visible:
                notes.append(f"the default branch {default_branch} reads as missing: the token cannot see branches "
                             "(contents: read), so no branch counts as deleted")
        if group.kind == PULL_REQUEST:
            state, why = _lookup(client.pull_state, group.name)
        elif branches_visible:
            state, why = _lookup(client.branch_state, group.name)
        else:
            state, why = "unknown", "the token cannot see branches"
        decide(group, state, why)


def _lookup(ask: Callable[[str], tuple[str, str]], name: str) -> tuple[str, str]:
    """A pull request's or branch's state; a failed look-up is "unknown" (kept), a refused token stops the run."""
    try:
        return ask(name)
    except PruneAbort:
        raise
    except PruneError as exc:
        return "unknown", str(exc)


def _delete(client: ActionsCacheClient, result: CacheResult, *, apply: bool, log: Log,
            sleep: Callable[[float], None], pace: float) -> None:
    """The delete loop: every entry of every group judged "delete", group by group, largest first."""
    attempts = 0
    for group in result.groups:
        if group.action != "delete" or group.protected:
            continue
        label = f"{group.ref}: {entries(len(group.entries))}, {format_size(group.size)} ({group.why})"
        if not apply:
            result.would_delete += [entry_dict(e) for e in group.entries]
            log(f"would delete {label}")
            continue
        failed = len(result.errors)
        for entry in group.entries:
            if attempts and pace > 0:
                sleep(pace)
            attempts += 1
            try:
                gone = client.delete(entry.id)
            except PruneAbort as exc:
                result.errors.append({**entry_dict(entry), "error": str(exc)})
                log(f"stopping: {exc}")
                return
            except PruneError as exc:
                result.errors.append({**entry_dict(entry), "error": str(exc)})
                continue
            result.deleted.append({**entry_dict(entry), **({} if gone else {"already_gone": True})})
        failed = len(result.errors) - failed
        log(f"deleted {label}" + (f"; {failed} failed" if failed else ""))


def raise_for_failures(result: CacheResult) -> None:
    if result.errors:
        raise PruneError(f"cache: {entries(len(result.errors))} not deleted: "
                         + "; ".join(str(e["error"]) for e in result.errors[:3]))
