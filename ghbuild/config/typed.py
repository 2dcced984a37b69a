"""Validated config data to typed Options, with the checks the schema cannot express (paths, bases, repository
templates, the helper image).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ghbuild import naming
from ghbuild.build import mountfiles
from ghbuild.config.environment import _SECRET_NAME_RE
from ghbuild.config.options import (
    ARCHES,
    DEFAULT_ARCH_SUFFIXES,
    DEFAULT_RUNNERS,
    DEFAULT_SCCACHE_HELPER_IMAGE,
    AttestOptions,
    BuildOptions,
    CacheMountOptions,
    CacheOptions,
    IdentityOptions,
    ImageOptions,
    Options,
    PublishOptions,
    RegistryOptions,
    SccacheOptions,
    TrustOptions,
    check_endpoint,
    parse_size,
)
from ghbuild.config.validation import _Where
from ghbuild.errors import ConfigError, InvalidReferenceError

_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


_PLACEHOLDERS = ("image", "owner")


def _build(data: dict[str, Any], path: Path, sources: dict[str, str], where: _Where) -> Options:
    """Options from validated config data, one section at a time, then the checks across sections."""
    top_runners = data.get("runners", {})
    runners_default = {a: tuple(top_runners.get(a, DEFAULT_RUNNERS[a])) for a in ARCHES}
    images = {name: _image(name, img, runners_default, where) for name, img in data["images"].items()}
    _check_bases(images, where)
    _check_paths(images, path.parent, where)
    options = Options(config_path=path, images=images, registries=_registries(data.get("registries", {})),
                      build=_build_section(data.get("build", {})), sccache=_sccache(data.get("sccache", {}), where),
                      trust=_trust(data.get("trust", {}), where), publish=_publish(data.get("publish", {}), where),
                      cache=_cache(data.get("cache", {}), where), sources=sources)
    _check_repositories(options, where)
    return options


def _registries(reg: dict[str, Any]) -> RegistryOptions:
    return RegistryOptions(
        cache=reg.get("cache") or None,
        staging=reg.get("staging") or None,
        publish=reg.get("publish") or None,
        gha_cache=reg.get("gha-cache", True),
        cache_mode=reg.get("cache-mode", "max"),
    )


def _size(value: Any, key: str, where: _Where) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise where.error(key, str(exc)) from None


def _image(name: str, img: dict[str, Any], runners_default: dict[str, tuple[str, ...]], where: _Where) -> ImageOptions:
    build_args = dict(img.get("build-args", {}))
    for arg in build_args:
        if _SECRET_NAME_RE.search(arg):
            raise where.error(f"images.{name}.build-args.{arg}", "looks like a secret; build args stay in "
                              "the image history, pass secrets as BuildKit secrets instead")
    img_runners = img.get("runners", {})
    return ImageOptions(
        name=name,
        dockerfile=img["dockerfile"],
        context=img.get("context", "."),
        target=img.get("target") or None,
        build_args=build_args,
        platforms=tuple(img.get("platforms", ["linux/amd64"])),
        runners={a: tuple(img_runners.get(a, runners_default[a])) for a in ARCHES},
        staging=img.get("staging") or None,
        publish=img.get("publish") or None,
        base_image=img.get("base-image") or None,
        size_budget=_size(img["size-budget"], f"images.{name}.size-budget", where) if "size-budget" in img else None,
        stage_budgets={stage: _size(budget, f"images.{name}.stage-budgets.{stage}", where)
                       for stage, budget in img.get("stage-budgets", {}).items()},
        identity=_identity(name, img.get("identity")),
        base=img.get("base") or None,
        cache_mounts=_cache_mounts(name, img.get("cache-mounts", []), where),
        attest=AttestOptions(provenance=(img.get("attest") or {}).get("provenance", "auto"),
                             sbom=(img.get("attest") or {}).get("sbom", False),
                             sbom_generator=(img.get("attest") or {}).get("sbom-generator") or None),
    )


def _cache_mounts(name: str, mounts: list[dict[str, Any]], where: _Where) -> tuple[CacheMountOptions, ...]:
    """images.<name>.cache-mounts: one entry per mount id, each with a cap above 0 bytes."""
    found: dict[str, int] = {}
    out = []
    for i, mount in enumerate(mounts):
        key = f"images.{name}.cache-mounts[{i}]"
        target = mount["target"].rstrip("/") or "/"
        if target == "/" or "/../" in f"{target}/" or "/./" in f"{target}/":
            raise where.error(f"{key}.target", f"{mount['target']!r} is not a folder a cache mount can be "
                                               "(an absolute path below /, without . or .. parts)")
        reserved = next((d for d in (mountfiles.IN_DIR, mountfiles.OUT_DIR) if f"{target}/".startswith(f"{d}/")), None)
        if reserved:
            raise where.error(f"{key}.target", f"{mount['target']!r} is in {reserved}, where ghbuild's restore and "
                                               "save steps put their own files; pick another folder")
        mount_id = mount.get("id") or mount["target"]
        if mount_id in found:
            raise where.error(f"{key}.id", f"{mount_id!r} is also the id of cache-mounts[{found[mount_id]}] "
                                           "(an id names one cache mount of the builder)")
        found[mount_id] = i
        size = _size(mount["max-size"], f"{key}.max-size", where) if "max-size" in mount else None
        if size == 0:
            raise where.error(f"{key}.max-size", "must be more than 0 bytes")
        out.append(CacheMountOptions(target=mount["target"], id=mount_id, uid=mount.get("uid"),
                                     gid=mount.get("gid"), mode=mount.get("mode"),
                                     **({"max_size": size} if size else {})))
    return tuple(out)


# An AWS region name (us-east-1, eu-central-2, us-gov-west-1): it becomes STS's and S3's host name.
AWS_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+\Z")


def _sccache(sc: dict[str, Any], where: _Where) -> SccacheOptions:
    endpoint = sc.get("endpoint", "")
    try:
        check_endpoint(endpoint)
    except ValueError as exc:
        raise where.error("sccache.endpoint", str(exc)) from None
    region = sc.get("region")
    if region and not AWS_REGION_RE.match(region):
        raise where.error("sccache.region", f"{region!r} is not an AWS region name (like us-east-1)")
    return SccacheOptions(
        enabled=sc.get("enabled", True),
        bucket=sc.get("bucket") or None,
        region=sc.get("region") or None,
        endpoint=endpoint or None,
        key_prefix=sc.get("key-prefix", "sccache"),
        helper_image=_helper_image(sc, where),
    )


def _trust(tr: dict[str, Any], where: _Where) -> TrustOptions:
    canonical = tr.get("canonical-repository") or None
    if canonical:
        try:
            canonical = naming.normalize_slug(canonical)
        except InvalidReferenceError as exc:
            raise where.error("trust.canonical-repository", str(exc)) from None
    return TrustOptions(canonical_repository=canonical, stable_branch=tr.get("stable-branch") or None,
                        self_hosted_for_forks=tr.get("self-hosted-for-forks", False),
                        hosted_runner_labels=tuple(tr.get("hosted-runner-labels", ())))


def _publish(pub: dict[str, Any], where: _Where) -> PublishOptions:
    publish = PublishOptions(
        nightly_tag=pub.get("nightly-tag", "nightly"),
        arch_suffixes={**DEFAULT_ARCH_SUFFIXES, **pub.get("arch-suffixes", {})},
        retention=pub.get("retention", 14),
    )
    if publish.arch_suffixes["amd64"] == publish.arch_suffixes["arm64"]:
        raise where.error("publish.arch-suffixes", "amd64 and arm64 need different suffixes")
    return publish


def _cache(section: dict[str, Any], where: _Where) -> CacheOptions:
    defaults = CacheOptions()
    budget = _size(section["budget"], "cache.budget", where) if "budget" in section else defaults.budget
    if budget <= 0:
        raise where.error("cache.budget", "must be more than 0 bytes")
    share = section.get("warn-share", defaults.warn_share)
    if not 0 <= share <= 1:    # NaN too: TOML has nan and inf, which no range check of the schema refuses
        raise where.error("cache.warn-share", f"{share!r} is not a share from 0 to 1 (0.8: warn at 80% of "
                                              "cache.budget; 0: no check)")
    return CacheOptions(budget=budget, warn_share=float(share))


def _build_section(bl: dict[str, Any]) -> BuildOptions:
    return BuildOptions(builder=bl.get("builder") or None, builder_network=bl.get("builder-network", "host"),
                        network=bl.get("network", "host"), provenance=bl.get("provenance", False),
                        base_image=bl.get("base-image") or None,
                        cache_mount_image=bl.get("cache-mount-image") or None,
                        sbom_generator=bl.get("sbom-generator") or None)


def _helper_image(sc: dict[str, Any], where) -> str:
    """An image reference with a tag or a digest (ghbuild pins a tag to its digest before each build)."""
    ref = sc.get("helper-image") or DEFAULT_SCCACHE_HELPER_IMAGE
    name, at, _digest = ref.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    try:
        if at:
            if not naming.is_digest_ref(ref):
                raise InvalidReferenceError(f"{ref!r} is not name@sha256:<64 hex>")
        else:
            naming.validate_repository(name[:colon] if colon > slash else name, "image")
            naming.validate_tag(name[colon + 1:] if colon > slash else "latest")
    except InvalidReferenceError as exc:
        raise ConfigError(f"{where('sccache.helper-image')}: {exc}") from None
    return ref


def repository_root(folder: Path) -> Path:
    """The git work tree holding `folder` (the nearest parent with a .git entry), else `folder` itself."""
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def _inside(root: Path, project: Path, value: str) -> str | None:
    """Why `value` (relative to the config's folder; a glob is read literally) leads out of `root`; None when
    it stays inside."""
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        return "an absolute path"
    lexical = Path(os.path.normpath(project / value))
    if lexical != root and root not in lexical.parents:
        return "'..' leads out of the repository"
    # Follow symlinks as far as the path exists (a link inside the tree may point anywhere); for a glob,
    # as far as its literal part: what it matches lies below that.
    literal = Path(os.path.normpath(project / re.sub(r"[*?\[].*", "", value)))
    real, real_root = Path(os.path.realpath(literal)), Path(os.path.realpath(root))
    if real != real_root and real_root not in real.parents:
        return "a symlink leads out of the repository"
    return None


def _check_paths(images: dict[str, ImageOptions], project: Path, where: _Where) -> None:
    """Every configured path stays inside the repository: a branch's config must not send the runner's
    home (a docker login's config.json, say) into a build context, or build from a file outside."""
    root = repository_root(project)
    kind = "git repository" if (root / ".git").exists() else "project folder"
    for name, image in images.items():
        checks = [("dockerfile", image.dockerfile), ("context", image.context)]
        checks += [(f"identity.inputs[{i}]", pattern)
                   for i, pattern in enumerate(image.identity.inputs if image.identity else ())]
        for key, value in checks:
            why = _inside(root, project.resolve(), value)
            if why:
                raise where.error(f"images.{name}.{key}", f"{value!r} is outside the {kind} "
                                  f"({why}; paths are relative to the config file's folder and stay inside "
                                  f"{root})")


def _identity(name: str, data: dict[str, Any] | None) -> IdentityOptions | None:
    if data is None:
        return None
    return IdentityOptions(version=data["version"], inputs=tuple(data.get("inputs", ())),
                           prefix=data.get("prefix") or name)


def _check_bases(images: dict[str, ImageOptions], where: _Where) -> None:
    """`base` names a content-addressed image built for every platform of the image using it."""
    for image in images.values():
        if not image.base:
            continue
        key = f"images.{image.name}.base"
        base = images.get(image.base)
        if base is None:
            raise where.error(key, f"no image named {image.base!r} (known: {', '.join(images)})")
        if base.identity is None:
            raise where.error(key, f"image {image.base!r} has no [images.{image.base}.identity] "
                              "table, so it has no content address to hand over by digest")
        if base.base:
            raise where.error(key, f"image {image.base!r} itself builds on {base.base!r}; "
                              "chains of content-addressed bases are not supported")
        missing = [p for p in image.platforms if p not in base.platforms]
        if missing:
            raise where.error(key, f"{image.base!r} is not built for {', '.join(missing)}")
        if image.base_image:
            raise where.error(f"images.{image.name}.base-image", "set either base-image or base, "
                              "not both")


def _check_repositories(options: Options, where: _Where) -> None:
    """Every repository template must expand to a valid name, and images must not share one."""
    for role in ("cache", "staging", "publish"):
        template = getattr(options.registries, role)
        if template:
            _check_template(template, f"registries.{role}", where)
    for role in ("staging", "publish"):
        seen: dict[str, str] = {}
        for image in options.images.values():
            own = getattr(image, role)
            key = f"images.{image.name}.{role}" if own else f"registries.{role}"
            template = own or getattr(options.registries, role)
            if not template:
                continue
            if own:
                _check_template(own, key, where)
            resolved = naming.expand_repository(template, image.name, "owner")
            if resolved in seen:
                raise where.error(key, f"images {seen[resolved]} and {image.name} would share the {role} "
                                       f"repository {resolved}; add {{image}} to the name or give each image its own")
            seen[resolved] = image.name


def _check_template(template: str, key: str, where: _Where) -> None:
    for placeholder in _PLACEHOLDER_RE.findall(template):
        if placeholder not in _PLACEHOLDERS:
            raise where.error(key, f"unknown placeholder {{{placeholder}}} (known: {{image}}, {{owner}})")
    try:
        naming.validate_repository(naming.expand_repository(template, "image", "owner"), where="")
    except InvalidReferenceError as exc:
        raise where.error(key, str(exc)) from None
