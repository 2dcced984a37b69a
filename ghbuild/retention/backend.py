"""The one interface the delete loop (ghbuild.retention.prune) needs from a registry backend.

Implemented by DockerHubBackend (ghbuild.retention.dockerhub), GhcrBackend (ghbuild.retention.ghcr) and
OciBackend (ghbuild.retention.oci); a test can implement it in memory.
"""

from __future__ import annotations

from typing import Any, Protocol, Union

from ghbuild.retention.plan import Decision, DigestDeletion, TagInfo

# What the loop deletes: one tag (a backend that deletes by tag) or one digest with every tag on it (a
# backend that deletes by digest; an index's children follow it with `parent` set).
Deletion = Union[Decision, DigestDeletion]


class Backend(Protocol):
    name: str          # the result's `backend`: "dockerhub" | "ghcr" | "registry"
    by_digest: bool    # deletes manifests by digest (plan_digests) rather than single tags (plan.delete)
    unit: str          # what one delete removes, for the log: "tag(s)", "version(s)", "manifest(s)"
    pace: float        # seconds between two deletes unless the run says otherwise

    def list_tags(self) -> list[TagInfo]:
        """Every tag with its digest, push time and (an index) children. Raises PruneError (PruneAbort when
        the credentials are refused) rather than return a partial list."""

    def summary(self) -> str:
        """What the listing saw, for the log ("33 tags in 4 page(s)")."""

    def stats(self) -> dict[str, int]:
        """Backend counters for the result's stats (pages, versions), after list_tags."""

    def entry(self, item: Deletion) -> dict[str, Any] | None:
        """The result entry of one deletion ({"tags", "digest", "pushed", "reason", ...}); None to skip it
        (nothing left to delete there)."""

    def label(self, item: Deletion) -> str:
        """How the log names one deletion."""

    def delete(self, item: Deletion) -> bool:
        """Delete one item: True deleted, False already gone. PruneAbort: stop the run; PruneError: this
        item failed, go on with the next."""
