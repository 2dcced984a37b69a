"""Retention of nightly tags, the plan: which tags stay and which go, per repository. Pure: no I/O.

Publishing leaves one multi-arch index per commit (`<nightly>-<40 hex sha>`) and its per-arch
`<nightly>-<sha>-<suffix>` tags (older publishes and other tools may have none) next to the moving tags
(`<nightly>`, `<nightly>-<suffix>`). Pruning keeps
the newest N commits (config `publish.retention`, default 14; a commit's index tag and its per-arch tags
count as one) and deletes the rest.

Rules (`plan_prune`):

- Candidates are only the per-commit tags `<nightly>-<sha>` and `<nightly>-<sha>-<suffix>`. The moving
  tags and every other tag (releases, `latest`...) are never candidates.
- Commits are ranked by push time (the newest push of any of their tags); a commit with no known push
  time is kept. Among equal times the commit the moving tags hold ranks first (it is the newest published),
  then by name, so a run is reproducible.
- A tag is never deleted when its digest is referenced by a kept tag: a kept tag's own digest, the
  children of a kept index, the moving tags' digests and their children.

Registries that delete by digest (GHCR versions, plain registries) go through `plan_digests`: a digest
goes only when every tag on it goes, and an index's children go with it unless a kept tag refers to them.

cosign's attachments (`sha256-<hex>.sig`, `.att`, `.sbom`: a signature, an attestation, an SBOM of the
manifest `sha256:<hex>`) are never candidates and protect nothing: each goes with the manifest it is about
(deleted before it, so an interrupted run leaves an unsigned image to delete, never an orphaned signature), and
stays while that manifest stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ghbuild.errors import PruneError


@dataclass(frozen=True)
class TagInfo:
    """One tag as a backend reports it. `children`: every manifest an index refers to, to any depth (an
    index of indexes), breadth first (see `descendants`); empty for an image."""

    name: str
    digest: str | None
    pushed: datetime | None
    children: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    tag: str
    digest: str | None
    pushed: datetime | None
    commit: str | None
    # newest | moving | other | no-time | referenced (kept) ; old (deleted)
    kind: str
    reason: str

    @property
    def tags(self) -> tuple[str, ...]:
        return (self.tag,)

    @property
    def parent(self) -> None:
        """A tag is deleted on its own, never with an index (see DigestDeletion.parent)."""
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"tags": [self.tag], "digest": self.digest, "pushed": iso(self.pushed), "commit": self.commit,
                "reason": self.reason}


@dataclass
class PrunePlan:
    keep: list[Decision]                       # every tag that stays, with why
    delete: list[Decision]                     # per-commit tags of commits older than the newest N
    protected: dict[str, str]                  # digest -> which kept tag refers to it
    commits: list[tuple[str, datetime | None]]  # (sha, push time), newest first; unknown times last
    kept_commits: list[str]

    @property
    def referenced(self) -> list[Decision]:
        """Old per-commit tags kept only because a kept tag refers to their digest."""
        return [d for d in self.keep if d.kind == "referenced"]


def nightly_pattern(nightly_tag: str, suffixes: Iterable[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(s) for s in sorted(set(suffixes), key=len, reverse=True))
    return re.compile(rf"{re.escape(nightly_tag)}-([0-9a-f]{{40}})(?:-({alts}))?" if alts else
                      rf"{re.escape(nightly_tag)}-([0-9a-f]{{40}})()")


ATTACHMENT_RE = re.compile(r"sha256-([0-9a-f]{64})\.(sig|att|sbom)")


def moving_tags(nightly_tag: str, suffixes: Iterable[str]) -> frozenset[str]:
    return frozenset({nightly_tag, *(f"{nightly_tag}-{s}" for s in suffixes)})


def plan_prune(tags: Sequence[TagInfo], keep: int, nightly_tag: str = "nightly",
               arch_suffixes: Iterable[str] = ("x86_64", "arm64")) -> PrunePlan:
    """Which tags stay and which go. Pure: no I/O.

    `keep` commits survive (a commit = its `<nightly>-<sha>` tag and its `<nightly>-<sha>-<suffix>` tags);
    the other per-commit tags are deleted unless a kept tag refers to their digest. Every tag that is not
    a per-commit nightly tag is kept and protects its digest and its children.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise PruneError(f"keep: {keep!r}: must be a whole number of commits, at least 1")
    suffixes = tuple(arch_suffixes)
    pattern = nightly_pattern(nightly_tag, suffixes)
    moving = moving_tags(nightly_tag, suffixes)

    groups: dict[str, list[TagInfo]] = {}
    others: list[TagInfo] = []
    attachments: dict[str, list[TagInfo]] = {}     # the manifest they are about -> cosign's tags on it
    for tag in sorted(tags, key=lambda t: t.name):
        m = pattern.fullmatch(tag.name)
        about = ATTACHMENT_RE.fullmatch(tag.name)
        if about:
            attachments.setdefault(f"sha256:{about.group(1)}", []).append(tag)
        elif m and tag.name not in moving:
            groups.setdefault(m.group(1), []).append(tag)
        else:
            others.append(tag)

    def group_time(sha: str) -> datetime | None:
        times = [t.pushed for t in groups[sha] if t.pushed is not None]
        return max(times) if times else None

    # Equal times (two nightlies of fully cached builds share their images' `created`): the commit the moving tags
    # hold is the newest published (publishing never moves them back), then the name.
    current = {t.digest for t in tags if t.name in moving and t.digest}
    holds_moving = {sha for sha, group in groups.items() if any(t.digest in current for t in group)}
    timed = sorted(((sha, group_time(sha)) for sha in groups if group_time(sha) is not None),
                   key=lambda st: (st[1], st[0] in holds_moving, st[0]), reverse=True)
    untimed = sorted(sha for sha in groups if group_time(sha) is None)
    kept_commits = [sha for sha, _ in timed[:keep]]
    rank = {sha: i + 1 for i, (sha, _) in enumerate(timed)}

    keep_list: list[Decision] = []
    protected: dict[str, str] = {}

    def protect(tag: TagInfo) -> None:
        if tag.digest:
            protected.setdefault(tag.digest, f"tag {tag.name}")
        for child in tag.children:
            protected.setdefault(child, f"a child of {tag.name}")

    for tag in others:
        kind = "moving" if tag.name in moving else "other"
        reason = "moving tag: never pruned" if kind == "moving" else "not a per-commit nightly tag"
        keep_list.append(Decision(tag.name, tag.digest, tag.pushed, None, kind, reason))
        protect(tag)
    for sha in kept_commits:
        for tag in groups[sha]:
            keep_list.append(Decision(tag.name, tag.digest, tag.pushed, sha, "newest",
                                      f"commit #{rank[sha]} of the newest {keep}"))
            protect(tag)
    for sha in untimed:
        for tag in groups[sha]:
            keep_list.append(Decision(tag.name, tag.digest, None, sha, "no-time", "no push time known: kept"))
            protect(tag)

    delete: list[Decision] = []
    for sha, _ in reversed(timed[keep:]):   # oldest first: an interrupted run has removed the oldest
        for tag in groups[sha]:
            if tag.digest and tag.digest in protected:
                keep_list.append(Decision(tag.name, tag.digest, tag.pushed, sha, "referenced",
                                          f"older than the newest {keep} commits, but its digest is "
                                          f"{protected[tag.digest]} (kept)"))
            else:
                delete.append(Decision(tag.name, tag.digest, tag.pushed, sha, "old",
                                       f"commit #{rank[sha]}: older than the newest {keep}"))
    delete = _with_attachments(delete, keep_list, attachments, protected, {t.digest: t for t in tags if t.digest})
    commits = timed + [(sha, None) for sha in untimed]
    return PrunePlan(keep_list, delete, protected, commits, kept_commits)


