"""Publish every plan of a run as one unit: all images checked, then all copied, then one tag phase for all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ghbuild.publish import copy, signing, tag_moves
from ghbuild.publish.early_lease import EarlyLeases, LeaseTarget
from ghbuild.publish.plans import PublishPlan
from ghbuild.publish.results import PublishResult
from ghbuild.registry import client as registry


def execute_all(plans: list[PublishPlan], factory: registry.RegistryFactory, *, dry_run: bool = False,
                log: Callable[[str], None] = lambda m: None, commit_time: int | Callable[[], int | None] | None = None,
                warn: Callable[[str], None] = lambda m: None, trust: signing.Signing | None = None,
                **lease_options: Any) -> list[PublishResult]:
    """Publish every plan as one unit: all images checked, then all copied, then one tag phase for all.

    The tag phase (ghbuild.publish.tag_moves) runs under each publish repository's lease
    (ghbuild.publish.lease), taken only when a tag has to move. A nightly whose commit is older than
    the one the moving tags last went to (`commit_time`, Unix seconds, against the lease's record)
    creates its own immutable tags and leaves the moving ones alone. `commit_time` may be a function
    that finds it: it is called only when a tag has to move (a republish never asks git). `trust`: the
    recorded digests' signatures and provenance are verified before anything is written, and what is published
    is signed before its tags move (ghbuild.publish.signing).
    """
    prepared = [copy._prepare(plan, factory, dry_run, log) for plan in plans]     # 1. nothing written yet
    if trust is not None:
        signing.verify_staging(trust, prepared, log)
    stats = {id(p): registry.CopyStats() for p in prepared}
    # What the tags hold now, read before the copies: a manifest a tag of its repository holds needs no lookup
    # of its own (a republish reads only its tags). The values decide only whether a tag must move; a move
    # reads them again under the lease.
    moves = tag_moves.read_previous(tag_moves.ordered([m for prep in prepared for m in tag_moves._tag_moves(prep)]))
    kind = plans[0].kind if plans else "nightly"
    tag_moves._refuse_moving_immutable(moves, kind)       # before anything is copied: a clash writes nothing anywhere
    early = None if dry_run or not any(m.needed for m in moves) else \
        _early_leases(prepared, stats, moves, f"{kind} of {plans[0].sha}", log, lease_options)
    phase = tag_moves.TagPhase()
    try:
        for prep in prepared:
            for action in prep.result.actions:
                log(("would " if dry_run else "") + action)
            if not dry_run:
                tagged = frozenset(m.previous for m in moves
                                   if m.reg is prep.dst and m.repo == prep.p_repo and m.previous)
                copy._transfer(prep, stats[id(prep)], log, tagged)                   # 2, 3. no tag moves
                if trust is not None:
                    signing.sign_published(trust, prep, log)
        if dry_run:
            for move in moves:
                if move.needed:
                    log("would " + move.describe())
        elif early is not None:
            taken = early.leases_for_the_tag_phase()
            when = commit_time() if callable(commit_time) else commit_time
            moves, phase = tag_moves._locked_tag_phase(moves, kind, plans[0].sha, when, log, warn, lease_options,
                                                       taken)
    finally:
        if early is not None:
            early.abandon()          # a no-op once the tag phase gave the leases back
    results = {prep.plan.image: prep.result for prep in prepared}
    left_alone = {m.ref for m in phase.superseded}
    for move in moves:
        result = results[move.image]
        result.tags[move.ref] = move.digest
        if not move.needed:
            result.unchanged.append(move.ref)
        elif move.ref in left_alone:
            result.actions.append(f"leave {move.ref} at {move.previous}: a newer commit holds it")
        else:
            result.actions.append(move.describe())
            result.moved.append(move.ref)
    for prep in prepared:
        prep.result.stats = stats[id(prep)].as_dict()
    return [prep.result for prep in prepared]


def _early_leases(prepared: list[copy._Prepared], stats: dict[int, registry.CopyStats], moves: list[tag_moves.TagMove],
                  holder: str, log: Callable[[str], None], lease_options: dict[str, Any]) -> EarlyLeases:
    """The publish repositories' leases, taken on a thread of their own as the copies near their end
    (ghbuild.publish.early_lease): the copies are metered against the bytes the images list."""
    meter = registry.Meter()
    for counters in stats.values():
        counters.meter = meter
    expected = sum(prep.expected_bytes for prep in prepared)
    targets = [LeaseTarget(repository, group[0].reg, group[0].repo)
               for repository, group in tag_moves.by_repository(moves).items()]
    return EarlyLeases(targets, holder, expected, meter, lease_options, log).start()
