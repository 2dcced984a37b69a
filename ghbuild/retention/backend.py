"""The one interface the delete loop (ghbuild.retention.prune) needs from a registry backend.

A backend deletes one kind of item, and its type says which: `Backend[Decision]` deletes single tags
(DockerHubBackend, ghbuild.retention.dockerhub), `Backend[DigestDeletion]` deletes manifests by digest, with
every tag on them (GhcrBackend, ghbuild.retention.ghcr; OciBackend, ghbuild.retention.oci). What differs
between the two kinds is in `DeletesTags` and `DeletesDigests`, which the backends inherit: which items a plan
makes, and whether the repository must be listed again before each delete. A test can implement either in
memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ghbuild.errors import PruneAbort, PruneError
from ghbuild.retention.plan import Decision, DigestDeletion, PrunePlan, TagInfo, listing_changes, plan_digests

Entry = dict[str, Any]      # a result entry: {"tags", "digest", "pushed", "reason", ...}


class Deletion(Protocol):
    """What the loop reads of an item: the tags it removes, its digest, the index it goes with, why."""

    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def digest(self) -> str | None: ...
    @property
    def parent(self) -> str | None: ...
    @property
    def reason(self) -> str: ...


Item = TypeVar("Item", bound=Deletion)


class Backend(Protocol[Item]):
    name: str          # the result's `backend`: "dockerhub" | "ghcr" | "registry"
    unit: str          # what one delete removes, for the log: "tag(s)", "version(s)", "manifest(s)"
    pace: float        # seconds between two deletes unless the run says otherwise

    def list_tags(self) -> list[TagInfo]:
        """Every tag with its digest, push time and (an index) children. Raises PruneError (PruneAbort when
        the credentials are refused) rather than return a partial list."""
        ...

    def summary(self) -> str:
        """What the listing saw, for the log ("33 tags in 4 page(s)")."""
        ...

    def stats(self) -> dict[str, int]:
        """Backend counters for the result's stats (pages, versions), after list_tags."""
        ...

    def missing(self) -> dict[str, str]:
        """Manifests a listed index refers to that the registry lacks (missing digest -> index), after list_tags."""
        ...

    def deletions(self, plan: PrunePlan, tags: Sequence[TagInfo]) -> tuple[list[Item], list[Entry]]:
        """What the plan deletes, in order, as this backend deletes it; and the entries kept on the way (children
        of a deleted index that a kept tag refers to)."""
        ...

    def changed_since_plan(self, planned: Sequence[TagInfo], gone_tags: set[str]) -> str | None:
        """Immediately before a delete: why the loop must stop (the repository changed since `planned`, other than
        by the tags this run deleted), or None."""
        ...

    def entry(self, item: Item) -> Entry | None:
        """The result entry of one deletion ({"tags", "digest", "pushed", "reason", ...}); None to skip it
        (nothing left to delete there)."""
        ...

    def label(self, item: Item) -> str:
        """How the log names one deletion."""
        ...

    def delete(self, item: Item) -> bool:
        """Delete one item: True deleted, False already gone. PruneAbort: stop the run; PruneError: this
        item failed, go on with the next."""
        ...


class DeletesTags:
    """For a backend that deletes one tag at a time: the plan's tags as they are. A tag delete cannot take
    another tag with it, so nothing needs checking before it."""

    def deletions(self, plan: PrunePlan, tags: Sequence[TagInfo]) -> tuple[list[Decision], list[Entry]]:
        return list(plan.delete), []

    def changed_since_plan(self, planned: Sequence[TagInfo], gone_tags: set[str]) -> str | None:
        return None

    def missing(self) -> dict[str, str]:
        return {}


class DeletesDigests:
    """For a backend that deletes manifests by digest: a digest goes only when every tag on it goes, an index's
    children with it (plan_digests). Deleting a digest removes every tag on it, so before each delete the
    repository is listed again: a tag that appeared, went or moved (a publish running at the same time may
    refer to what the plan would delete) stops the run."""

    list_tags: Callable[[], list[TagInfo]]      # the backend's own listing, asked again before each delete

    def deletions(self, plan: PrunePlan, tags: Sequence[TagInfo]) -> tuple[list[DigestDeletion], list[Entry]]:
        return plan_digests(plan, tags, {t.digest: t.children for t in tags if t.digest and t.children})

    def changed_since_plan(self, planned: Sequence[TagInfo], gone_tags: set[str]) -> str | None:
        try:
            now = self.list_tags()
        except (PruneError, PruneAbort) as exc:
            return f"not deleted: listing again before the delete failed ({exc})"
        changes = listing_changes(planned, now, gone_tags)
        if changes:
            shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")
            return f"not deleted: the repository changed since the plan ({shown}); stopped, rerun to plan again"
        return None

    def missing(self) -> dict[str, str]:
        return {}
