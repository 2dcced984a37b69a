"""What a publish will do, decided before any request: the nightly and release plans per image, bound
to the trusted build records."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from packaging.version import InvalidVersion, Version

from ghbuild import naming
from ghbuild.config.options import Options
from ghbuild.errors import ConfigError, PublishError

if TYPE_CHECKING:   # annotations only
    pass


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
    # arch -> the per-commit per-arch tag (nightly: nightly-<sha>-<suffix>): what a moving per-arch tag held stays
    # tagged, so retention deletes it (and its cosign signature) with its commit instead of never seeing it
    commit_arch_tags: Mapping[str, str] = MappingProxyType({})


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
    staging = naming.validate_repository(naming.expand_repository(staging_t, image, owner), "registries.staging")
    publish = naming.validate_repository(naming.expand_repository(publish_t, image, owner), "registries.publish")
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
                       commit_arch_tags={s.arch: f"{nightly}-{sha}-{s.suffix}" for s in sources},
                       moving=frozenset({nightly, *(f"{nightly}-{s.suffix}" for s in sources)}))


def parse_version(text: str):
    """A release version (PEP 440, optional leading v, no local part): checked before anything is pushed."""

    raw = (text or "").strip()
    if not raw:
        raise PublishError("--version: empty; give the release version, e.g. 0.7.0 or 0.7.0rc1")
    try:
        version = Version(raw[1:] if raw[:1] in "vV" else raw)
    except InvalidVersion:
        raise PublishError(f"--version: {raw!r} is not a valid version "
                           "(PEP 440, e.g. 0.7.0, 0.7.0rc1, 0.7.0.post1)") from None
    if version.local:
        raise PublishError(f"--version: {raw!r} has a local part (+...), which a tag cannot hold")
    return version


def release_plan(options: Options, image: str, sha: str, owner: str, version, published_tags: list[str]) -> PublishPlan:
    """Pure: `v<V>` and `v<V>-<suffix>`, plus `latest` when V is the highest non-prerelease release published."""

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


def trusted_records(records: Mapping[str, Mapping[str, Any]] | None, sha: str) -> dict[str, Mapping[str, Any]] | None:
    """The build records of `sha` (by job id), each checked: written by a trusted build of this very commit.
    None: no records were given. A record of another commit, or of an untrusted build, is refused."""
    if records is None:
        return None
    checked = {}
    for job_id, record in records.items():
        where = f"build record {job_id}"
        fields = ("image", "arch", "digest", "ref", "sha")
        if not isinstance(record, Mapping) or not all(isinstance(record.get(k), str) for k in fields):
            raise PublishError(f"{where}: not a record of `ghbuild build --record` (image, arch, digest, ref, sha)")
        if record["sha"] != sha:
            raise PublishError(f"{where} is of commit {record['sha']}, not {sha}")
        if record.get("trusted") is not True:
            raise PublishError(f"{where} was written by an untrusted build: only a trusted build's images "
                               "are published")
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
