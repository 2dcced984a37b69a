"""The repository's GitHub Actions cache entries, grouped by where GitHub keeps them and by ghbuild's scopes.
Pure: entries in (the REST API's JSON), groups and decisions out; no I/O.

GitHub stores every entry under a git ref, its `ref` field: the ref of the run that wrote it
(`refs/heads/<branch>`, `refs/pull/<N>/merge` for a pull request, `refs/heads/gh-readonly-queue/...` for a merge
queue entry, `refs/tags/<tag>`). A run restores entries of its own ref and of its base or default branch, so an
entry whose pull request is closed or whose branch is gone is never read again; GitHub evicts it only after 7
days unused, or when the repository is over its budget, oldest first, whoever it belongs to.

BuildKit's `type=gha` cache (moby/buildkit cache/remotecache/gha) writes two kinds of entry:

- `buildkit-blob-<v>-sha256:<hex>`: one layer blob, content-addressed, written by whichever run exported it
  first under its own ref; it names no scope;
- `index-<scope>-<v>-<8 hex>`: the cache index of one `scope=` (for ghbuild the cache key
  `<ghbuild scope>-<image>-<arch suffix>`, see ghbuild.plan.planner), the 8 hex being the start of the sha256 of
  the GitHub cache scope the run could write (its ref).

So the ref says whose an entry is; an index key also says which ghbuild scope, image and arch it serves.
Entries other tools wrote (actions/cache, setup-python, ...) are grouped by their ref alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ghbuild import naming

GITHUB_BUDGET = 10 * 10**9     # bytes: GitHub's default cache limit per repository ("10 GB")

_INDEX_RE = re.compile(r"^index-(?P<scope>.+)-(?P<version>\d+)-(?P<ref_hash>[0-9a-f]{8})\Z")
_BLOB_RE = re.compile(r"^buildkit-blob-(?P<version>\d+)-(?P<digest>sha256:[0-9a-f]{64})\Z")
_PR_REF_RE = re.compile(r"^refs/pull/(?P<number>[1-9][0-9]*)/(?:merge|head)\Z")
_QUEUE_PREFIX = "gh-readonly-queue/"
# ghbuild's scopes (ghbuild.naming): pr-<N>-<12 hex>, preview-<branch>-<12 hex>, mq-<base>-<12 hex>.
_SCOPE_SHAPES = (("pull request", re.compile(r"^pr-[1-9][0-9]*-[0-9a-f]{12}\Z")),
                 ("branch", re.compile(r"^preview-.+-[0-9a-f]{12}\Z")),
                 ("merge queue", re.compile(r"^mq-.+-[0-9a-f]{12}\Z")))

TRUSTED, DEFAULT_BRANCH, BRANCH, PULL_REQUEST, MERGE_QUEUE, TAG, OTHER = (
    "trusted", "default branch", "branch", "pull request", "merge queue", "tag", "other")
PROTECTED_KINDS = (TRUSTED, DEFAULT_BRANCH)


class CacheEntry(NamedTuple):
    """One entry of `GET /repos/{owner}/{repo}/actions/caches`."""

    id: int
    ref: str
    key: str
    size: int
    created_at: str = ""
    last_accessed_at: str = ""

    @classmethod
    def from_api(cls, data: Any) -> CacheEntry | None:
        """The entry in GitHub's JSON; None for anything without an integer id, a ref and a key."""
        if not isinstance(data, dict):
            return None
        cid, ref, key, size = data.get("id"), data.get("ref"), data.get("key"), data.get("size_in_bytes")
        if not isinstance(cid, int) or isinstance(cid, bool) or not isinstance(ref, str) or not isinstance(key, str):
            return None
        return cls(cid, ref, key, size if isinstance(size, int) and size >= 0 else 0,
                   str(data.get("created_at") or ""), str(data.get("last_accessed_at") or ""))


class Repository(NamedTuple):
    """What the grouping needs to know about the repository and its config."""

    name: str                      # owner/name, as the API spells it
    default_branch: str
    stable_branch: str             # trust.stable-branch, else the default branch
    canonical: bool                # the repository is trust.canonical-repository (or none is set)
    images: tuple[str, ...] = ()   # the config's image names
    suffixes: tuple[str, ...] = ("x86_64", "arm64")   # publish.arch-suffixes

    @property
    def canonical_scope(self) -> str:
        return naming.canonical_scope(self.stable_branch)


