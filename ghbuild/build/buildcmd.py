"""Turn a plan job into the exact `docker buildx build` command. Pure: no I/O, no clock.

The builder's driver decides the outputs: the `docker` driver (the engine's own BuildKit) stores the image in
the engine and pushes it from there with one exporter; every other driver (docker-container, remote,
kubernetes) pushes and also loads it into the engine (`--load`, a second exporter: buildx >= 0.13) for the
layer audit. A cache the builder cannot use (`type=gha` without the runtime variables or on a BuildKit too old
for the cache service, any cache export on the docker driver without the containerd image store) is left out
and listed in `skipped`, one line each, so a difference from the plan is never silent.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from ghbuild.plan.planner import Job


class Secret(NamedTuple):
    """A BuildKit secret, mounted with `RUN --mount=type=secret,id=...`; only its file path is in argv."""

    id: str
    src: Path


class BuildSettings(NamedTuple):
    docker: str = "docker"
    project_dir: Path = Path(".")
    builder: str | None = None          # buildx builder name (or docker context)
    context: str | None = None          # another docker context's own builder: `docker --context NAME buildx`
    driver: str = "docker-container"    # the builder's buildx driver
    gha_problem: str | None = None      # why this builder and environment cannot use type=gha (None: they can)
    cache_export_problem: str | None = None   # why this builder cannot export any cache (None: it can)
    network: str | None = None          # e.g. "host", so the build reaches services on the runner
    push: bool = False
    extra_build_args: Mapping[str, str] = MappingProxyType({})   # BASE_IMAGE, SCCACHE_* (never secrets)
    extra_labels: Mapping[str, str] = MappingProxyType({})       # created, version
    secrets: tuple[Secret, ...] = ()
    metadata_file: Path | None = None
    iidfile: Path | None = None
    provenance: str = "off"             # off | min | max: attestations turn per-arch images into indexes
    sbom: str | None = None             # None: no SBOM; "": BuildKit's default generator; else the generator image
    uncompressed: bool = False          # new layers stored uncompressed (an image only read locally, never pushed)


class BuildCommand(NamedTuple):
    argv: tuple[str, ...]
    env: dict[str, str]                 # variables to add to the caller's environment
    skipped: tuple[str, ...]            # one line per plan feature not applied, with the reason

    def exports_every_stage(self) -> bool:
        """A mode=max cache export is in the command: BuildKit then makes a blob of every stage's layers."""
        return any(flag == "--cache-to" and _kv(spec).get("mode") == "max"
                   for flag, spec in itertools.pairwise(self.argv))

    def display(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)


def _kv(spec: str) -> dict[str, str]:
    out = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _gzip(spec: str) -> str:
    """An exporter spec that sends gzip blobs only. BuildKit reuses any blob a layer already has unless
    compression is forced, and the layer audit's stage images are stored uncompressed on the same builder:
    without this, those blobs (hundreds of MB for a toolchain layer) would be pushed and cached as they are.
    A compression the spec names itself is kept."""
    if "compression" in _kv(spec):
        return spec
    return f"{spec},compression=gzip,force-compression=true"


def build_command(job: Job, settings: BuildSettings) -> BuildCommand:
    project = settings.project_dir
    skipped: list[str] = []
    argv: list[str] = [settings.docker]
    if settings.context:
        argv += ["--context", settings.context, "buildx", "build"]
    else:
        argv += ["buildx", "build", *(["--builder", settings.builder] if settings.builder else [])]
    argv += ["--progress", "plain", "--platform", job.platform, "--file", str(project / job.dockerfile)]
    if job.target:
        argv += ["--target", job.target]
    if settings.network:
        argv += ["--network", settings.network]
        if settings.network == "host":
            argv += ["--allow", "network.host"]  # an entitlement in buildx

    build_args = {**job.build_args, **settings.extra_build_args}
    for key in sorted(build_args):
        argv += ["--build-arg", f"{key}={build_args[key]}"]
    labels = {**job.labels, **settings.extra_labels}
    for key in sorted(labels):
        argv += ["--label", f"{key}={labels[key]}"]
    for secret in settings.secrets:
        argv += ["--secret", f"id={secret.id},src={secret.src}"]

    for spec in job.cache_from:
        if _kv(spec).get("type") == "gha" and settings.gha_problem:
            skipped.append(f"cache-from {spec}: skipped: {settings.gha_problem}")
        else:
            argv += ["--cache-from", spec]
    for spec in job.cache_to:
        if settings.cache_export_problem:
            skipped.append(f"cache-to {spec}: skipped: {settings.cache_export_problem}")
        elif _kv(spec).get("type") == "gha" and settings.gha_problem:
            skipped.append(f"cache-to {spec}: skipped: {settings.gha_problem}")
        else:
            argv += ["--cache-to", _gzip(spec)]

    argv += ["--provenance=false" if settings.provenance == "off" else f"--provenance=mode={settings.provenance}"]
    if settings.sbom is not None:
        argv += [f"--sbom=generator={settings.sbom}" if settings.sbom else "--sbom=true"]
    if settings.metadata_file:
        argv += ["--metadata-file", str(settings.metadata_file)]
    for tag in job.tags:
        argv += ["--tag", tag]
    pushes = settings.push and bool(job.tags)
    if pushes:
        argv += ["--output", _gzip("type=image,push=true")]
    # Into the engine's image store too, for the layer audit and smoke tests: the docker driver's image exporter
    # already stores it there (a second exporter would collide with it on the tag); other drivers load it.
    if settings.uncompressed and not pushes:
        exporter = "image" if settings.driver == "docker" else "docker"
        argv += ["--output", f"type={exporter},compression=uncompressed"]
    elif settings.driver != "docker" or not pushes:
        argv += ["--load"]
    if settings.iidfile:
        argv += ["--iidfile", str(settings.iidfile)]
    argv.append(str(project / job.context))
    return BuildCommand(argv=tuple(argv), env={}, skipped=tuple(skipped))
