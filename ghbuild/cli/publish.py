"""`ghbuild publish nightly|release`: the staged images of one commit, copied and tagged where users pull.

The command reads its flags into a typed request first (which commit, whose images, which records), so the
handler only runs it and reports; a run that writes is refused before anything else unless trusted.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from ghbuild.cli import common
from ghbuild.cli.main import interrupt_on_sigterm
from ghbuild.config.options import Options
from ghbuild.errors import GhbuildError, UsageError
from ghbuild.github import gha
from ghbuild.github.git import git_output
from ghbuild.publish import promote, records, report
from ghbuild.publish.results import PublishRun


class Commit(NamedTuple):
    """The commit a publish is about, and whose it is."""

    sha: str
    owner: str
    source_url: str | None           # the canonical repository every image's source label must name
    stable_branch: str | None = None  # whose push/schedule/dispatch runs' keyless signatures count


class PublishRequest(NamedTuple):
    """What `publish KIND` was asked to do, worked out from its flags and the GitHub context."""

    kind: str                        # nightly | release
    images: list[str]
    commit: Commit
    version: str | None
    dry_run: bool
    github_release: bool
    records: Mapping[str, Mapping[str, Any]] | None
    commit_time: Callable[[], int | None]
    lease_wait: float


def _planning() -> ModuleType:
    """The GitHub context and the planner, for a publish that writes or reads another run's records: a dry
    run starts without them (bench/startup.py)."""
    from ghbuild.cli import planning

    return planning


def publish_commit(args: argparse.Namespace, options: Options) -> Commit:
    """The commit to publish; a run that writes is refused here unless it is trusted."""
    if args.dry_run:   # writes nothing: any run, or a laptop, may look
        sha = args.sha or os.environ.get("GITHUB_SHA") or git_output(["rev-parse", "HEAD"], Path.cwd()) or ""
        commit = Commit(sha.lower(), common.owner(args), None)
    else:
        ctx = _planning().require_trusted_run(args, options, f"publish {args.publish_command}")
        commit = Commit((args.sha or ctx.sha).lower(), ctx.repository.split("/")[0],
                        f"{ctx.server_url.rstrip('/')}/{options.trust.canonical_repository or ctx.repository}",
                        _planning().trust(args, options).stable_branch)
    if not commit.sha:
        raise UsageError("publish: no commit (pass --sha, or set GITHUB_SHA)")
    return commit


def publish_request(args: argparse.Namespace, options: Options, commit: Commit) -> PublishRequest:
    kind = args.publish_command

    def commit_time() -> int | None:   # asked only when a tag has to move (a republish runs no git)
        if args.commit_time is not None:
            return int(args.commit_time)
        found = git_output(["show", "-s", "--format=%ct", f"{commit.sha}^{{commit}}"], Path.cwd())
        return int(found) if found and found.isdigit() else None

    release = kind == "release"
    return PublishRequest(
        kind=kind, images=common.published_images(args, options, f"publish {kind}"), commit=commit,
        version=args.version if release else None, dry_run=args.dry_run,
        github_release=not (release and args.no_github_release),
        records=_records(args, options, commit.sha, args.records_from if release else None),
        commit_time=commit_time, lease_wait=args.lease_wait)


def _records(args: argparse.Namespace, options: Options, sha: str,
             records_from: str | None) -> Mapping[str, Mapping[str, Any]] | None:
    """--records (the JSON, a file, a folder) or --records-from WORKFLOW (its trusted push run's artifact of
    commit `sha`)."""
    if args.records and records_from:
        raise UsageError("--records and --records-from: give one")
    if args.records:
        return records.load(args.records)
    if records_from:
        trust = _planning().trust(args, options)
        return records.fetch(os.environ, trust.canonical_repository, records_from, sha, trust.stable_branch,
                             log=common.indented)
    return None


def run_publish(options: Options, request: PublishRequest) -> PublishRun:
    return promote.run(options, request.kind, request.images, sha=request.commit.sha, owner=request.commit.owner,
                       env=os.environ, version=request.version, dry_run=request.dry_run,
                       github_release=request.github_release, records=request.records,
                       source_url=request.commit.source_url, commit_time=request.commit_time,
                       lease_options={"wait": request.lease_wait}, log=common.indented, say=common.log,
                       warn=lambda m: gha.annotate("warning", m), group=gha.group,
                       stable_branch=request.commit.stable_branch)


def emit_publish(outcome: PublishRun, request: PublishRequest, as_json: bool) -> None:
    gha.add_summary(report.summary(outcome, dry_run=request.dry_run))
    if not request.dry_run:
        for result in outcome.results:
            gha.set_output(f"{result.image}-index-digest", result.index_digest or "")
        for name, value in report.outputs(outcome).items():
            gha.set_output(name, value)
    if as_json:
        print(json.dumps(outcome.to_dict(), indent=2))


def cmd_publish(args: argparse.Namespace) -> int:
    interrupt_on_sigterm()
    options = common.load_options(args)
    commit = publish_commit(args, options)
    try:
        request = publish_request(args, options, commit)
        outcome = run_publish(options, request)
    except GhbuildError as exc:   # the job summary says what failed, as it says what was published
        gha.add_summary(report.failure_summary(args.publish_command, exc))
        raise
    emit_publish(outcome, request, args.json)
    return 0
