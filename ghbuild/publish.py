"""Publishing: nightly per-arch tags and multi-arch manifests, from the per-commit staging images.

Registry to registry (ghbuild.registry): only the blobs the target lacks move, nothing passes through
a Docker engine, and a manifest list needs no blobs at all. Order matters:

1. resolve every per-arch staging image and verify it is the architecture its tag claims (before
   anything is written anywhere);
2. copy each image to the publish repository by digest (no tag moves yet: the slow, failure-prone
   part);
3. push the multi-arch index by digest;
4. move the tags: per-arch tags first, the index tags last (`nightly-<sha>`, then `nightly`). A
   failure while moving tags puts the tags already moved back where they were, so either every
   new tag points at the new digests or none moved.

A rerun of the same commit finds everything in place and moves nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ghbuild import credentials, naming, registry
from ghbuild.config import expand_repository
from ghbuild.errors import ConfigError, GhbuildError
from ghbuild.options import Options

UNAME_ARCH = {"amd64": "amd64", "arm64": "arm64"}


class PublishError(GhbuildError):
    """Publishing could not proceed or failed; nothing (or only what was rolled back) moved."""

    exit_code = 13
    kind = "publish error"


def split_repository(name: str) -> tuple[str, str]:
    """`host[:port]/path` -> (host, path); a name without a registry host is on Docker Hub."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", name


@dataclass(frozen=True)
class ArchSource:
    arch: str
    suffix: str
    tag: str                      # staging tag, <sha>-<suffix>


@dataclass(frozen=True)
class NightlyPlan:
    image: str
    sha: str
    staging: str                  # repository
    publish: str                  # repository
    sources: tuple[ArchSource, ...]
    arch_tags: dict[str, str]     # arch -> nightly-<suffix>
    index_tags: tuple[str, ...]   # nightly-<sha>, nightly (in push order: the moving tag last)


def nightly_plan(options: Options, image: str, sha: str, owner: str) -> NightlyPlan:
    """Pure: which staging tags become which published tags."""
    if image not in options.images:
        raise ConfigError(f"--image {image}: no such image (known: {', '.join(options.images)})")
    img = options.images[image]
    staging_t = img.staging or options.registries.staging
    publish_t = img.publish or options.registries.publish
    if not staging_t:
        raise ConfigError(f"{options.config_path}: registries.staging: not set; nightly publishes from staging")
    if not publish_t:
        raise ConfigError(f"{options.config_path}: registries.publish: not set; nowhere to publish to")
    if not (len(sha) == 40 and all(c in "0123456789abcdef" for c in sha)):
        raise PublishError(f"--sha: {sha!r} is not a 40-hex commit id")
    staging = naming.validate_repository(expand_repository(staging_t, image, owner), "registries.staging")
    publish = naming.validate_repository(expand_repository(publish_t, image, owner), "registries.publish")
    suffixes = options.publish.arch_suffixes
    nightly = options.publish.nightly_tag
    sources = tuple(ArchSource(arch, suffixes[arch], f"{sha}-{suffixes[arch]}") for arch in img.arches)
    return NightlyPlan(image=image, sha=sha, staging=staging, publish=publish, sources=sources,
                       arch_tags={s.arch: f"{nightly}-{s.suffix}" for s in sources},
                       index_tags=(f"{nightly}-{sha}", nightly))


@dataclass
class PublishResult:
    image: str
    dry_run: bool
    tags: dict[str, str] = field(default_factory=dict)        # full tag ref -> digest
    index_digest: str | None = None
    arch_digests: dict[str, str] = field(default_factory=dict)
    moved: list[str] = field(default_factory=list)            # tags created or re-pointed
    unchanged: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)          # what was (or would be) done, in order
    stats: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


RegistryFactory = Callable[[str], registry.Registry]


def default_factory(env: Mapping[str, str], log: Callable[[str], None]) -> RegistryFactory:
    cache: dict[str, registry.Registry] = {}

    def make(host: str) -> registry.Registry:
        if host not in cache:
            cache[host] = registry.Registry(host, credentials.for_host(host, env), log=log)
        return cache[host]

    return make


def _single_arch(reg: registry.Registry, repo: str, tag: str, arch: str) -> registry.Manifest:
    """The per-arch image behind a staging tag, verified to be `arch` (index with one platform allowed)."""
    manifest = reg.get_manifest(repo, tag)
    if manifest.is_index:
        platforms = manifest.platforms()
        if len(platforms) != 1:
            raise PublishError(f"{reg.host}/{repo}:{tag} is a multi-platform index ({', '.join(platforms)}), "
                               f"not a single {arch} image")
        (child,) = platforms.values()
        manifest = reg.get_manifest(repo, child.digest)
    platform = registry.image_platform(reg, repo, manifest)
    if platform.get("os") != "linux" or platform.get("architecture") != UNAME_ARCH[arch]:
        got = "/".join(str(platform.get(k)) for k in ("os", "architecture") if platform.get(k))
        raise PublishError(f"{reg.host}/{repo}:{tag} claims {arch} but its image config says {got}: "
                           "refusing to publish a mislabelled image")
    return manifest


