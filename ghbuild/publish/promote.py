"""Publishing: nightly and release tags and multi-arch manifests, from the per-commit staging images.

Registry to registry (ghbuild.registry.client): only the blobs the target lacks move, nothing passes through
a Docker engine, and a manifest list needs no blobs at all. Every image of one run is published as a
unit, in phases:

1. resolve every per-arch staging image of every image and verify it is the architecture its tag claims
   and the commit the trusted build recorded (before anything is written anywhere);
2. copy each image to the publish repository by digest (no tag moves yet: the slow, failure-prone
   part);
3. push each multi-arch index by digest;
4. move the tags, all images together, under the publish repositories' leases (ghbuild.publish.lease): new
   immutable tags first, moving per-arch tags next, moving index tags last (ghbuild.publish.tag_moves). A
   failure puts back every tag that holds this run's digest, comparing before restoring.

A rerun of the same commit finds everything in place and moves nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ghbuild.config.options import Options
from ghbuild.errors import PublishError, TrustError, UsageError
from ghbuild.github.event import PR_EVENTS
from ghbuild.publish.plans import _nightly_plans, parse_version, trusted_records
from ghbuild.publish.report import release_notes, render
from ghbuild.publish.results import PublishRun

# The registry layer (ghbuild.registry, ghbuild.publish.copy, execute, lease and tag_moves) is imported once
# the checks have passed: a publish refused before its first request (no build records, a pull request, a bad
# version) does not pay for it.

if TYPE_CHECKING:   # annotations only
    from ghbuild.registry import client as registry


def create_github_release(env: Mapping[str, str], version, sha: str, body: str, prerelease: bool,
                          make_latest: bool) -> str:
    """Create (or find) the GitHub release `v<V>` through PyGithub; returns its URL."""
    from github import Auth, Github, GithubException

    repository = env.get("GITHUB_REPOSITORY")
    token = env.get("GITHUB_TOKEN")
    if not repository or not token:
        raise PublishError("GitHub release: GITHUB_REPOSITORY and GITHUB_TOKEN are needed "
                           "(or pass --no-github-release)")
    client = Github(base_url=env.get("GITHUB_API_URL") or "https://api.github.com", auth=Auth.Token(token),
                    seconds_between_writes=0.1)
    tag = f"v{version}"
    try:
        repo = client.get_repo(repository)
        try:
            return repo.get_release(tag).html_url            # a rerun: the release is already there
        except GithubException as exc:
            if exc.status != 404:
                raise
        release = repo.create_git_release(tag=tag, name=tag, message=body, prerelease=prerelease,
                                          target_commitish=sha, make_latest="true" if make_latest else "false")
        return release.html_url
    except GithubException as exc:
        message = (exc.data or {}).get("message") if isinstance(exc.data, dict) else None
        raise PublishError(f"GitHub release {tag} in {repository}: HTTP {exc.status} {message or ''}".strip()) from None


# --------------------------------------------------------------------------- one publishing run

def refuse_pull_requests(env: Mapping[str, str]) -> None:
    """Publishing is for trusted schedule, push and workflow_dispatch runs, never a pull request's."""

    event = env.get("GITHUB_EVENT_NAME")
    if event in PR_EVENTS:
        raise TrustError(f"publish: refused in a {event} run (publishing is for trusted schedule, push and "
                         "workflow_dispatch runs)")


