"""Publishing's registry side: resolve and verify each per-arch staging image, copy it by digest, push the indexes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.config.options import Options
from ghbuild.errors import PublishError
from ghbuild.publish.plans import (
    UNAME_ARCH,
    ArchSource,
    PublishPlan,
    _bind,
    _recorded_arches,
    nightly_plan,
    release_plan,
)
from ghbuild.publish.results import PublishResult
from ghbuild.registry import client as registry
from ghbuild.registry.mediatypes import ANNOTATION_CREATED
from ghbuild.sign import provenance
from ghbuild.sign.policy import LABEL_REVISION, LABEL_SOURCE


class _Verified(NamedTuple):
    """A per-arch image checked against its plan, and what its index entry says of it (from its config)."""

    manifest: registry.Manifest
    platform: dict
    created: str | None      # the config's `created`, verbatim
    recorded: registry.Manifest | None = None       # what the build pushed, when an index (image + attestation)
    attestation: registry.Descriptor | None = None  # its attestation manifest's entry, annotations included


def _single_arch(reg: registry.Registry, repo: str, ref: str, arch: str, plan: PublishPlan,
                 manifest: registry.Manifest) -> _Verified:
    """The per-arch image behind a staging digest (or tag), `manifest` the one found there, verified to be
    `arch` (an index with one platform allowed) and, when the plan names a source, built from `plan.sha` of
    that repository (its labels). Its platform and `created` are returned so that the index entry needs no
    second config read."""
    where = f"{reg.host}/{repo}{'@' if ref.startswith('sha256:') else ':'}{ref}"
    recorded, attestation = None, None
    if manifest.is_index:
        platforms = manifest.platforms()
        if len(platforms) != 1:
            raise PublishError(f"{where} is a multi-platform index ({', '.join(platforms)}), not a single {arch} image")
        (child,) = platforms.values()
        recorded = manifest
        attested = provenance.attestations(manifest.data)
        attestation = next((c for c in manifest.children() if c.digest == attested.get(child.digest)), None)
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
    created = config.get("created")
    return _Verified(manifest, platform, created if isinstance(created, str) and created else None, recorded,
                     attestation)


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
    index_manifest: bytes
    index_type: str
    result: PublishResult
    expected_bytes: int = 0     # every arch's blobs, as the copies count them (a blob two arches share: twice)


def _per_arch(fn: Callable[[ArchSource, registry.Registry], Any], sources: tuple[ArchSource, ...],
              reg: registry.Registry) -> dict[str, Any]:
    """fn(source, client) for every arch at the same time (the reads of one overlap the other's round trips),
    each thread with a client of its own; arch -> its result, or the exception it raised (in source order)."""

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
    result = PublishResult(image=plan.image, dry_run=dry_run)
    s_host, s_repo = naming.split_repository(plan.staging)
    p_host, p_repo = naming.split_repository(plan.publish)
    src, dst = factory(s_host), factory(p_host)

    def check(source: ArchSource, reg: registry.Registry) -> _Verified | None:
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
    verified: dict[str, _Verified] = outcomes
    # What the build pushed is what is copied and what the per-arch tag holds: with attestations, a one-platform
    # index (`docker pull --platform` picks the image from it), else the image itself.
    manifests = {arch: checked.recorded or checked.manifest for arch, checked in verified.items()}
    children = []
    for source in plan.sources:
        manifest, platform, created, _, attestation = verified[source.arch]
        copied = manifests[source.arch]
        result.arch_digests[source.arch] = copied.digest
        result.actions.append(f"copy {plan.staging}:{source.tag} ({copied.digest}"
                              f"{', recorded by the trusted build' if source.digest else ''}) -> "
                              f"{plan.publish}@{copied.digest}")
        # The child's `created` in its entry: retention on a plain registry ranks the commit by the index alone.
        annotations = {ANNOTATION_CREATED: created} if created else None
        children.append(registry.Descriptor(manifest.media_type, manifest.digest, len(manifest.raw), platform,
                                            annotations))
        if attestation is not None:   # beside its image, with the vnd.docker.reference.* annotations
            children.append(attestation)
    raw, media_type = registry.make_index(children)
    result.index_digest = registry.sha256_digest(raw)
    result.actions.append(f"push index {plan.publish}@{result.index_digest} "
                          f"({', '.join(s.arch for s in plan.sources)})")
    return _Prepared(plan, src, dst, s_repo, p_repo, manifests, raw, media_type, result, _expected_bytes(verified))


def _expected_bytes(verified: Mapping[str, _Verified]) -> int:
    """The bytes the copies of these arches count (sent, present or mounted): each arch's own blobs, a blob
    two arches share counted by both (ghbuild.publish.early_lease)."""
    return sum(b.size for checked in verified.values() for b in checked.manifest.blobs())


def _transfer(prep: _Prepared, stats: registry.CopyStats, log: Callable[[str], None],
              tagged: frozenset[str] = frozenset()) -> None:
    """Steps 2 and 3: copy each image by digest, then push the index by digest (no tag moves). `tagged`: digests
    a tag of the publish repository was just found at, so present there without another lookup."""
    plan = prep.plan
    _copy_arches(prep.src, prep.s_repo, prep.dst, prep.p_repo, [prep.manifests[s.arch] for s in plan.sources],
                 stats, log, tagged)
    digest = prep.result.index_digest or ""
    if digest not in tagged and prep.dst.resolve(prep.p_repo, digest) is None:
        prep.dst.put_manifest(prep.p_repo, digest, prep.index_manifest, prep.index_type)


def _copy_arches(src: registry.Registry, s_repo: str, dst: registry.Registry, p_repo: str,
                 manifests: list[registry.Manifest], stats: registry.CopyStats, log,
                 tagged: frozenset[str] = frozenset()) -> None:
    """Copy the per-arch images at the same time: one arch's upload overlaps the other's. The target is asked
    first which it already holds (unless a tag there holds it: `tagged`): those take no thread, no connection
    of their own and no second request (a republish finds every one there)."""
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
    log = registry.serialized(log)

    def one(manifest: registry.Manifest) -> registry.CopyStats:
        part = stats.part()
        registry.copy_image(src.clone(), s_repo, manifest.digest, dst.clone(), p_repo, (), part, log=log,
                            manifest=manifest, present=False)
        return part

    with ThreadPoolExecutor(max_workers=len(manifests), thread_name_prefix="ghbuild-arch") as pool:
        for part in pool.map(one, manifests):
            stats.add(part)


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
