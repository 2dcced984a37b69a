"""`ghbuild identity` and `ghbuild ensure-base`: content-addressed base images.

ensure-base computes the base's identity, looks `<prefix>-<identity>` up (canonical ref first, then
this scope's own ref), and hands over `name@sha256:...` when a ref is present with matching identity
labels. Only a confirmed miss everywhere builds it (through the normal build path, labelled with the
identity), pushes it to the one ref this run may write, and checks the labels on the pushed digest.
A lookup that fails (network, 5xx, auth) fails the command: a failure is never taken for a miss, so
nothing is ever rebuilt over a ref that exists.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ghbuild import naming, render
from ghbuild.bases import identity as ident
from ghbuild.build import buildjob, sccache
from ghbuild.build.report import check_budgets
from ghbuild.config.options import Options
from ghbuild.errors import BaseMismatchError, BaseMissingError, ConfigError, TrustError
from ghbuild.plan.planner import Job, Plan, base_refs
from ghbuild.registry.lookup import RegistryFactory, registry_lookup

LABEL_IDENTITY = "org.ghbuild.identity"
LABEL_VERSION = "org.ghbuild.identity.version"
LABEL_PLATFORM = "org.ghbuild.identity.platform"



class EnsureResult(SimpleNamespace):
    """What ensure-base found or built, filled in as it goes."""

    image: str
    arch: str
    identity: str
    ref: str | None               # name@sha256:<64 hex>
    digest: str | None
    built: bool
    found_at: str | None          # the tag it was found at, or written to
    looked_up: list[str]
    dry_run: bool
    build_report: dict[str, Any] | None
    identity_detail: dict[str, Any] | None

    def __init__(self, image: str, arch: str, identity: str, ref: str | None, digest: str | None, built: bool,
                 found_at: str | None, looked_up: list[str] | None = None, dry_run: bool = False,
                 build_report: dict[str, Any] | None = None, identity_detail: dict[str, Any] | None = None) -> None:
        super().__init__(image=image, arch=arch, identity=identity, ref=ref, digest=digest, built=built,
                         found_at=found_at, looked_up=looked_up if looked_up is not None else [], dry_run=dry_run,
                         build_report=build_report, identity_detail=identity_detail)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compute_identity(options: Options, job: Job, lookup: Callable[[str], str | None],
                     base_image: str | None = None) -> ident.Identity:
    """`lookup`: ref -> digest (registry_lookup), for the images the stages use: the base, and the sccache helper
    as configured (sccache.helper-image, pinned as `ghbuild build` pins it), never the Dockerfile's default."""
    image = options.images[job.image]
    assert image.identity is not None
    project = options.project_dir
    root = ident.repository_root(project)
    # The .dockerignore files decide what of the context the build sees: implicit inputs.
    context_dir = os.path.normpath(image.context)
    ignores = [os.path.join(context_dir, ".dockerignore"), image.dockerfile + ".dockerignore"]
    patterns = ident.root_patterns(root, project, [*image.identity.inputs,
                                                   *(p for p in ignores if (project / p).exists())])
    inputs = ident.git_inputs(root, patterns)
    base = base_image or image.base_image or options.build.base_image
    helper, _ = sccache.helper_image(options, project / image.dockerfile, lookup)
    arg_values = {**image.build_args, **({sccache.HELPER_BUILD_ARG: helper} if helper else {}),
                  **({"BASE_IMAGE": base} if base else {})}
    stages = ident.stage_source(project / image.dockerfile, image.target, arg_values)

    def resolve(ref: str) -> str:
        digest = lookup(ref)
        if digest is None:
            raise ConfigError(f"base image {ref} does not exist in its registry (the identity needs its digest)")
        return digest

    bases = ident.base_digests(stages.external, resolve)
    return ident.compute(version=image.identity.version, platform=job.platform, inputs=inputs, stages=stages,
                         build_args={**image.build_args, "(context)": Path(context_dir).as_posix()}, bases=bases)


def base_identities(options: Options, plan: Plan, factory: RegistryFactory) -> dict[str, str]:
    """Job id -> identity for every content-addressed base job of the plan (reads git, resolves base digests)."""
    lookup = registry_lookup(factory)
    return {job.id: compute_identity(options, job, lookup).identity for job in plan.jobs if job.identity_prefix}


def _image_labels(reg, repo: str, digest: str, platform: str) -> tuple[str, dict[str, str]]:
    """(single-image digest, labels) behind a digest; an index is narrowed to the platform's entry."""
    manifest = reg.get_manifest(repo, digest)
    if manifest.is_index:
        # "linux/arm64" matches an entry that also names its variant ("linux/arm64/v8")
        child = next((d for key, d in manifest.platforms().items()
                      if key == platform or key.startswith(platform + "/")), None)
        if child is None:
            raise BaseMismatchError(f"{reg.host}/{repo}@{digest} has no {platform} image")
        manifest = reg.get_manifest(repo, child.digest)
    config = json.loads(reg.read_blob(repo, manifest.data["config"]["digest"]))
    labels = (config.get("config") or {}).get("Labels") or {}
    return manifest.digest, labels


