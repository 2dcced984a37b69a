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

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import NamedTuple

from ghbuild.errors import PublishError, RegistryError
from ghbuild.registry import client as registry

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
                    raise PublishError(f"{move.ref} changed during this publish (now {now.digest if now else 'absent'}, "
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