def run(options: Options, kind: str, images: list[str], *, sha: str, owner: str, env: Mapping[str, str],
        version: str | None = None, dry_run: bool = False, github_release: bool = True,
        records: Mapping[str, Mapping[str, Any]] | None = None, source_url: str | None = None,
        factory: registry.RegistryFactory | None = None, commit_time: int | Callable[[], int | None] | None = None,
        lease_options: Mapping[str, Any] | None = None, log: Callable[[str], None] = lambda m: None,
        say: Callable[[str], None] = lambda m: None, warn: Callable[[str], None] = lambda m: None,
        group: Callable[[str], Any] | None = None, stable_branch: str | None = None) -> PublishRun:
    """Publish `images` of commit `sha` as a nightly or as release `version` (checked before anything else).

    Only what the trusted build recorded is published: `records` (job id -> `build --record` record, as
    `ghbuild digests` collects them) give each arch's digest, so a staging tag moved since cannot slip in;
    `source_url` (the canonical repository's URL) is what every image's source label must name, with
    `sha` as its revision. Every image is checked and copied before any tag moves, and the tags of all
    of them move in one phase (`execute_all`); `commit_time` (Unix seconds of `sha`) keeps an older
    commit's nightly from moving tags a newer one holds; `lease_options` tune
    ghbuild.publish.lease.Lease. Without records only a dry run proceeds (it reads the staging tags).
    `log` takes progress lines, `say` the per-image report and the GitHub release line, `warn` what a
    workflow should show as a warning; `group` (a context manager factory) folds each image's log.
    """
    refuse_pull_requests(env)
    version = parse_version(version or "") if kind == "release" else None
    recorded = trusted_records(records, sha)
    if recorded is None and not dry_run:
        raise PublishError(f"publish {kind}: no build records (--records): only what the trusted build of {sha} "
                           "recorded is published, never whatever a staging tag holds now")
    if recorded is not None and not recorded:
        raise PublishError(f"publish {kind}: no trusted build record of {sha}")
    if recorded is None:
        warn(f"publish {kind} (dry run): no build records: reading the staging tags instead")
    if kind == "release" and github_release and not dry_run and not (env.get("GITHUB_TOKEN")
                                                                     and env.get("GITHUB_REPOSITORY")):
        raise UsageError("publish release: GITHUB_TOKEN and GITHUB_REPOSITORY are needed for the GitHub release "
                         "(or pass --no-github-release)")
    from ghbuild.publish import copy, execute, signing  # the registry layer: not for a publish refused above
    from ghbuild.registry import client as registry

    canonical = options.trust.canonical_repository or env.get("GITHUB_REPOSITORY")
    trust = signing.for_publish(env, canonical,
                                source_url if recorded is not None else None,
                                [name for name in images if options.images[name].attest.provenance == "off"],
                                stable_branch or options.trust.stable_branch)
    unchecked = signing.gate(trust, f"publish {kind}", dry_run) if trust is not None else None
    if unchecked:           # before any registry request; refused (exit 13) in GitHub Actions
        warn(unchecked)
    if factory is None:
        factory = registry.client_factory(env, log)
    if kind == "release":
        plans = copy._release_plans(options, images, sha, owner, version, factory, warn, recorded, source_url)
    else:
        plans = _nightly_plans(options, images, sha, owner, recorded, source_url)
    group = group or (lambda title: contextlib.nullcontext())
    outcome = PublishRun(kind=kind, sha=sha, results=[], version=version, unchecked=unchecked)
    title = f"publish {kind} {', '.join(p.image for p in plans)}{' (dry run)' if dry_run else ''}"
    if plans:
        with group(title):
            outcome.results = execute.execute_all(plans, factory, dry_run=dry_run, log=log, commit_time=commit_time,
                                                  warn=warn, trust=trust, **(lease_options or {}))
    for plan, result in zip(plans, outcome.results, strict=True):
        say(render(result, plan.kind))
    if kind == "release" and outcome.results:
        outcome.latest = any("latest" in p.index_tags for p in plans)
        if not github_release or dry_run:
            say(f"  GitHub release v{version}: " + ("skipped (--no-github-release)" if not github_release
                                                    else "would be created"))
        else:
            assert version is not None   # a release run parsed it above
            notes = release_notes(outcome, canonical or "", trust.signer.mode if trust else "none",
                                  stable_branch or options.trust.stable_branch)
            outcome.github_release = create_github_release(env, version, sha, notes, version.is_prerelease,
                                                           outcome.latest)
            say(f"  GitHub release: {outcome.github_release}")
    return outcome