def _check_labels(where: str, labels: Mapping[str, str], identity: str) -> None:
    found = labels.get(LABEL_IDENTITY)
    if found != identity:
        raise BaseMismatchError(
            f"{where}: its {LABEL_IDENTITY} label is {found or '(missing)'}, not {identity}; refusing to use it "
            "or to build over it (delete the tag if it is known to be wrong)")


def _remembered(lookup: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """The same answer for a ref every time it is asked (one registry lookup each)."""
    seen: dict[str, str | None] = {}

    def remembered(ref: str) -> str | None:
        if ref not in seen:
            seen[ref] = lookup(ref)
        return seen[ref]
    return remembered


def labels_for(identity: ident.Identity) -> dict[str, str]:
    return {LABEL_IDENTITY: identity.identity, LABEL_VERSION: identity.version, LABEL_PLATFORM: identity.platform}


def ensure(plan: Plan, options: Options, image: str, arch: str, env: Mapping[str, str], factory: RegistryFactory,
           *, base_image: str | None = None, dry_run: bool = False, echo: bool = True, lookup_only: bool = False,
           log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> EnsureResult:
    job = plan.job(image, arch)
    lookup = _remembered(registry_lookup(factory))
    identity = compute_identity(options, job, lookup, base_image)
    refs = base_refs(plan, job, identity.identity)
    result = EnsureResult(image=image, arch=arch, identity=identity.identity, ref=None, digest=None, built=False,
                          found_at=None, dry_run=dry_run, identity_detail=identity.to_dict())

    for ref in refs.read:
        host, repo, tag = naming.split_reference(ref)
        reg = factory(host)
        result.looked_up.append(ref)
        desc = reg.resolve(repo, tag)            # raises on anything but a confirmed 404
        if desc is None:
            log(f"ensure-base: {ref}: not there")
            continue
        digest, labels = _image_labels(reg, repo, desc.digest, job.platform)
        _check_labels(ref, labels, identity.identity)
        result.ref, result.digest, result.found_at = f"{host}/{repo}@{digest}", digest, ref
        log(f"ensure-base: {ref}: present with identity {identity.identity[:12]}: no build")
        return result

    if lookup_only:
        raise BaseMissingError(f"{image}/{arch}: base identity {identity.identity[:12]} is in no registry "
                               f"({', '.join(refs.read)}); --lookup-only builds nothing (run ensure-base without it, "
                               "as the workflow's bases job does)")
    if refs.write is None:
        raise TrustError(
            f"{image}/{arch}: base identity {identity.identity[:12]} is in no registry "
            f"({', '.join(refs.read)}) and this run may not push it ({plan.trust.reason}); "
            "a trusted run (or one with registry credentials) has to build it first")
    result.built, result.found_at = True, refs.write
    if dry_run:
        log(f"ensure-base: would build {image}/{arch} and push {refs.write}")
        return result

    resolved_base = base_image or options.images[image].base_image or options.build.base_image
    if resolved_base and not naming.is_digest_ref(resolved_base) and resolved_base in identity.bases:
        # Build FROM exactly the digest the identity hashed, not whatever the tag says by now.
        resolved_base = naming.pinned(resolved_base, identity.bases[resolved_base])
    # The sccache helper the identity hashed (the lookup remembers its digest), not a newer one.
    helper, _ = sccache.helper_image(options, options.project_dir / options.images[image].dockerfile, lookup)
    request = buildjob.BuildRequest(image=image, arch=arch, push=True, base_image=resolved_base, echo=echo,
                                 tags=(refs.write,), labels=labels_for(identity), helper_image=helper)
    report = buildjob.run(plan, options, request, env)
    result.build_report = report.to_dict()
    buildjob.outputs(report)
    log(render.build_text(report))
    check_budgets(report)
    host, repo, tag = naming.split_reference(refs.write)
    reg = factory(host)
    desc = reg.resolve(repo, tag)
    if desc is None:
        raise BaseMismatchError(f"{refs.write}: not in the registry after the push")
    digest, labels = _image_labels(reg, repo, desc.digest, job.platform)
    _check_labels(f"{refs.write} (just pushed)", labels, identity.identity)
    result.ref, result.digest = f"{host}/{repo}@{digest}", digest
    log(f"ensure-base: built and pushed {refs.write} -> {result.ref}")
    return result