def _with_attachments(delete: list[Decision], keep_list: list[Decision], attachments: Mapping[str, list[TagInfo]],
                      protected: Mapping[str, str], tagged: Mapping[str, TagInfo]) -> list[Decision]:
    """The deletions with each deleted manifest's attachments (and those of its unprotected children) just
    before it; every other attachment is kept (into `keep_list`)."""
    out: list[Decision] = []
    gone: set[str] = set()
    for decision in delete:
        about = [decision.digest] if decision.digest else []
        source = tagged.get(decision.digest or "")
        about += [c for c in (source.children if source else ()) if c not in protected]
        for digest in about:
            for tag in attachments.get(digest, ()) if digest not in gone else ():
                out.append(Decision(tag.name, tag.digest, tag.pushed, decision.commit, "old",
                                    f"cosign attachment of {digest[:19]}, deleted with it"))
            gone.add(digest)
        out.append(decision)
    for digest, found in attachments.items():
        if digest not in gone:
            keep_list.extend(Decision(t.name, t.digest, t.pushed, None, "other",
                                      f"cosign attachment of {digest[:19]}, which stays") for t in found)
    return out


@dataclass(frozen=True)
class DigestDeletion:
    """One manifest to delete by digest (GHCR version, plain registry manifest)."""

    digest: str
    tags: tuple[str, ...]
    reason: str
    parent: str | None = None        # for an untagged child: the index it goes with