class ScopeKey(NamedTuple):
    """What a BuildKit index key says: the ghbuild scope, the image and arch suffix it caches."""

    scope: str
    kind: str          # TRUSTED, BRANCH, PULL_REQUEST, MERGE_QUEUE, or OTHER (a scope= ghbuild did not name)
    image: str
    suffix: str


def entry_kind(key: str) -> str:
    """"index", "blob" (BuildKit's gha cache) or "other"."""
    if _INDEX_RE.match(key):
        return "index"
    if _BLOB_RE.match(key):
        return "blob"
    return "other"


def scope_of_key(key: str, repo: Repository) -> ScopeKey | None:
    """The ghbuild scope, image and arch an index key caches; None for a blob or another tool's entry. Of the
    readings the config's images allow, one whose scope has ghbuild's shape wins (image names may end alike)."""
    found = _INDEX_RE.match(key)
    if found is None:
        return None
    cache_key = found["scope"]
    readings = []
    for image in sorted(repo.images, key=len, reverse=True):
        for suffix in repo.suffixes:
            ending = f"-{image}-{suffix}"
            if cache_key.endswith(ending) and len(cache_key) > len(ending):
                scope = cache_key[:-len(ending)]
                readings.append(ScopeKey(scope, _scope_kind(scope, cache_key, image, suffix, repo), image, suffix))
    known = [r for r in readings if r.kind != OTHER]
    if known or readings:
        return (known or readings)[0]
    return ScopeKey(cache_key, OTHER, "", "")


def _scope_kind(scope: str, cache_key: str, image: str, suffix: str, repo: Repository) -> str:
    canonical = repo.canonical_scope
    if scope == canonical or cache_key == naming.sanitize_tag(canonical, suffix=f"-{image}-{suffix}"):
        return TRUSTED
    return next((kind for kind, shape in _SCOPE_SHAPES if shape.match(scope)), OTHER)


def ref_kind(ref: str, repo: Repository) -> tuple[str, str]:
    """(kind, name) of the ref GitHub stores an entry under: name is the branch, the pull request number or the
    tag. The stable branch of the canonical repository is TRUSTED; the default and stable branches are
    DEFAULT_BRANCH elsewhere: every run of the repository restores them, so neither is ever deleted."""
    if ref.startswith("refs/heads/"):
        branch = ref.removeprefix("refs/heads/")
        if branch == repo.stable_branch and repo.canonical:
            return TRUSTED, branch
        if branch in (repo.default_branch, repo.stable_branch):
            return DEFAULT_BRANCH, branch
        return (MERGE_QUEUE if branch.startswith(_QUEUE_PREFIX) else BRANCH), branch
    pull = _PR_REF_RE.match(ref)
    if pull:
        return PULL_REQUEST, pull["number"]
    if ref.startswith("refs/tags/"):
        return TAG, ref.removeprefix("refs/tags/")
    return OTHER, ref


@dataclass
class Group:
    """Every entry stored under one ref: sizes, the ghbuild scopes its index keys name, and the verdict."""

    ref: str
    kind: str
    name: str
    entries: list[CacheEntry] = field(default_factory=list)
    scopes: dict[str, dict[str, Any]] = field(default_factory=dict)   # ghbuild scope -> {kind, images, indexes}
    state: str | None = None          # "open" / "closed", "exists" / "deleted", "unknown"; None: not asked
    action: str = "keep"              # "keep" | "delete"
    why: str = ""

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def protected(self) -> bool:
        """The trusted or default branch's entries: never deleted. Decided by the ref alone, never by the keys: a
        run on those branches never reads what is stored under another ref (GitHub's cache scoping), and a key
        is whatever the run that wrote it chose (a pull request can name an index like the trusted scope's)."""
        return self.kind in PROTECTED_KINDS

    def counts(self) -> dict[str, int]:
        kinds = [entry_kind(e.key) for e in self.entries]
        return {"entries": len(kinds), "indexes": kinds.count("index"), "blobs": kinds.count("blob"),
                "other": kinds.count("other")}

    def to_dict(self, budget: int) -> dict[str, Any]:
        return {"ref": self.ref, "kind": self.kind, "name": self.name, "size": self.size,
                "share": share(self.size, budget), **self.counts(),
                "scopes": {k: dict(v, images=sorted(v["images"])) for k, v in sorted(self.scopes.items())},
                "state": self.state, "action": self.action, "why": self.why,
                "ids": sorted(e.id for e in self.entries)}