def publish_nightly(plan: NightlyPlan, factory: RegistryFactory, dry_run: bool = False,
                    log: Callable[[str], None] = lambda m: None) -> PublishResult:
    result = PublishResult(image=plan.image, dry_run=dry_run)
    s_host, s_repo = split_repository(plan.staging)
    p_host, p_repo = split_repository(plan.publish)
    src, dst = factory(s_host), factory(p_host)

    # 1. every arch present and what it claims to be, before anything is written
    missing = []
    for source in plan.sources:
        if src.resolve(s_repo, source.tag) is None:
            missing.append(f"{plan.staging}:{source.tag}")
    if missing:
        raise PublishError(f"staging image(s) missing: {', '.join(missing)}; a nightly is published only when "
                           "every architecture built")
    manifests = {s.arch: _single_arch(src, s_repo, s.tag, s.arch) for s in plan.sources}

    # 2. copy by digest
    stats = registry.CopyStats()
    children = []
    for source in plan.sources:
        manifest = manifests[source.arch]
        result.arch_digests[source.arch] = manifest.digest
        action = f"copy {plan.staging}:{source.tag} ({manifest.digest}) -> {plan.publish}@{manifest.digest}"
        result.actions.append(action)
        log(("would " if dry_run else "") + action)
        if not dry_run:
            registry.copy_image(src, s_repo, manifest.digest, dst, p_repo, (), stats, log=log)
        platform = registry.image_platform(src, s_repo, manifest)
        children.append(registry.Descriptor(manifest.media_type, manifest.digest, len(manifest.raw), platform))

    # 3. the index, by digest
    raw, media_type = registry.make_index(children)
    index_digest = registry.sha256_digest(raw)
    result.index_digest = index_digest
    action = f"push index {plan.publish}@{index_digest} ({', '.join(s.arch for s in plan.sources)})"
    result.actions.append(action)
    log(("would " if dry_run else "") + action)
    if not dry_run and dst.resolve(p_repo, index_digest) is None:
        dst.put_manifest(p_repo, index_digest, raw, media_type)

    # 4. tags: per-arch first, index tags last; roll back on failure
    wanted: list[tuple[str, str, bytes, str]] = []
    for source in plan.sources:
        m = manifests[source.arch]
        wanted.append((plan.arch_tags[source.arch], m.digest, m.raw, m.media_type))
    for tag in plan.index_tags:
        wanted.append((tag, index_digest, raw, media_type))
    previous: dict[str, registry.Descriptor | None] = {tag: dst.resolve(p_repo, tag) for tag, *_ in wanted}
    moved: list[str] = []
    try:
        for tag, digest, body, mt in wanted:
            ref = f"{plan.publish}:{tag}"
            result.tags[ref] = digest
            before = previous[tag]
            if before is not None and before.digest == digest:
                result.unchanged.append(ref)
                continue
            action = f"tag {ref} -> {digest}" + (f" (was {before.digest})" if before else " (new)")
            result.actions.append(action)
            log(("would " if dry_run else "") + action)
            if not dry_run:
                dst.put_manifest(p_repo, tag, body, mt)
                moved.append(tag)
            result.moved.append(ref)
    except registry.RegistryError as exc:
        restored, lost = _roll_back(dst, p_repo, moved, previous)
        raise PublishError(f"moving tags failed ({exc}); rolled back {restored or 'nothing'}"
                           + (f"; could not restore {lost}" if lost else "")) from None
    result.stats = dict(stats.__dict__)
    return result


def _roll_back(dst: registry.Registry, repo: str, moved: list[str],
               previous: Mapping[str, registry.Descriptor | None]) -> tuple[str, str]:
    restored, lost = [], []
    for tag in reversed(moved):
        before = previous.get(tag)
        if before is None:
            lost.append(f"{tag} (new; a registry cannot delete a single tag)")
            continue
        try:
            old = dst.get_manifest(repo, before.digest)
            dst.put_manifest(repo, tag, old.raw, old.media_type)
            restored.append(tag)
        except registry.RegistryError as exc:
            lost.append(f"{tag} ({exc})")
    return ", ".join(restored), ", ".join(lost)


def render(result: PublishResult) -> str:
    lines = [f"ghbuild publish nightly: {result.image}" + (" (dry run: nothing pushed)" if result.dry_run else "")]
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


def to_json(result: PublishResult) -> str:
    return json.dumps(result.to_dict(), indent=2)