def plan_digests(plan: PrunePlan, tags: Sequence[TagInfo],
                 children: Mapping[str, Sequence[str]]) -> tuple[list[DigestDeletion], list[dict[str, Any]]]:
    """For registries that delete by digest: the digests to delete (index first, then its children) and
    the children kept because a kept tag refers to them.

    A digest goes only when every tag on it is to be deleted. An index's children go with it unless a
    kept tag refers to them or a kept tag sits on them. `children`: digest -> child digests of indexes.
    """
    by_digest: dict[str, list[str]] = {}
    for tag in tags:
        if tag.digest:
            by_digest.setdefault(tag.digest, []).append(tag.name)
    doomed_tags = {d.tag for d in plan.delete}
    reasons = {d.tag: d.reason for d in plan.delete}
    out: list[DigestDeletion] = []
    seen: set[str] = set()
    skipped: list[dict[str, Any]] = []
    for decision in plan.delete:
        digest = decision.digest
        if not digest or digest in seen:
            continue
        names = sorted(by_digest.get(digest, [decision.tag]))
        if any(n not in doomed_tags for n in names) or digest in plan.protected:
            continue   # cannot happen with plan_prune's rules; kept defensively
        seen.add(digest)
        out.append(DigestDeletion(digest, tuple(names), reasons[decision.tag]))
        for child in children.get(digest, ()):
            if child in seen:
                continue
            child_tags = by_digest.get(child, [])
            if child in plan.protected:
                skipped.append({"tags": sorted(child_tags), "digest": child, "pushed": None, "commit": decision.commit,
                                "reason": f"child of {', '.join(names)}, but it is {plan.protected[child]} (kept)"})
                seen.add(child)
                continue
            if any(n not in doomed_tags for n in child_tags):
                continue
            seen.add(child)
            out.append(DigestDeletion(child, tuple(sorted(child_tags)),
                                      f"child of {', '.join(names)}, deleted with it", parent=digest))
    return out, skipped


def descendants(digest: str, children: Callable[[str], Sequence[str]]) -> tuple[str, ...]:
    """Every manifest below `digest` (its children, theirs, ...), breadth first, each once: what a kept
    index protects and what goes with a deleted one. `children(d)`: the manifests index `d` refers to."""
    out: list[str] = []
    seen = {digest}
    queue = list(children(digest))
    while queue:
        child = queue.pop(0)
        if child in seen:
            continue
        seen.add(child)
        out.append(child)
        queue.extend(children(child))
    return tuple(out)


def listing_changes(before: Sequence[TagInfo], now: Sequence[TagInfo], gone: set[str]) -> list[str]:
    """How the listing `now` differs from `before` once the tags in `gone` (deleted by this run) are
    left out: tags added, removed, or moved to another digest or other children."""
    was = {t.name: (t.digest, tuple(t.children)) for t in before if t.name not in gone}
    is_ = {t.name: (t.digest, tuple(t.children)) for t in now}
    changes = [f"+{name} ({is_[name][0]})" for name in sorted(set(is_) - set(was))]
    changes += [f"-{name}" for name in sorted(set(was) - set(is_))]
    changes += [f"{name} {was[name][0]} -> {is_[name][0]}" if was[name][0] != is_[name][0] else f"{name} children"
                for name in sorted(set(was) & set(is_)) if was[name] != is_[name]]
    return changes


# --------------------------------------------------------------------------- times

_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def parse_time(text: Any) -> datetime | None:
    """RFC 3339 / ISO 8601 (Z, offsets, up to nanoseconds) -> aware UTC datetime; None if absent or bad."""
    if not isinstance(text, str) or not text.strip():
        return None
    value = _FRACTION.sub(r"\1", text.strip(), count=1)
    if value[-1:] in "Zz":
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def iso(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if when else None

