"""What a `ghbuild cache` run found and did (`CacheResult`; `to_dict()` is the JSON of `ghbuild cache --json`),
its terminal table (`render`) and its job summary (`markdown`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ghbuild.actions_cache.scopes import CacheEntry, Group, by_scope, share, totals
from ghbuild.markdown import code, md
from ghbuild.sizes import format_size

Entry = dict[str, Any]     # {"id", "ref", "key", "size"}; errors add "error"


def entry_dict(entry: CacheEntry) -> Entry:
    return {"id": entry.id, "ref": entry.ref, "key": entry.key, "size": entry.size}


@dataclass
class CacheResult:
    repository: str
    api: str
    dry_run: bool
    budget: int
    default_branch: str = ""
    stable_branch: str = ""
    usage: dict[str, int] | None = None      # {"size", "entries"} from the usage endpoint
    groups: list[Group] = field(default_factory=list)
    pages: int = 0
    total_count: int | None = None           # what GitHub's listing said it held
    deleted: list[Entry] = field(default_factory=list)
    would_delete: list[Entry] = field(default_factory=list)
    errors: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ok: bool = True

    @property
    def used(self) -> int:
        """The repository's bytes: the usage endpoint's figure, else what the listing added up to."""
        return self.usage["size"] if self.usage else int(totals(self.groups, self.budget)["size"])

    def to_dict(self) -> dict[str, Any]:
        listed = dict(totals(self.groups, self.budget), pages=self.pages, total_count=self.total_count)
        return {"repository": self.repository, "api": self.api, "dry_run": self.dry_run, "budget": self.budget,
                "used": self.used, "share": share(self.used, self.budget), "usage": self.usage,
                "default_branch": self.default_branch, "stable_branch": self.stable_branch, "listed": listed,
                "groups": [g.to_dict(self.budget) for g in self.groups], "scopes": by_scope(self.groups),
                "deleted": self.deleted, "would_delete": self.would_delete, "errors": self.errors,
                "notes": self.notes, "ok": self.ok}


def entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def _scopes(group: Group) -> str:
    return "; ".join(f"{scope} ({', '.join(sorted(data['images'])) or data['kind']})"
                     for scope, data in sorted(group.scopes.items())) or "-"


def _headline(result: CacheResult) -> str:
    count = result.usage["entries"] if result.usage else sum(len(g.entries) for g in result.groups)
    return (f"{format_size(result.used)} of {format_size(result.budget)} "
            f"({_percent(share(result.used, result.budget))}) in {entries(count)}")


def _outcome(result: CacheResult) -> str:
    gone = result.would_delete if result.dry_run else result.deleted
    size = sum(int(e["size"]) for e in gone)
    verb = "would delete" if result.dry_run else "deleted"
    return f"{verb} {entries(len(gone))} ({format_size(size)}), {len(result.errors)} failed"


def render(result: CacheResult) -> str:
    """The terminal table: one row per ref GitHub stores entries under, largest first."""
    lines = [f"ghbuild cache: {result.repository}, {_headline(result)}"
             + (" (dry run: nothing deleted)" if result.dry_run else "")]
    rows = [("REF", "KIND", "SIZE", "SHARE", "ENTRIES", "STATE", "ACTION", "GHBUILD SCOPES (IMAGES)")]
    rows += [(g.ref, g.kind, format_size(g.size), _percent(share(g.size, result.budget)), str(len(g.entries)),
              g.state or "-", g.action, _scopes(g)) for g in result.groups]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])
    if not result.groups:
        lines.append("  (no caches)")
    lines += [f"  {g.ref}: kept, {g.why}" for g in result.groups if g.state == "unknown"]
    lines += [f"  note: {note}" for note in result.notes]
    lines += [f"  FAILED {e['id']} ({e['ref']}): {e['error']}" for e in result.errors]
    lines.append(f"  {_outcome(result)}")
    return "\n".join(lines)


def markdown(result: CacheResult) -> str:
    """The job summary: size per ref against the budget, the verdict and why; a dry run marked as one."""
    mode = "**dry run**: nothing deleted" if result.dry_run else "applied"
    lines = [f"### ghbuild cache: {code(result.repository)}", "",
             f"{md(_headline(result))}; {mode}. {md(_outcome(result))}.", "",
             "| ref | kind | size | share | entries | state | action | why | ghbuild scopes |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {code(g.ref)} | {md(g.kind)} | {format_size(g.size)} | {_percent(share(g.size, result.budget))} "
              f"| {len(g.entries)} | {md(g.state or '-')} | {md(g.action)} | {md(g.why)} | {md(_scopes(g))} |"
              for g in result.groups]
    lines += [""] + [f"- {md(note)}" for note in result.notes]
    lines += [f"- FAILED {md(e['id'])} ({code(e['ref'])}): {md(e['error'])}" for e in result.errors]
    return "\n".join(lines) + "\n"
