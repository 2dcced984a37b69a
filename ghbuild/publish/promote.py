"""Publishing: nightly and release tags and multi-arch manifests, from the per-commit staging images.

Registry to registry (ghbuild.registry.client): only the blobs the target lacks move, nothing passes through
a Docker engine, and a manifest list needs no blobs at all. Every image of one run is published as a
unit, in phases:

1. resolve every per-arch staging image of every image and verify it is the architecture its tag claims
   and the commit the trusted build recorded (before anything is written anywhere);
2. copy each image to the publish repository by digest (no tag moves yet: the slow, failure-prone
   part);
3. push each multi-arch index by digest;
4. move the tags, all images together, under the publish repositories' leases (ghbuild.publish.lease): new
   immutable tags first, moving per-arch tags next, moving index tags last (ghbuild.publish.tag_moves). A
   failure puts back every tag that holds this run's digest, comparing before restoring.

A rerun of the same commit finds everything in place and moves nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple

from ghbuild import naming

# ghbuild.registry.client (with requests and urllib3), ghbuild.publish.lease and ghbuild.publish.tag_moves are imported by the
# functions that talk to a registry: a publish refused before its first request (no build records, a pull
# request, a bad version) does not pay for them.
from ghbuild.config.configfile import expand_repository
from ghbuild.config.options import Options
from ghbuild.errors import ConfigError, PublishError, UsageError

if TYPE_CHECKING:   # annotations only
    from ghbuild.publish import lease, tag_moves
    from ghbuild.registry import client as registry

UNAME_ARCH = {"amd64": "amd64", "arm64": "arm64"}


class ArchSource(NamedTuple):
    arch: str
    suffix: str
    tag: str                      # staging tag, <sha>-<suffix>
    digest: str | None = None     # what the trusted build recorded; None: the tag (dry runs without records)

    @property
    def ref(self) -> str:
        return self.digest or self.tag


class PublishPlan(NamedTuple):
    kind: str                     # "nightly" or "release"
    image: str
    sha: str
    staging: str                  # repository
    publish: str                  # repository
    sources: tuple[ArchSource, ...]
    arch_tags: dict[str, str]     # arch -> nightly-<suffix>
    index_tags: tuple[str, ...]   # in push order: the moving tag (nightly, latest) last
    moving: frozenset[str] = frozenset()   # the tags that move from commit to commit (nightly*, latest)
    source_url: str | None = None  # the canonical repository's URL the images' source label must name


def _repositories(options: Options, image: str, sha: str, owner: str) -> tuple[str, str]:
    if image not in options.images:
        raise ConfigError(f"--image {image}: no such image (known: {', '.join(options.images)})")
    img = options.images[image]
    staging_t = img.staging or options.registries.staging
    publish_t = img.publish or options.registries.publish
    if not staging_t:
        raise ConfigError(f"{options.config_path}: registries.staging: not set; publishing copies from staging")
    if not publish_t:
        raise ConfigError(f"{options.config_path}: registries.publish: not set; nowhere to publish to")
    if not (len(sha) == 40 and all(c in "0123456789abcdef" for c in sha)):
        raise PublishError(f"--sha: {sha!r} is not a 40-hex commit id")
    staging = naming.validate_repository(expand_repository(staging_t, image, owner), "registries.staging")
    publish = naming.validate_repository(expand_repository(publish_t, image, owner), "registries.publish")
    return staging, publish


def _sources(options: Options, image: str, sha: str) -> tuple[ArchSource, ...]:
    suffixes = options.publish.arch_suffixes
    return tuple(ArchSource(arch, suffixes[arch], f"{sha}-{suffixes[arch]}") for arch in options.images[image].arches)


def nightly_plan(options: Options, image: str, sha: str, owner: str) -> PublishPlan:
    """Pure: which staging tags become which nightly tags."""
    staging, publish = _repositories(options, image, sha, owner)
    nightly = options.publish.nightly_tag
    sources = _sources(options, image, sha)
    return PublishPlan(kind="nightly", image=image, sha=sha, staging=staging, publish=publish, sources=sources,
                       arch_tags={s.arch: f"{nightly}-{s.suffix}" for s in sources},
                       index_tags=(f"{nightly}-{sha}", nightly),
                       moving=frozenset({nightly, *(f"{nightly}-{s.suffix}" for s in sources)}))


def parse_version(text: str):
    """A release version (PEP 440, optional leading v, no local part): checked before anything is pushed."""
    from packaging.version import InvalidVersion, Version

    raw = (text or "").strip()
    if not raw:
        raise PublishError("--version: empty; give the release version, e.g. 0.7.0 or 0.7.0rc1")
    try:
        version = Version(raw[1:] if raw[:1] in "vV" else raw)
    except InvalidVersion:
        raise PublishError(f"--version: {raw!r} is not a valid version (PEP 440, e.g. 0.7.0, 0.7.0rc1, 0.7.0.post1)") from None
    if version.local:
        raise PublishError(f"--version: {raw!r} has a local part (+...), which a tag cannot hold")
    return version


def release_plan(options: Options, image: str, sha: str, owner: str, version, published_tags: list[str]) -> PublishPlan:
    """Pure: `v<V>` and `v<V>-<suffix>`, plus `latest` when V is the highest non-prerelease release published."""
    from packaging.version import InvalidVersion, Version

    staging, publish = _repositories(options, image, sha, owner)
    sources = _sources(options, image, sha)
    tag = f"v{version}"
    suffixes = set(options.publish.arch_suffixes.values())
    released = []
    for existing in published_tags:
        if not existing.startswith("v") or any(existing.endswith(f"-{s}") for s in suffixes):
            continue
        try:
            released.append(Version(existing[1:]))
        except InvalidVersion:
            continue
    stable = [v for v in released if not v.is_prerelease and not v.is_devrelease]
    latest = not version.is_prerelease and not version.is_devrelease and all(version >= v for v in stable)
    arch_tags = {s.arch: f"{tag}-{s.suffix}" for s in sources}
    # Every final tag before the first write: a valid PEP 440 version can still make an invalid tag.
    for final in (tag, *arch_tags.values()):
        if not naming.TAG_RE.match(final):
            raise PublishError(f"--version: {version} makes the tag {final!r}, which a registry refuses "
                               "(letters, digits, _ . -, at most 128 characters)")
    return PublishPlan(kind="release", image=image, sha=sha, staging=staging, publish=publish, sources=sources,
                       arch_tags=arch_tags, index_tags=(tag, "latest") if latest else (tag,),
                       moving=frozenset({"latest"}))


class PublishResult(SimpleNamespace):
    """What publishing one image did (or would do), filled in as the run goes."""

    def __init__(self, image: str, dry_run: bool, *, tags: dict[str, str] | None = None,
                 index_digest: str | None = None, arch_digests: dict[str, str] | None = None,
                 moved: list[str] | None = None, unchanged: list[str] | None = None,
                 actions: list[str] | None = None, stats: dict[str, int] | None = None) -> None:
        super().__init__(image=image, dry_run=dry_run,
                         tags=tags if tags is not None else {},                      # full tag ref -> digest
                         index_digest=index_digest,
                         arch_digests=arch_digests if arch_digests is not None else {},
                         moved=moved if moved is not None else [],                   # created or re-pointed
                         unchanged=unchanged if unchanged is not None else [],
                         actions=actions if actions is not None else [],             # done (or to do), in order
                         stats=stats if stats is not None else {})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


LABEL_REVISION = "org.opencontainers.image.revision"
LABEL_SOURCE = "org.opencontainers.image.source"


def _single_arch(reg: registry.Registry, repo: str, ref: str, arch: str, plan: PublishPlan,
                 manifest: registry.Manifest) -> tuple[registry.Manifest, dict]:
    """The per-arch image behind a staging digest (or tag), `manifest` the one found there, and its platform,
    verified to be `arch` (an index with one platform allowed) and, when the plan names a source, built from
    `plan.sha` of that repository (its labels). The platform is returned so that the index entry needs no
    second config read."""
    where = f"{reg.host}/{repo}{'@' if ref.startswith('sha256:') else ':'}{ref}"
    if manifest.is_index:
        platforms = manifest.platforms()
        if len(platforms) != 1:
            raise PublishError(f"{where} is a multi-platform index ({', '.join(platforms)}), not a single {arch} image")
        (child,) = platforms.values()
        manifest = reg.get_manifest(repo, child.digest)
    config = json.loads(reg.read_blob(repo, manifest.data["config"]["digest"]))
    platform = {"architecture": config.get("architecture"), "os": config.get("os")}
    if config.get("variant"):
        platform["variant"] = config["variant"]
    if platform.get("os") != "linux" or platform.get("architecture") != UNAME_ARCH[arch]:
        got = "/".join(str(platform.get(k)) for k in ("os", "architecture") if platform.get(k))
        raise PublishError(f"{where} claims {arch} but its image config says {got}: "
                           "refusing to publish a mislabelled image")
    if plan.source_url:
        labels = (config.get("config") or {}).get("Labels") or {}
        revision, source = labels.get(LABEL_REVISION), labels.get(LABEL_SOURCE)
        if revision != plan.sha or str(source or "").rstrip("/").lower() != plan.source_url.rstrip("/").lower():
            raise PublishError(f"{where}: labelled {LABEL_REVISION}={revision!r}, {LABEL_SOURCE}={source!r}, not "
                               f"{plan.sha} of {plan.source_url}: refusing to publish an image the trusted build "
                               "did not make")
    return manifest, platform


def present_arches(plan: PublishPlan, factory: registry.RegistryFactory) -> list[str]:
    """The architectures whose staging image exists (a lookup failure raises, never counts as absent)."""
    host, repo = naming.split_repository(plan.staging)
    reg = factory(host)
    return [s.arch for s in plan.sources if reg.resolve(repo, s.ref) is not None]


class _Prepared(NamedTuple):
    """One image checked and ready: its verified per-arch manifests and the index that joins them."""

    plan: PublishPlan
    src: registry.Registry
    dst: registry.Registry
    s_repo: str
    p_repo: str
    manifests: dict[str, registry.Manifest]
    index: bytes
    index_type: str
    result: PublishResult


def _per_arch(fn: Callable[[ArchSource, registry.Registry], Any], sources: tuple[ArchSource, ...],
              reg: registry.Registry) -> dict[str, Any]:
    """fn(source, client) for every arch at the same time (the reads of one overlap the other's round trips),
    each thread with a client of its own; arch -> its result, or the exception it raised (in source order)."""
    import threading

    outcomes: dict[str, Any] = {}

    def one(source: ArchSource, client: registry.Registry) -> None:
        try:
            outcomes[source.arch] = fn(source, client)
        except BaseException as exc:        # handed to the caller, which raises it
            outcomes[source.arch] = exc

    threads = [threading.Thread(target=one, args=(source, reg.clone()), name=f"ghbuild-{source.arch}", daemon=True)
               for source in sources[1:]]
    for thread in threads:
        thread.start()
    if sources:
        one(sources[0], reg)
        first = outcomes[sources[0].arch]
        if isinstance(first, BaseException) and not isinstance(first, Exception):
            raise first                     # Ctrl-C or SIGTERM: at once (the other reads are daemon threads)
    for thread in threads:
        thread.join()
    return {source.arch: outcomes[source.arch] for source in sources}


def _prepare(plan: PublishPlan, factory: registry.RegistryFactory, dry_run: bool,
             log: Callable[[str], None]) -> _Prepared:
    """Step 1, reads only: every arch present and what it claims to be; the copy and index actions."""
    from ghbuild.registry import client as registry

    result = PublishResult(image=plan.image, dry_run=dry_run)
    s_host, s_repo = naming.split_repository(plan.staging)
    p_host, p_repo = naming.split_repository(plan.publish)
    src, dst = factory(s_host), factory(p_host)

    def check(source: ArchSource, reg: registry.Registry) -> tuple[registry.Manifest, dict] | None:
        manifest = reg.find_manifest(s_repo, source.ref)
        return None if manifest is None else _single_arch(reg, s_repo, source.ref, source.arch, plan, manifest)

    outcomes = _per_arch(check, plan.sources, src)
    missing = [f"{plan.staging}{'@' if s.digest else ':'}{s.ref}" for s in plan.sources if outcomes[s.arch] is None]
    if missing:
        raise PublishError(f"staging image(s) missing: {', '.join(missing)}; a {plan.kind} is published only "
                           "when every architecture built")
    for outcome in outcomes.values():
        if isinstance(outcome, BaseException):
            raise outcome
    verified = outcomes
    manifests = {arch: manifest for arch, (manifest, _) in verified.items()}
    children = []
    for source in plan.sources:
        manifest = manifests[source.arch]
        result.arch_digests[source.arch] = manifest.digest
        result.actions.append(f"copy {plan.staging}:{source.tag} ({manifest.digest}"
                              f"{', recorded by the trusted build' if source.digest else ''}) -> "
                              f"{plan.publish}@{manifest.digest}")
        children.append(registry.Descriptor(manifest.media_type, manifest.digest, len(manifest.raw),
                                            verified[source.arch][1]))
    raw, media_type = registry.make_index(children)
    result.index_digest = registry.sha256_digest(raw)
    result.actions.append(f"push index {plan.publish}@{result.index_digest} "
                          f"({', '.join(s.arch for s in plan.sources)})")
    return _Prepared(plan, src, dst, s_repo, p_repo, manifests, raw, media_type, result)


def _transfer(prep: _Prepared, stats: registry.CopyStats, log: Callable[[str], None],
              tagged: frozenset[str] = frozenset()) -> None:
    """Steps 2 and 3: copy each image by digest, then push the index by digest (no tag moves). `tagged`: digests
    a tag of the publish repository was just found at, so present there without another lookup."""
    plan = prep.plan
    _copy_arches(prep.src, prep.s_repo, prep.dst, prep.p_repo, [prep.manifests[s.arch] for s in plan.sources],
                 stats, log, tagged)
    digest = prep.result.index_digest or ""
    if digest not in tagged and prep.dst.resolve(prep.p_repo, digest) is None:
        prep.dst.put_manifest(prep.p_repo, digest, prep.index, prep.index_type)


def _tag_moves(prep: _Prepared) -> list[tag_moves.TagMove]:
    from ghbuild.publish import tag_moves

    plan, moves = prep.plan, []
    for source in plan.sources:
        m = prep.manifests[source.arch]
        tag = plan.arch_tags[source.arch]
        rank = tag_moves.MOVING_ARCH if tag in plan.moving else tag_moves.IMMUTABLE_ARCH
        moves.append(tag_moves.TagMove(plan.publish, prep.p_repo, prep.dst, tag, m.digest, m.raw, m.media_type, rank,
                                       plan.image))
    for tag in plan.index_tags:
        rank = tag_moves.MOVING_INDEX if tag in plan.moving else tag_moves.IMMUTABLE_INDEX
        moves.append(tag_moves.TagMove(plan.publish, prep.p_repo, prep.dst, tag, prep.result.index_digest or "",
                                       prep.index, prep.index_type, rank, plan.image))
    return moves


def _refuse_moving_immutable(moves: list[tag_moves.TagMove], kind: str) -> None:
    """A release tag (`v<V>`, `v<V>-<arch>`) that exists already is never moved to other content."""
    if kind != "release":
        return
    clash = [m for m in moves if not m.moving and m.previous is not None and m.needed]
    if clash:
        raise PublishError("release tags exist already with other content: "
                           + ", ".join(f"{m.ref} = {m.previous} (this run: {m.digest})" for m in clash)
                           + "; a release tag is never moved: release a new version")


def execute_all(plans: list[PublishPlan], factory: registry.RegistryFactory, *, dry_run: bool = False,
                log: Callable[[str], None] = lambda m: None, commit_time: int | Callable[[], int | None] | None = None,
                warn: Callable[[str], None] = lambda m: None, **lease_options: Any) -> list[PublishResult]:
    """Publish every plan as one unit: all images checked, then all copied, then one tag phase for all.

    The tag phase (ghbuild.publish.tag_moves) runs under each publish repository's lease (ghbuild.publish.lease), taken
    only when a tag has to move. A nightly whose commit is older than the one the moving tags last went
    to (`commit_time`, Unix seconds, against the lease's record) creates its own immutable tags and
    leaves the moving ones alone. `commit_time` may be a function that finds it: it is called only when a
    tag has to move (a republish never asks git).
    """
    from ghbuild.publish import tag_moves
    from ghbuild.registry import client as registry

    prepared = [_prepare(plan, factory, dry_run, log) for plan in plans]     # 1. nothing written yet
    stats = {id(p): registry.CopyStats() for p in prepared}
    # What the tags hold now, read before the copies: a manifest a tag of its repository holds needs no lookup
    # of its own (a republish reads only its tags). The values decide only whether a tag must move; a move
    # reads them again under the lease.
    moves = tag_moves.read_previous(tag_moves.ordered([m for prep in prepared for m in _tag_moves(prep)]))
    kind = plans[0].kind if plans else "nightly"
    _refuse_moving_immutable(moves, kind)       # before anything is copied: a clash writes nothing anywhere
    for prep in prepared:
        for action in prep.result.actions:
            log(("would " if dry_run else "") + action)
        if not dry_run:
            tagged = frozenset(m.previous for m in moves
                               if m.reg is prep.dst and m.repo == prep.p_repo and m.previous)
            _transfer(prep, stats[id(prep)], log, tagged)                   # 2, 3. no tag moves
    phase = tag_moves.TagPhase()
    if dry_run:
        for move in moves:
            if move.needed:
                log("would " + move.describe())
    elif any(m.needed for m in moves):
        when = commit_time() if callable(commit_time) else commit_time
        moves, phase = _locked_tag_phase(moves, kind, plans[0].sha, when, log, warn, lease_options)
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


def _locked_tag_phase(moves: list[tag_moves.TagMove], kind: str, sha: str, commit_time: int | None,
                      log: Callable[[str], None], warn: Callable[[str], None], lease_options: Mapping[str, Any],
                      ) -> tuple[list[tag_moves.TagMove], tag_moves.TagPhase]:
    """The tag phase under the lease of every publish repository involved (taken in name order, so two
    runs never wait for each other crosswise); the tags are read again once the leases are held."""
    from ghbuild.publish import lease, tag_moves

    leases: list[lease.Lease] = []
    holder = f"{kind} of {sha}"
    try:
        for repository, group in sorted(tag_moves.by_repository(moves).items()):
            first = group[0]
            held = lease.Lease(first.reg, first.repo, repository, holder, log=log, **lease_options)
            held.acquire()
            leases.append(held)
        moves = tag_moves.read_previous(moves)
        _refuse_moving_immutable(moves, kind)
        for held in leases:
            if kind == "nightly" and _implausible(held.found, sha):
                warn(f"publish {kind}: {held.repository}'s lease records {held.found.published_sha} with a commit "
                     f"time {held.found.published_time}, more than a day in the future: ignored (a wrong commit "
                     "date must not freeze the moving tags)")
        newer = [h for h in leases if kind == "nightly" and _superseded(h.found, sha, commit_time)]
        phase = tag_moves.TagPhase()
        if newer:
            found = newer[0].found
            warn(f"publish {kind}: {newer[0].repository}'s moving tags went to {found.published_sha}, a newer "
                 f"commit than {sha}: only this commit's own tags are created, the moving tags stay")
            phase.superseded = [m for m in moves if m.moving and m.needed]
        checks = {h.repository: h for h in leases}
        todo = [m for m in moves if m not in phase.superseded]
        done = tag_moves.apply(todo, check_lease=lambda m: checks[m.repository].check(), log=log)
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


# A recorded commit time this far ahead of the clock is a wrong commit date (or a clock), not a newer commit:
# honouring it would leave every later nightly's moving tags where they are until that date.
FUTURE_TOLERANCE = 24 * 3600


def _implausible(found: lease.LeaseState, sha: str, now: float | None = None) -> bool:
    return (found.published_time is not None and found.published_sha != sha
            and found.published_time > (time.time() if now is None else now) + FUTURE_TOLERANCE)


def _superseded(found: lease.LeaseState, sha: str, commit_time: int | None, now: float | None = None) -> bool:
    return (commit_time is not None and found.published_time is not None and found.published_sha != sha
            and commit_time < found.published_time and not _implausible(found, sha, now))


def _copy_arches(src: registry.Registry, s_repo: str, dst: registry.Registry, p_repo: str,
                 manifests: list[registry.Manifest], stats: registry.CopyStats, log,
                 tagged: frozenset[str] = frozenset()) -> None:
    """Copy the per-arch images at the same time: one arch's upload overlaps the other's. The target is asked
    first which it already holds (unless a tag there holds it: `tagged`): those take no thread, no connection
    of their own and no second request (a republish finds every one there)."""
    from ghbuild.registry import client as registry

    missing = []
    for manifest in manifests:
        if manifest.digest in tagged or dst.resolve(p_repo, manifest.digest) is not None:
            registry.copy_image(src, s_repo, manifest.digest, dst, p_repo, (), stats, log=log, manifest=manifest,
                                present=True)
        else:
            missing.append(manifest)
    if len(missing) <= 1:
        for manifest in missing:
            registry.copy_image(src, s_repo, manifest.digest, dst, p_repo, (), stats, log=log, manifest=manifest,
                                present=False)
        return
    manifests = missing
    from concurrent.futures import ThreadPoolExecutor

    log = registry.serialized(log)

    def one(manifest: registry.Manifest) -> registry.CopyStats:
        part = registry.CopyStats()
        registry.copy_image(src.clone(), s_repo, manifest.digest, dst.clone(), p_repo, (), part, log=log,
                            manifest=manifest, present=False)
        return part

    with ThreadPoolExecutor(max_workers=len(manifests), thread_name_prefix="ghbuild-arch") as pool:
        for part in pool.map(one, manifests):
            stats.add(part)


def render(result: PublishResult, kind: str = "nightly") -> str:
    lines = [f"ghbuild publish {kind}: {result.image}" + (" (dry run: nothing pushed)" if result.dry_run else "")]
    lines += [f"  {a}" for a in result.actions]
    for ref, digest in result.tags.items():
        state = "unchanged" if ref in result.unchanged else ("would move" if result.dry_run else "moved")
        lines.append(f"  {ref} = {digest} ({state})")
    if result.stats:
        s = result.stats
        lines.append(f"  bytes copied {s.get('copied_bytes', 0):,} in {s.get('copied_blobs', 0)} blobs; "
                     f"present {s.get('skipped_bytes', 0):,} in {s.get('skipped_blobs', 0)}; "
                     f"mounted {s.get('mounted_bytes', 0):,} in {s.get('mounted_blobs', 0)}")
    return "\n".join(lines)


def summary(outcome: PublishRun, dry_run: bool = False) -> str:
    """The job summary of a publish: per image, every tag with its digest and what happened to it."""
    from ghbuild.markdown import code, md

    title = f"ghbuild publish {outcome.kind}" + (f" v{outcome.version}" if outcome.version else "")
    lines = [f"### {md(title)}" + (" (dry run: nothing pushed)" if dry_run else ""), "",
             f"Commit {code(outcome.sha)}.", ""]
    for result in outcome.results:
        moved = set(result.moved)
        left = {a.split()[1] for a in result.actions if a.startswith("leave ")}
        lines += [f"#### {md(result.image)}", "", f"Index {code(result.index_digest or '')}.", "",
                  "| tag | digest | |", "|---|---|---|"]
        for ref, digest in result.tags.items():
            state = ("unchanged" if ref not in moved and ref not in left else
                     "left: a newer commit holds it" if ref in left else "would move" if dry_run else "moved")
            lines.append(f"| {code(ref)} | {code(digest)} | {state} |")
        s = result.stats or {}
        if not dry_run:
            lines += ["", f"Copied {s.get('copied_bytes', 0):,} bytes in {s.get('copied_blobs', 0)} blobs; "
                          f"{s.get('skipped_bytes', 0) + s.get('mounted_bytes', 0):,} bytes were already there "
                          f"or mounted ({s.get('skipped_blobs', 0) + s.get('mounted_blobs', 0)} blobs)."]
        lines.append("")
    if outcome.github_release:
        lines.append(f"GitHub release: {md(outcome.github_release)}")
    return "\n".join(lines) + "\n"


def failure_summary(kind: str, error: Exception) -> str:
    """The job summary of a failed publish: the error, and after a failed tag phase every tag restored
    and every tag that could not be, with the digests."""
    from ghbuild.markdown import md

    lines = [f"### ghbuild publish {md(kind)}: failed", "", md(error), ""]
    phase = getattr(error, "phase", None)
    if phase is not None:
        lines += [f"- restored {md(item)}" for item in phase.restored]
        lines += [f"- **not restored**: {md(item)}" for item in phase.unrestored]
        lines.append("")
    return "\n".join(lines) + "\n"


def outputs(outcome: PublishRun) -> dict[str, str]:
    """The step outputs: `digests` (image -> index digest), `tags` (one ref per line), `metadata` (JSON)."""
    return {"digests": json.dumps({r.image: r.index_digest for r in outcome.results}, sort_keys=True),
            "tags": "\n".join(ref for r in outcome.results for ref in r.tags),
            "metadata": json.dumps(outcome.to_dict(), sort_keys=True)}


def release_notes(version, sha: str, results: list[PublishResult]) -> str:
    """Markdown for the GitHub release: every published tag with its digest."""
    lines = [f"Images for v{version}, built from {sha}.", ""]
    for result in results:
        lines += [f"### {result.image}", "", "| tag | digest |", "|---|---|"]
        lines += [f"| `{ref}` | `{digest}` |" for ref, digest in result.tags.items()]
        lines.append("")
    return "\n".join(lines)


def create_github_release(env: Mapping[str, str], version, sha: str, body: str, prerelease: bool,
                          make_latest: bool) -> str:
    """Create (or find) the GitHub release `v<V>` through PyGithub; returns its URL."""
    from github import Auth, Github, GithubException

    repository = env.get("GITHUB_REPOSITORY")
    token = env.get("GITHUB_TOKEN")
    if not repository or not token:
        raise PublishError("GitHub release: GITHUB_REPOSITORY and GITHUB_TOKEN are needed (or pass --no-github-release)")
    client = Github(base_url=env.get("GITHUB_API_URL") or "https://api.github.com", auth=Auth.Token(token),
                    seconds_between_writes=0.1)
    tag = f"v{version}"
    try:
        repo = client.get_repo(repository)
        try:
            return repo.get_release(tag).html_url            # a rerun: the release is already there
        except GithubException as exc:
            if exc.status != 404:
                raise
        release = repo.create_git_release(tag=tag, name=tag, message=body, prerelease=prerelease,
                                          target_commitish=sha, make_latest="true" if make_latest else "false")
        return release.html_url
    except GithubException as exc:
        message = (exc.data or {}).get("message") if isinstance(exc.data, dict) else None
        raise PublishError(f"GitHub release {tag} in {repository}: HTTP {exc.status} {message or ''}".strip()) from None


# --------------------------------------------------------------------------- one publishing run

def refuse_pull_requests(env: Mapping[str, str]) -> None:
    """Publishing is for trusted schedule, push and workflow_dispatch runs, never a pull request's."""
    from ghbuild.errors import TrustError
    from ghbuild.github.context import PR_EVENTS

    event = env.get("GITHUB_EVENT_NAME")
    if event in PR_EVENTS:
        raise TrustError(f"publish: refused in a {event} run (publishing is for trusted schedule, push and "
                         "workflow_dispatch runs)")


class PublishRun(SimpleNamespace):
    """What one `ghbuild publish nightly|release` did, for every image."""

    def __init__(self, kind: str, sha: str, results: list[PublishResult], version: Any = None,
                 latest: bool = False, github_release: str | None = None) -> None:
        super().__init__(kind=kind, sha=sha, results=results,
                         version=version,                   # packaging Version, release only
                         latest=latest,
                         github_release=github_release)     # its URL; None: skipped or dry run

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "sha": self.sha, "images": [r.to_dict() for r in self.results]}
        if self.kind == "release" and self.results:
            data.update(version=str(self.version), latest=self.latest, github_release=self.github_release)
        return data


def trusted_records(records: Mapping[str, Mapping[str, Any]] | None, sha: str) -> dict[str, Mapping[str, Any]] | None:
    """The build records of `sha` (by job id), each checked: written by a trusted build of this very commit.
    None: no records were given. A record of another commit, or of an untrusted build, is refused."""
    if records is None:
        return None
    checked = {}
    for job_id, record in records.items():
        where = f"build record {job_id}"
        if not isinstance(record, Mapping) or not all(isinstance(record.get(k), str) for k in ("image", "arch", "digest",
                                                                                                "ref", "sha")):
            raise PublishError(f"{where}: not a record of `ghbuild build --record` (image, arch, digest, ref, sha)")
        if record["sha"] != sha:
            raise PublishError(f"{where} is of commit {record['sha']}, not {sha}")
        if record.get("trusted") is not True:
            raise PublishError(f"{where} was written by an untrusted build: only a trusted build's images are published")
        if not naming.DIGEST_RE.match(record["digest"]) or not record["ref"].endswith("@" + record["digest"]):
            raise PublishError(f"{where}: digest {record['digest']!r} and ref {record['ref']!r} do not agree")
        checked[job_id] = record
    return checked


def _bind(plan: PublishPlan, recorded: Mapping[str, Mapping[str, Any]]) -> PublishPlan:
    """The plan with each arch's recorded digest; arches without a record keep none (the caller decides)."""
    sources = []
    for source in plan.sources:
        record = recorded.get(f"{plan.image}-{source.arch}")
        if record is not None:
            if (record["image"], record["arch"]) != (plan.image, source.arch):
                raise PublishError(f"build record {plan.image}-{source.arch} names {record['image']}/{record['arch']}")
            if record["ref"].partition("@")[0] != plan.staging:
                raise PublishError(f"build record {plan.image}-{source.arch}: {record['ref']} is not in the staging "
                                   f"repository {plan.staging}")
            source = source._replace(digest=record["digest"])
        sources.append(source)
    return plan._replace(sources=tuple(sources))


def _recorded_arches(plan: PublishPlan) -> list[str]:
    return [s.arch for s in plan.sources if s.digest]


def _release_plans(options: Options, images: list[str], sha: str, owner: str, version,
                   factory: registry.RegistryFactory, warn: Callable[[str], None],
                   recorded: Mapping[str, Mapping[str, Any]] | None, source_url: str | None) -> list[PublishPlan]:
    """Every image checked before anything is written: all arches staged, or none (skipped), never one."""
    plans = []
    for image in images:
        host, repo = naming.split_repository(nightly_plan(options, image, sha, owner).publish)
        plan = release_plan(options, image, sha, owner, version, factory(host).list_tags(repo))
        plan = plan._replace(source_url=source_url)
        if recorded is not None:
            plan = _bind(plan, recorded)
            present = _recorded_arches(plan)
        else:
            present = present_arches(plan, factory)
        if not present:
            warn(f"release {version}: no {'build record' if recorded is not None else 'staging image'} of "
                 f"{image} for {sha}: skipped")
            continue
        if len(present) != len(plan.sources):
            missing = [s.arch for s in plan.sources if s.arch not in present]
            raise PublishError(f"release {version}: {image} has {', '.join(present)} but not "
                               f"{', '.join(missing)} for {sha}: refusing a partial release")
        plans.append(plan)
    return plans


def _nightly_plans(options: Options, images: list[str], sha: str, owner: str,
                   recorded: Mapping[str, Mapping[str, Any]] | None, source_url: str | None) -> list[PublishPlan]:
    plans = []
    for image in images:
        plan = nightly_plan(options, image, sha, owner)._replace(source_url=source_url)
        if recorded is not None:
            plan = _bind(plan, recorded)
            missing = [s.arch for s in plan.sources if not s.digest]
            if missing:
                raise PublishError(f"nightly: no build record of {image} for {', '.join(missing)} ({sha}); a "
                                   "nightly is published only when every architecture built")
        plans.append(plan)
    return plans


def run(options: Options, kind: str, images: list[str], *, sha: str, owner: str, env: Mapping[str, str],
        version: str | None = None, dry_run: bool = False, github_release: bool = True,
        records: Mapping[str, Mapping[str, Any]] | None = None, source_url: str | None = None,
        factory: registry.RegistryFactory | None = None, commit_time: int | Callable[[], int | None] | None = None,
        lease_options: Mapping[str, Any] | None = None, log: Callable[[str], None] = lambda m: None,
        say: Callable[[str], None] = lambda m: None, warn: Callable[[str], None] = lambda m: None,
        group: Callable[[str], Any] | None = None) -> PublishRun:
    """Publish `images` of commit `sha` as a nightly or as release `version` (checked before anything else).

    Only what the trusted build recorded is published: `records` (job id -> `build --record` record, as
    `ghbuild digests` collects them) give each arch's digest, so a staging tag moved since cannot slip in;
    `source_url` (the canonical repository's URL) is what every image's source label must name, with
    `sha` as its revision. Every image is checked and copied before any tag moves, and the tags of all
    of them move in one phase (`execute_all`); `commit_time` (Unix seconds of `sha`) keeps an older
    commit's nightly from moving tags a newer one holds; `lease_options` tune ghbuild.publish.lease.Lease. Without records only a dry run proceeds (it reads the staging tags).
    `log` takes progress lines, `say` the per-image report and the GitHub release line, `warn` what a
    workflow should show as a warning; `group` (a context manager factory) folds each image's log.
    """
    import contextlib

    refuse_pull_requests(env)
    version = parse_version(version or "") if kind == "release" else None
    recorded = trusted_records(records, sha)
    if recorded is None and not dry_run:
        raise PublishError(f"publish {kind}: no build records (--records): only what the trusted build of {sha} "
                           "recorded is published, never whatever a staging tag holds now")
    if recorded is not None and not recorded:
        raise PublishError(f"publish {kind}: no trusted build record of {sha}")
    if recorded is None:
        warn(f"publish {kind} (dry run): no build records: reading the staging tags instead")
    if kind == "release" and github_release and not dry_run and not (env.get("GITHUB_TOKEN")
                                                                     and env.get("GITHUB_REPOSITORY")):
        raise UsageError("publish release: GITHUB_TOKEN and GITHUB_REPOSITORY are needed for the GitHub release "
                         "(or pass --no-github-release)")
    if factory is None:
        from ghbuild.registry import client as registry

        factory = registry.client_factory(env, log)
    if kind == "release":
        plans = _release_plans(options, images, sha, owner, version, factory, warn, recorded, source_url)
    else:
        plans = _nightly_plans(options, images, sha, owner, recorded, source_url)
    group = group or (lambda title: contextlib.nullcontext())
    outcome = PublishRun(kind=kind, sha=sha, results=[], version=version)
    title = f"publish {kind} {', '.join(p.image for p in plans)}{' (dry run)' if dry_run else ''}"
    if plans:
        with group(title):
            outcome.results = execute_all(plans, factory, dry_run=dry_run, log=log, commit_time=commit_time,
                                          warn=warn, **(lease_options or {}))
    for plan, result in zip(plans, outcome.results):
        say(render(result, plan.kind))
    if kind == "release" and outcome.results:
        outcome.latest = any("latest" in p.index_tags for p in plans)
        if not github_release or dry_run:
            say(f"  GitHub release v{version}: " + ("skipped (--no-github-release)" if not github_release
                                                    else "would be created"))
        else:
            notes = release_notes(version, sha, outcome.results)
            outcome.github_release = create_github_release(env, version, sha, notes, version.is_prerelease,
                                                           outcome.latest)
            say(f"  GitHub release: {outcome.github_release}")
    return outcome