def share(size: int, budget: int) -> float:
    return round(size / budget, 4) if budget > 0 else 0.0


def group_entries(entries: Iterable[CacheEntry], repo: Repository) -> list[Group]:
    """One group per ref, largest first; each entry once (by id)."""
    groups: dict[str, Group] = {}
    seen: set[int] = set()
    for entry in entries:
        if entry.id in seen:
            continue
        seen.add(entry.id)
        group = groups.get(entry.ref)
        if group is None:
            kind, name = ref_kind(entry.ref, repo)
            group = groups[entry.ref] = Group(entry.ref, kind, name)
        group.entries.append(entry)
        found = scope_of_key(entry.key, repo)
        if found is not None:
            scope = group.scopes.setdefault(found.scope, {"kind": found.kind, "images": set(), "indexes": 0})
            scope["indexes"] += 1
            if found.image:
                scope["images"].add(f"{found.image}-{found.suffix}")
    return sorted(groups.values(), key=lambda g: (-g.size, g.ref))


def needs_state(group: Group) -> bool:
    """Whether the group's fate depends on its pull request or branch (so GitHub must be asked)."""
    return not group.protected and group.kind in (PULL_REQUEST, BRANCH, MERGE_QUEUE)


def decide(group: Group, state: str | None, note: str = "") -> Group:
    """The verdict for a group, given its pull request's or branch's state ("open", "closed", "exists",
    "deleted", "unknown" or None); `note` says why a state is unknown. Only a closed pull request's and a deleted
    branch's entries go; never the trusted or default branch's (whatever the keys under other refs say)."""
    group.state = state
    group.action, group.why = "keep", _keep_reason(group, state, note)
    if not group.protected and ((group.kind == PULL_REQUEST and state == "closed")
                                or (group.kind in (BRANCH, MERGE_QUEUE) and state == "deleted")):
        group.action = "delete"
        group.why = f"pull request #{group.name} is closed" if group.kind == PULL_REQUEST \
            else f"branch {group.name} no longer exists"
    return group


def _keep_reason(group: Group, state: str | None, note: str) -> str:
    if group.kind == TRUSTED:
        return "the trusted scope (stable branch of the canonical repository)"
    if group.kind == DEFAULT_BRANCH:
        return "the default branch: every run restores it"
    if group.kind == PULL_REQUEST:
        return f"pull request #{group.name} is open" if state == "open" else f"pull request state unknown: {note}"
    if group.kind in (BRANCH, MERGE_QUEUE):
        return "the branch exists" if state == "exists" else f"branch state unknown: {note}"
    return "tags are kept" if group.kind == TAG else "not a branch or pull request ref"


def mismatches(groups: Sequence[Group]) -> list[str]:
    """What looks wrong: a trusted-scope index stored under another ref (written by a run that should not). Its
    ref's verdict stands: the trusted branch's runs cannot read it."""
    return [f"{g.ref} holds an index of the trusted scope {scope} (judged by its ref alone)" for g in groups
            if g.kind not in PROTECTED_KINDS for scope, data in g.scopes.items() if data["kind"] == TRUSTED]


def by_scope(groups: Sequence[Group]) -> dict[str, dict[str, Any]]:
    """Per ghbuild scope: its kind, the refs it is stored under, its images; only what index keys show."""
    out: dict[str, dict[str, Any]] = {}
    for group in groups:
        for scope, data in group.scopes.items():
            row = out.setdefault(scope, {"kind": data["kind"], "refs": [], "images": set()})
            row["refs"].append(group.ref)
            row["images"] |= data["images"]
    return {scope: {**row, "images": sorted(row["images"])} for scope, row in sorted(out.items())}


def totals(groups: Sequence[Group], budget: int) -> Mapping[str, Any]:
    size = sum(g.size for g in groups)
    return {"entries": sum(len(g.entries) for g in groups), "size": size, "share": share(size, budget),
            "delete_size": sum(g.size for g in groups if g.action == "delete"),
            "delete_entries": sum(len(g.entries) for g in groups if g.action == "delete")}
