"""Retention of nightly tags: `ghbuild prune [--keep N] [--apply]`.

Pruning keeps the newest N commits of an image's publish repository (config `publish.retention`, default
14) and deletes the older per-commit nightly tags; it is a dry run unless `apply=True`. One module per
concern, like cibuildwheel's platform backends:

- `plan`: the pure planner (what stays, what goes, per repository, multi-arch aware);
- `backend`: the one interface the delete loop needs; implemented by `dockerhub` (the Hub API),
  `ghcr` (the GitHub packages API) and `oci` (the plain distribution API, any other registry), picked
  from the publish repository's host;
- `result`: PruneResult (`to_dict()` is the JSON of `ghbuild prune --json`), `render` and `markdown`;
- here: `run` (the entry point) and `prune`, the one delete loop.

Endpoints can be redirected (tests, demos): GHBUILD_DOCKERHUB_API (Docker Hub API base URL) and the
standard GITHUB_API_URL.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ghbuild import naming
from ghbuild.errors import ConfigError, PruneAbort, PruneError
from ghbuild.retention.backend import Backend, Item
from ghbuild.retention.plan import plan_prune
from ghbuild.retention.result import PruneResult, markdown, render

__all__ = ["Backend", "PruneResult", "markdown", "prune", "prune_images", "raise_for_failures", "render",
           "resolve_repository", "run"]

if TYPE_CHECKING:   # annotations only: the registry client loads with a backend (ghbuild.retention.backends)
    from ghbuild.http.session import Session
    from ghbuild.registry.client import RegistryFactory

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def resolve_repository(options, image: str, owner: str | None, env: Mapping[str, str]) -> str:
    """The publish repository of `image` (registries.publish or the image's own), `{owner}` filled in."""
    if image not in options.images:
        raise ConfigError(f"--image {image}: no such image (known: {', '.join(options.images)})")
    template = options.images[image].publish or options.registries.publish
    if not template:
        raise ConfigError(f"{options.config_path}: registries.publish: not set; nothing to prune")
    owner = owner or env.get("GITHUB_REPOSITORY_OWNER") or (env.get("GITHUB_REPOSITORY") or "").partition("/")[0]
    if "{owner}" in template and not owner:
        raise ConfigError(f"registries.publish {template!r} needs {{owner}}: set GITHUB_REPOSITORY (or pass owner)")
    return naming.validate_repository(naming.expand_repository(template, image, owner or ""), "registries.publish")


def run(options, image: str, keep: int | None = None, apply: bool = False,
        env: Mapping[str, str] | None = None, hub_api: str | None = None, github_api: str | None = None,
        log: Log = _stderr, *, owner: str | None = None,
        registry_factory: RegistryFactory | None = None, sleep: Callable[[float], None] = time.sleep,
        pace: float | None = None, session: Session | None = None) -> PruneResult:
    """Prune the nightly tags of one image's publish repository; a dry run unless `apply`.

    The backend follows the repository's host: Docker Hub (DOCKERHUB_USERNAME, DOCKERHUB_TOKEN; `hub_api`
    or GHBUILD_DOCKERHUB_API), GHCR (GITHUB_TOKEN; `github_api` or GITHUB_API_URL; index manifests read
    through `registry_factory(host)`), else the plain registry API (`registry_factory`, default
    ghbuild.registry.client.client_factory(env, log)). `pace`: seconds between deletes (default: the backend's).
    Raises PruneError (missing or refused credentials, incomplete listing) before anything is deleted;
    failed deletes are in the result's `errors` (`ok` False).
    """
    env = os.environ if env is None else env
    keep = options.publish.retention if keep is None else keep
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise PruneError(f"--keep {keep!r}: must be a whole number of commits, at least 1")
    repository = resolve_repository(options, image, owner, env)
    nightly, suffixes = options.publish.nightly_tag, tuple(options.publish.arch_suffixes.values())
    # Loaded here, not at the top: the HTTP stack and the registry client are needed only from this point,
    # and `ghbuild prune` prints its first line before it (bench/startup.py).
    from ghbuild.retention.backends import open_backend

    backend, api = open_backend(repository, env, nightly=nightly, suffixes=suffixes, hub_api=hub_api,
                                github_api=github_api, registry_factory=registry_factory, sleep=sleep, log=log,
                                session=session)
    result = PruneResult(image, repository, backend.name, api, not apply, keep)
    return prune(backend, result, nightly, suffixes, apply=apply, log=log, sleep=sleep,
                 pace=backend.pace if pace is None else pace)


def prune(backend: Backend[Item], result: PruneResult, nightly: str = "nightly",
          suffixes: Iterable[str] = ("x86_64", "arm64"), *, apply: bool = False, log: Log = _stderr,
          sleep: Callable[[float], None] = time.sleep, pace: float = 0.5) -> PruneResult:
    """The delete loop, for every backend: list, plan, then delete oldest first (index before children).

    Dry run (`apply` False): every deletion goes to `would_delete`, nothing is deleted. Otherwise `pace`
    seconds between two deletes, and immediately before each the backend says whether the repository
    changed since the plan (one that deletes by digest lists it again: any tag that appeared, went or moved,
    other than by this run's deletes, stops the run there, recorded in `errors`). PruneAbort stops the loop
    too; PruneError is recorded and the loop goes on; the children of an index whose delete failed are never
    deleted. Manifests a kept index refers to that the registry lacks are reported in `dangling` (they never
    stop a run). `result.ok` is False when anything failed.
    """
    tags = backend.list_tags()
    plan = plan_prune(tags, result.keep, nightly, suffixes)
    result.fill(plan, tags)
    _note_dangling(backend, result, log)
    items, skipped = backend.deletions(plan, tags)
    result.skipped_referenced += skipped
    result.stats.update(backend.stats())
    log(f"{result.repository}: {backend.summary()}; {len(plan.commits)} commits, keeping the newest "
        f"{result.keep}; {len(items)} {backend.unit} to delete")
    attempts = 0
    failed: set[str] = set()     # digests whose delete failed: their children stay
    gone_tags: set[str] = set()  # tags this run deleted (expected to be missing from a new listing)
    for item in items:
        entry = backend.entry(item)
        if entry is None:
            continue
        label = backend.label(item)
        if not apply:
            result.would_delete.append(entry)
            log(f"would delete {label}: {item.reason}")
            continue
        if item.parent is not None and item.parent in failed:
            result.errors.append({**entry, "error": "not deleted: its index could not be deleted"})
            continue
        if attempts and pace > 0:
            sleep(pace)
        attempts += 1
        stop = backend.changed_since_plan(tags, gone_tags)
        if stop:
            result.errors.append({**entry, "error": stop})
            log(f"stopping: {stop}")
            break
        try:
            gone = backend.delete(item)
        except PruneAbort as exc:
            result.errors.append({**entry, "error": str(exc)})
            log(f"stopping: {exc}")
            break
        except PruneError as exc:
            result.errors.append({**entry, "error": str(exc)})
            if item.digest:
                failed.add(item.digest)
            log(f"failed: {exc}")
            continue
        gone_tags.update(item.tags)
        if not gone:
            entry["already_gone"] = True
        result.deleted.append(entry)
        log(f"deleted {label}" + ("" if gone else " (already gone)"))
    result.stats["deletes"] = attempts
    result.ok = not result.errors
    return result


def _note_dangling(backend: Backend[Any], result: PruneResult, log: Log) -> None:
    for digest, index in sorted(backend.missing().items()):
        result.dangling.append({"digest": digest, "referenced_by": index})
        log(f"warning: {result.repository}@{index} refers to {digest}, which the registry does not have")


def prune_images(options, images: Iterable[str], *, keep: int | None = None, apply: bool = False,
                 owner: str | None = None, say: Log = _stderr,
                 group: Callable[[str], AbstractContextManager[Any]] | None = None, **kwargs: Any) -> list[PruneResult]:
    """`run` for each image, each folded in its own `group`, its report handed to `say`. Failed deletes are
    collected, not raised, so one run reports all of them: `raise_for_failures` afterwards."""
    group = group or (lambda title: contextlib.nullcontext())
    results = []
    for image in images:
        with group(f"prune {image}{'' if apply else ' (dry run)'}"):
            result = run(options, image, keep=keep, apply=apply, owner=owner, **kwargs)
        results.append(result)
        say(render(result))
    return results


def raise_for_failures(results: Iterable[PruneResult]) -> None:
    failed = [r for r in results if not r.ok]
    if failed:
        raise PruneError(f"prune: {len(failed)} image(s) had errors: "
                         + "; ".join(str(e.get("error")) for r in failed for e in r.errors[:3]))
