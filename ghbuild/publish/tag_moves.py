"""The tag phase of a publish: which tags move, in which order, and how a failure is undone.

Order (the states a consumer can see): new immutable tags first (`v<V>-<arch>`, `v<V>`, `nightly-<sha>`:
complete content, harmless if a later step fails), then the moving per-arch tags (`nightly-<arch>`), then
the moving index tags (`nightly`; `latest` last). Across several images each rank is done for every image
before the next rank starts, so the moving tags of all images change last and together.

Before each moving tag is written the run checks that it still holds the publish lease and that the tag
still holds what it held when the phase began (another writer would otherwise be overwritten). After any
failure every tag the run meant to move is read back, and one that holds this run's digest goes back to
its previous digest (compare before restore: a tag another run has moved since is left alone), whether or
not its write had returned (a lost reply can leave a write applied). What could not be restored is named
with its digests; a registry cannot delete a tag, so a tag that did not exist before stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from ghbuild.errors import PublishError, RegistryError
from ghbuild.publish import lease
from ghbuild.publish.copy import _Prepared
from ghbuild.registry import client as registry

# A recorded commit time this far ahead of the clock is a wrong commit date (or a clock), not a newer commit:
# honouring it would leave every later nightly's moving tags where they are until that date.
FUTURE_TOLERANCE = 24 * 3600

# ranks, in push order
IMMUTABLE_ARCH, IMMUTABLE_INDEX, MOVING_ARCH, MOVING_INDEX = range(4)


class TagMove(NamedTuple):
    """One tag this run wants at `digest`. `previous`: what it held when the phase began (None: new)."""

    repository: str              # the full name, for messages
    repo: str                    # the repository path on `reg`
    reg: registry.Registry
    tag: str
    digest: str
    body: bytes
    media_type: str
    rank: int
    image: str = ""              # whose tag it is (a publish of several images)
    previous: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def moving(self) -> bool:
        return self.rank >= MOVING_ARCH

    @property
    def needed(self) -> bool:
        return self.previous != self.digest

    def describe(self) -> str:
        return f"tag {self.ref} -> {self.digest}" + (f" (was {self.previous})" if self.previous else " (new)")


class TagPhase(SimpleNamespace):
    """What the phase did: `moved` (written), `restored` / `unrestored` after a failure (messages)."""

    def __init__(self, *, moved: list[TagMove] | None = None, restored: list[str] | None = None,
                 unrestored: list[str] | None = None, superseded: list[TagMove] | None = None) -> None:
        super().__init__(moved=moved if moved is not None else [],
                         restored=restored if restored is not None else [],
                         unrestored=unrestored if unrestored is not None else [],
                         superseded=superseded if superseded is not None else [])   # a newer commit holds these

    def report(self) -> str:
        parts = [f"restored {', '.join(self.restored)}" if self.restored else "restored nothing"]
        if self.unrestored:
            parts.append(f"could not restore {'; '.join(self.unrestored)}")
        return "; ".join(parts)


def ordered(moves: Sequence[TagMove]) -> list[TagMove]:
    """Push order: by rank; within a rank, the order given (images, then each plan's own tag order)."""
    return sorted(moves, key=lambda m: m.rank)


def read_previous(moves: Sequence[TagMove]) -> list[TagMove]:
    """Each move with what its tag holds now (one lookup per tag)."""
    out = []
    for move in moves:
        found = move.reg.resolve(move.repo, move.tag)
        out.append(move._replace(previous=found.digest if found else None))
    return out


def apply(moves: Sequence[TagMove], *, check_lease: Callable[[TagMove], None] = lambda m: None,
          log: Callable[[str], None] = lambda m: None) -> TagPhase:
    """Write every needed move in `moves`' order; on any failure undo (see the module docstring) and raise
    PublishError naming what was restored and what not. `check_lease(move)` runs before a moving tag."""
    phase = TagPhase()
    try:
        for move in moves:
            if not move.needed:
                continue
            if move.moving:
                check_lease(move)
                now = move.reg.resolve(move.repo, move.tag)
                if (now.digest if now else None) != move.previous:
                    raise PublishError(f"{move.ref} changed during this publish "
                                       f"(now {now.digest if now else 'absent'}, "
                                       f"was {move.previous or 'absent'}): another writer; stopping")
            log(move.describe())
            phase.moved.append(move)      # before the write: a lost reply may still have applied it
            move.reg.put_manifest(move.repo, move.tag, move.body, move.media_type)
    except BaseException as exc:
        undo(phase, log)          # also when the run is interrupted (SIGINT, SIGTERM: see ghbuild.cli)
        if not isinstance(exc, (RegistryError, PublishError)):
            raise
        error = PublishError(f"moving tags failed ({exc}); {phase.report()}")
        error.phase = phase      # type: ignore[attr-defined]  # for the job summary
        raise error from None
    return phase


def undo(phase: TagPhase, log: Callable[[str], None]) -> None:
    """Put back every tag this run wrote (or tried to) that holds this run's digest, last write first,
    comparing first. Tags it never tried are not its to touch, even when they hold the same digest."""
    for move in reversed(phase.moved):
        try:
            now = move.reg.resolve(move.repo, move.tag)
        except RegistryError as exc:
            phase.unrestored.append(f"{move.ref} (may hold {move.digest}, was {move.previous or 'absent'}: "
                                    f"cannot read it: {exc})")
            continue
        current = now.digest if now else None
        if current != move.digest:
            continue        # never moved, or moved by another run since: not ours to touch
        if move.previous is None:
            phase.unrestored.append(f"{move.ref} (new, holds {move.digest}: a registry cannot delete a single tag)")
            continue
        try:
            old = move.reg.get_manifest(move.repo, move.previous)
            move.reg.put_manifest(move.repo, move.tag, old.raw, old.media_type)
        except RegistryError as exc:
            if _holds(move, move.previous) is not True:      # the reply to a restore can be lost too
                phase.unrestored.append(f"{move.ref} (holds {move.digest}, was {move.previous}: {exc})")
                continue
        phase.restored.append(f"{move.tag} (to {move.previous})")
        log(f"restored {move.ref} -> {move.previous}")


def _holds(move: TagMove, digest: str | None) -> bool | None:
    """Whether the tag holds `digest` now; None when the registry cannot say."""
    try:
        now = move.reg.resolve(move.repo, move.tag)
    except RegistryError:
        return None
    return (now.digest if now else None) == digest


def by_repository(moves: Sequence[TagMove]) -> Mapping[str, list[TagMove]]:
    grouped: dict[str, list[TagMove]] = {}
    for move in moves:
        grouped.setdefault(move.repository, []).append(move)
    return grouped


def _tag_moves(prep: _Prepared) -> list[TagMove]:
    plan, moves = prep.plan, []
    for source in plan.sources:
        m = prep.manifests[source.arch]
        for tag in filter(None, (plan.commit_arch_tags.get(source.arch), plan.arch_tags[source.arch])):
            rank = MOVING_ARCH if tag in plan.moving else IMMUTABLE_ARCH
            moves.append(TagMove(plan.publish, prep.p_repo, prep.dst, tag, m.digest, m.raw, m.media_type, rank,
                                 plan.image))
    for tag in plan.index_tags:
        rank = MOVING_INDEX if tag in plan.moving else IMMUTABLE_INDEX
        moves.append(TagMove(plan.publish, prep.p_repo, prep.dst, tag, prep.result.index_digest or "",
                                       prep.index_manifest, prep.index_type, rank, plan.image))
    return moves


def _refuse_moving_immutable(moves: list[TagMove], kind: str) -> None:
    """A release tag (`v<V>`, `v<V>-<arch>`) that exists already is never moved to other content."""
    if kind != "release":
        return
    clash = [m for m in moves if not m.moving and m.previous is not None and m.needed]
    if clash:
        raise PublishError("release tags exist already with other content: "
                           + ", ".join(f"{m.ref} = {m.previous} (this run: {m.digest})" for m in clash)
                           + "; a release tag is never moved: release a new version")


def _locked_tag_phase(moves: list[TagMove], kind: str, sha: str, commit_time: int | None,
                      log: Callable[[str], None], warn: Callable[[str], None], lease_options: Mapping[str, Any],
                      taken: Sequence[lease.Lease] = ()) -> tuple[list[TagMove], TagPhase]:
    """The tag phase under the lease of every publish repository involved (taken in name order, so two
    runs never wait for each other crosswise; `taken`: all of them, held already, ghbuild.publish.early_lease);
    the tags are read again once the leases are held."""
    leases: list[lease.Lease] = list(taken)
    holder = f"{kind} of {sha}"
    try:
        for repository, group in sorted(by_repository(moves).items()) if not leases else ():
            first = group[0]
            held = lease.Lease(first.reg, first.repo, repository, holder, log=log, **lease_options)
            held.acquire()
            leases.append(held)
        moves = read_previous(moves)
        _refuse_moving_immutable(moves, kind)
        for held in leases:
            if kind == "nightly" and _implausible(held.found, sha):
                warn(f"publish {kind}: {held.repository}'s lease records {held.found.published_sha} with a commit "
                     f"time {held.found.published_time}, more than a day in the future: ignored (a wrong commit "
                     "date must not freeze the moving tags)")
        newer = [h for h in leases if kind == "nightly" and _superseded(h.found, sha, commit_time)]
        phase = TagPhase()
        if newer:
            found = newer[0].found
            warn(f"publish {kind}: {newer[0].repository}'s moving tags went to {found.published_sha}, a newer "
                 f"commit than {sha}: only this commit's own tags are created, the moving tags stay")
            phase.superseded = [m for m in moves if m.moving and m.needed]
        checks = {h.repository: h for h in leases}
        todo = [m for m in moves if m not in phase.superseded]
        done = apply(todo, check_lease=lambda m: checks[m.repository].check(), log=log)
        done.superseded = phase.superseded
        moved_moving = {m.repository for m in done.moved if m.moving}
        for held in leases:
            if kind == "nightly" and held.repository in moved_moving:
                held.release(sha, commit_time)
            else:
                held.release()
        return moves, done
    finally:
        for held in leases:
            held.release()       # a no-op for a lease already given back


def _implausible(found: lease.LeaseState, sha: str, now: float | None = None) -> bool:
    return (found.published_time is not None and found.published_sha != sha
            and found.published_time > (time.time() if now is None else now) + FUTURE_TOLERANCE)


def _superseded(found: lease.LeaseState, sha: str, commit_time: int | None, now: float | None = None) -> bool:
    return (commit_time is not None and found.published_time is not None and found.published_sha != sha
            and commit_time < found.published_time and not _implausible(found, sha, now))
