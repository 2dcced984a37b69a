"""The run as GitHub describes it: the events ghbuild supports and the typed context read from them.

Pure: the planner and publish decide on this object; `ghbuild.github.context` builds it from the
environment, the event payload and the git checkout.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

EVENTS = ("push", "pull_request", "pull_request_target", "schedule", "workflow_dispatch", "merge_group")
PR_EVENTS = ("pull_request", "pull_request_target")


class GitHubContext(NamedTuple):
    event: str
    repository: str                  # owner/name the workflow runs in, as GitHub spells it
    ref: str                         # full ref, refs/heads/x, refs/pull/N/merge, refs/tags/v1
    sha: str                         # the commit being built
    default_branch: str | None = None
    pull_request: int | None = None
    base_ref: str | None = None      # PR / merge queue: target branch name
    head_ref: str | None = None      # PR: source branch name
    head_repository: str | None = None
    head_sha: str | None = None
    # True when the PR's head lives in another repository (from payload ids). None: unknown.
    is_fork: bool | None = None
    # GITHUB_REF_PROTECTED: branch protection or a ruleset applies to the ref. None: not reported.
    ref_protected: bool | None = None
    run_id: str | None = None
    run_attempt: str | None = None
    server_url: str = "https://github.com"
    inputs: Mapping[str, Any] = MappingProxyType({})
    # Why a field has the value it has, when it was inferred rather than read ("default_branch": "...").
    notes: tuple[str, ...] = ()

    @property
    def branch(self) -> str | None:
        """The branch the run is on (not for pull requests, whose ref is refs/pull/...)."""
        if self.ref.startswith("refs/heads/"):
            return self.ref[len("refs/heads/"):]
        return None

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        data["inputs"] = dict(self.inputs)
        data["notes"] = list(self.notes)
        return data
