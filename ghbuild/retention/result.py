"""What a prune run returns (PruneResult, `to_dict()` is the JSON of `ghbuild prune --json`), its
human-readable summary (`render`) and its job summary (`markdown`)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ghbuild.retention.plan import PrunePlan, TagInfo

Entry = dict[str, Any]   # {"tags", "digest", "pushed", "commit" | "version_id", "reason"}; errors add "error"


@dataclass
class PruneResult:
    """One image's prune run. kept / skipped_referenced / deleted / would_delete / errors are lists of
    entries; `ok` is False when any delete failed or the run stopped."""

    image: str
    repository: str
    backend: str                 # "dockerhub" | "ghcr" | "registry"
    api: str | None              # the API base URL (None for a plain registry)
    dry_run: bool
    keep: int
    kept: list[Entry] = field(default_factory=list)
    deleted: list[Entry] = field(default_factory=list)
    would_delete: list[Entry] = field(default_factory=list)
    skipped_referenced: list[Entry] = field(default_factory=list)
    errors: list[Entry] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    ok: bool = True
    dangling: list[Entry] = field(default_factory=list)   # {"digest", "referenced_by"}: missing manifests

    def fill(self, plan: PrunePlan, tags: Sequence[TagInfo]) -> None:
        """What the plan keeps, and its counts."""
        self.kept = [d.to_dict() for d in plan.keep if d.kind in ("newest", "moving", "no-time")]
        self.skipped_referenced = [d.to_dict() for d in plan.referenced]
        self.stats.update(tags=len(tags), candidates=len(plan.delete) + sum(
            d.kind in ("newest", "no-time", "referenced") for d in plan.keep), commits=len(plan.commits),
            commits_kept=len(plan.kept_commits) + sum(t is None for _, t in plan.commits),
            other_tags=sum(d.kind == "other" for d in plan.keep))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `ghbuild prune --json` prints for this image (keys in this order)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}


def _label(e: Entry) -> str:
    return ", ".join(e.get("tags") or []) or f"untagged {str(e.get('digest'))[:19]}"


def _outcomes(result: PruneResult):
    """(outcome, entry, why) for every tag the run looked at, kept first."""
    for entries, title in ((result.kept, "keep"), (result.skipped_referenced, "keep (referenced)"),
                           (result.would_delete, "would delete"), (result.deleted, "deleted")):
        for e in entries:
            yield title, e, e.get("reason", "")
    for e in result.errors:
        yield "FAILED", e, e.get("error")
    for e in result.dangling:
        yield "MISSING", {"digest": e["digest"]}, f"referred to by {e['referenced_by']}; the registry lacks it"


def render(result: PruneResult) -> str:
    """Human-readable summary for the CLI."""

    head = f"ghbuild prune: {result.repository} ({result.backend}), keep the newest {result.keep} commits"
    lines = [head + (" (dry run: nothing deleted)" if result.dry_run else "")]
    lines += [f"  {title:<18} {_label(e)}  {why}" for title, e, why in _outcomes(result)]
    s = result.stats
    lines.append(f"  {s.get('tags', 0)} tags, {s.get('commits', 0)} commits; "
                 f"{len(result.deleted or result.would_delete)} "
                 f"{'to delete' if result.dry_run else 'deleted'}, {len(result.errors)} failed")
    return "\n".join(lines)


def markdown(results: Sequence[PruneResult]) -> str:
    """The prune job's summary: per image, every tag kept or deleted and why; a dry run marked as one."""
    from ghbuild.markdown import code, md

    lines = []
    for result in results:
        mode = "**dry run**: nothing deleted" if result.dry_run else "applied"
        lines += [f"### ghbuild prune: {code(result.repository)} ({md(result.backend)})", "",
                  f"{mode}; keep the newest {result.keep} commits. {len(result.deleted or result.would_delete)} "
                  f"{'would be deleted' if result.dry_run else 'deleted'}, {len(result.errors)} failed.", ""]
        rows = list(_outcomes(result))
        if rows:
            lines += ["| outcome | tags | digest | why |", "|---|---|---|---|"]
            lines += [f"| {md(title)} | {', '.join(code(t) for t in e.get('tags') or []) or 'untagged'} "
                      f"| {code(str(e.get('digest') or '-')[:19])} | {md(why or '')} |" for title, e, why in rows]
            lines.append("")
    return "\n".join(lines) + "\n"
